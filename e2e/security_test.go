package e2e

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/client"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a server certificate for 127.0.0.1 and its key, as PEM.
func (ca *testCA) issue(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "ontime test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	// Written aside and renamed, as a secret mount or an ACME client
	// does: the server never reads half a file.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestServeTLSTokensAndReload runs `ontime serve` with tls.* and a token:
// clients trusting the test CA and carrying the token are served, others
// refused; a new certificate (another CA) is served after SIGHUP; the
// token never appears in the node's log.
func TestServeTLSTokensAndReload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca1, ca2 := newTestCA(t, "ontime test CA 1"), newTestCA(t, "ontime test CA 2")
	certFile, keyFile := filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key")
	crt, key := ca1.issue(t)
	writeFile(t, certFile, crt)
	writeFile(t, keyFile, key)
	ca1File, ca2File := filepath.Join(dir, "ca1.pem"), filepath.Join(dir, "ca2.pem")
	writeFile(t, ca1File, ca1.pem)
	writeFile(t, ca2File, ca2.pem)
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
	task, created, err := c1.Submit(ctx, apiv1.TaskRequest{Topic: "tls.e2e", Delay: "1h"})
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
	crt, key = ca2.issue(t)
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
	cmd := exec.Command(ontimeBinary(t), "serve", "--config", cfgPath)
	cmd.Env = append(os.Environ(), "ONTIME_LISTEN="+addr)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &serveProc{cmd: cmd, done: make(chan error, 1), logs: &strings.Builder{}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.logs.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
		}
		p.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	waitFor(t, 60*time.Second, "ontime serve ready", func() bool {
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("ontime serve exited: %v\n%s", err, p.log())
		default:
		}
		return strings.Contains(p.log(), "ontime serving")
	})
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
