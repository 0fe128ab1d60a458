package e2e

import (
	"bufio"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/client"
	"github.com/ontimehq/ontime/internal/testca"
)

func writeFile(t *testing.T, path string, b []byte) { testca.Write(t, path, b) }

// TestServeTLSTokensAndReload runs `ontime serve` with tls.* and a token:
// clients trusting the test CA and carrying the token are served, others
// refused; a new certificate (another CA) is served after SIGHUP; the
// token never appears in the node's log.
func TestServeTLSTokensAndReload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca1, ca2 := testca.New(t, "ontime test CA 1"), testca.New(t, "ontime test CA 2")
	ca1File, certFile, keyFile := ca1.Files(t, dir, "server")
	ca2File := filepath.Join(dir, "ca2.pem")
	writeFile(t, ca2File, ca2.PEM)
	const token = "e2e-admin-token-5f1c0a9b7d"
	writeFile(t, filepath.Join(dir, "admin.token"), []byte(token+"\n"))
	cfg := filepath.Join(dir, "ontime.yaml")
	writeFile(t, cfg, []byte(fmt.Sprintf(`data_dir: %s
log_level: debug
store: {tables: 2, segments: 1}
tls: {cert_file: %s, key_file: %s}
auth:
  tokens:
    - {name: ops, token_file: %s, role: admin}
`, filepath.Join(dir, "data"), certFile, keyFile, filepath.Join(dir, "admin.token"))))
	addr := freeAddr(t)
	p := startServeTLS(t, cfg, addr)
	base := "https://" + addr

	c1, err := client.New(base, client.WithCAFile(ca1File), client.WithToken(token))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	task, created, err := c1.Submit(ctx, apiv1.TaskRequest{Topic: "tls.e2e", Delay: "1h", Target: "http://127.0.0.1:9/hook"})
	if err != nil || !created {
		t.Fatalf("submit over TLS with the token: %v", err)
	}
	noToken, _ := client.New(base, client.WithCAFile(ca1File))
	if _, err := noToken.Get(ctx, task.ID); !client.HasCode(err, apiv1.CodeUnauthorized) {
		t.Fatalf("without a token: %v", err)
	}
	untrusting, _ := client.New(base, client.WithToken(token))
	var uae x509.UnknownAuthorityError
	if _, err := untrusting.Get(ctx, task.ID); !errors.As(err, &uae) {
		t.Fatalf("a client without the CA: %v", err)
	}
	plain, _ := client.New("http://"+addr, client.WithToken(token))
	if _, err := plain.Get(ctx, task.ID); err == nil {
		t.Fatal("plain HTTP was served")
	}

	// Rotate to a certificate of CA 2, then SIGHUP.
	crt, key := ca2.Issue(t)
	writeFile(t, certFile, crt)
	writeFile(t, keyFile, key)
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	c2, _ := client.New(base, client.WithCAFile(ca2File), client.WithToken(token))
	waitFor(t, 30*time.Second, "the new certificate served", func() bool {
		_, err := c2.Get(ctx, task.ID)
		return err == nil
	})
	// A new connection (open ones keep the certificate they began with).
	c1, _ = client.New(base, client.WithCAFile(ca1File), client.WithToken(token))
	if _, err := c1.Get(ctx, task.ID); !errors.As(err, &uae) {
		t.Fatalf("the old CA still verifies the server: %v", err)
	}
	if !strings.Contains(p.log(), "certificate reloaded") {
		t.Errorf("no reload in the log:\n%s", p.log())
	}
	if err := p.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("serve exited with %v\n%s", err, p.log())
	}
	if strings.Contains(p.log(), token) {
		t.Fatalf("the token is in the log:\n%s", p.log())
	}
}

// startServeTLS starts `ontime serve` and waits for its /readyz over TLS
// (any certificate: readiness is all this checks).
func startServeTLS(t *testing.T, cfgPath, addr string) *serveProc {
	t.Helper()
	p := spawnServe(t, cfgPath, addr)
	p.waitReady(t, func() bool { return strings.Contains(p.log(), "ontime serving") })
	return p
}

// A non-loopback listen without tokens stops `ontime serve` with one line
// that says why and how to proceed.
func TestServeRefusesOpenNonLoopbackListen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "ontime.yaml")
	writeFile(t, cfg, []byte("data_dir: "+filepath.Join(dir, "data")+"\n"))
	cmd := exec.Command(ontimeBinary(t), "serve", "--config", cfg)
	cmd.Env = append(os.Environ(), "ONTIME_LISTEN=0.0.0.0:0")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("serve: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "not a loopback address") || !strings.Contains(lines[0], "auth.insecure") {
		t.Fatalf("want one line naming the reason and auth.insecure; got:\n%s", out)
	}
	// Accepted when insecure is said out loud.
	cmd = exec.Command(ontimeBinary(t), "serve", "--config", cfg)
	cmd.Env = append(os.Environ(), "ONTIME_LISTEN=0.0.0.0:"+strings.Split(freeAddr(t), ":")[1], "ONTIME_AUTH_INSECURE=true")
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.Contains(line, "ontime listening on http://") {
		t.Fatalf("insecure serve: %q %v", line, err)
	}
}
