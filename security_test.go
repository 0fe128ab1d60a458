package ontime_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/client"
	"github.com/ontimehq/ontime/internal/testca"
)

// testResolver answers names as an attacker's DNS would.
type testResolver map[string]string

func (r testResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r[host]; ok {
		return []netip.Addr{netip.MustParseAddr(a)}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// syncBuffer is a log sink the node writes from many goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// secureNode runs a node whose API is served on a listener it knows the
// address of in advance (so that address is "ontime's own API"), with
// opts; it returns a client and the API address.
func secureNode(t *testing.T, mod func(*ontime.Config), opts ...ontime.NodeOption) (*client.Client, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := ontime.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Store.Tables = 2
	cfg.Listen = ln.Addr().String()
	cfg.Hot.Window = ontime.Duration(time.Second)
	cfg.Delivery.RetryBase = ontime.Duration(10 * time.Millisecond)
	cfg.Delivery.RetryMax = ontime.Duration(50 * time.Millisecond)
	if mod != nil {
		mod(&cfg)
	}
	ctx := context.Background()
	node, err := ontime.NewNode(ctx, cfg, opts...)
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	if err := node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: node.HTTPHandler()}}
	srv.Start()
	t.Cleanup(func() {
		srv.Close()
		_ = node.Stop(context.Background())
	})
	c, err := client.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return c, cfg.Listen
}

func waitStatus(t *testing.T, c *client.Client, id, status string) *client.Task {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		tk, err := c.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if tk.Status == status {
			return tk
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s is %s (%s), want %s", id, tk.Status, tk.LastError, status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// SSRF: literal denied hosts are refused at submit with 400 naming target;
// names that resolve to denied addresses (the metadata service, ontime's
// own API) fail at dial time, permanently, after one attempt.
func TestTargetPolicyAtSubmitAndDial(t *testing.T) {
	t.Parallel()
	var hits sync.Map
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Store(r.URL.Path, true) }))
	defer rcv.Close()
	_, rport, _ := net.SplitHostPort(rcv.Listener.Addr().String())
	res := testResolver{"metadata.attacker.example": "169.254.169.254", "receiver.example": "127.0.0.1", "self.attacker.example": "127.0.0.1"}
	c, own := secureNode(t, nil, ontime.WithResolver(res))
	_, ownPort, _ := net.SplitHostPort(own)
	ctx := context.Background()
	for _, target := range []string{
		"http://169.254.169.254/latest/meta-data/iam/", "http://2852039166/", "http://0xa9fea9fe/",
		"http://[::ffff:169.254.169.254]/", "http://0.0.0.0:" + rport + "/", "http://[::]:" + rport + "/",
		"http://2130706433:" + rport + "/", "http://metadata.google.internal/", "http://[fe80::1]/",
		"http://" + own + "/v1/tasks/x:requeue", "http://[::ffff:127.0.0.1]:" + ownPort + "/v1/tasks",
	} {
		_, _, err := c.Submit(ctx, client.TaskRequest{Topic: "ssrf", Target: target})
		var ae *client.APIError
		if !asAPIError(err, &ae) || ae.Status != 400 || ae.Field != "target" {
			t.Errorf("%s: %v; want 400 naming target", target, err)
		}
	}
	// Names: accepted at submit, refused when dialled, never retried.
	for _, target := range []string{
		"http://metadata.attacker.example/latest/meta-data/",
		"http://self.attacker.example:" + ownPort + "/v1/tasks",
	} {
		tk, _, err := c.Submit(ctx, client.TaskRequest{Topic: "ssrf", Target: target, MaxAttempts: 5})
		if err != nil {
			t.Fatalf("%s: %v", target, err)
		}
		dead := waitStatus(t, c, tk.ID, "dead")
		if dead.Attempts != 1 || !strings.Contains(dead.LastError, "denied by the delivery policy") {
			t.Errorf("%s: %d attempts, last_error %q", target, dead.Attempts, dead.LastError)
		}
	}
	// An allowed name is delivered.
	tk, _, err := c.Submit(ctx, client.TaskRequest{Topic: "ssrf", Target: "http://receiver.example:" + rport + "/ok"})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, tk.ID, "done")
	if _, ok := hits.Load("/ok"); !ok {
		t.Fatal("the allowed receiver was not called")
	}
}

// Loopback and private ranges are one line away from denied.
func TestTargetPolicyLockedDown(t *testing.T) {
	t.Parallel()
	c, _ := secureNode(t, func(cfg *ontime.Config) {
		cfg.Delivery.DenyTargets = []string{"127.0.0.0/8", "::1/128", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7"}
	})
	for _, target := range []string{"http://127.0.0.1:9/", "http://[::1]:9/", "http://10.1.1.1/", "http://[fd00::1]/", "http://192.168.1.1/"} {
		_, _, err := c.Submit(context.Background(), client.TaskRequest{Topic: "ssrf", Target: target})
		var ae *client.APIError
		if !asAPIError(err, &ae) || ae.Status != 400 || ae.Field != "target" {
			t.Errorf("%s: %v; want 400 naming target", target, err)
		}
	}
}

func asAPIError(err error, ae **client.APIError) bool {
	e, ok := err.(*client.APIError)
	*ae = e
	return ok
}

// No read-back: a receiver's error answer is not shown to API readers,
// unless its host is in delivery.echo_error_targets, and then as a short
// sanitized excerpt.
func TestNoReadBackOfReceiverAnswers(t *testing.T) {
	t.Parallel()
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(500)
		io.WriteString(w, `{"internal":"db password is hunter2", "trace": "`+strings.Repeat("frame;", 100)+`"}`)
	}))
	defer rcv.Close()
	_, port, _ := net.SplitHostPort(rcv.Listener.Addr().String())
	c, _ := secureNode(t, func(cfg *ontime.Config) { cfg.Delivery.EchoErrorTargets = []string{"localhost"} })
	ctx := context.Background()
	quiet, _, err := c.Submit(ctx, client.TaskRequest{Topic: "rb", Target: rcv.URL + "/x", MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	echoed, _, err := c.Submit(ctx, client.TaskRequest{Topic: "rb", Target: "http://localhost:" + port + "/x", MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := waitStatus(t, c, quiet.ID, "dead").LastError; got != "webhook answered HTTP 500" {
		t.Errorf("last_error %q", got)
	}
	got := waitStatus(t, c, echoed.ID, "dead").LastError
	if !strings.HasPrefix(got, `webhook answered HTTP 500: {"internal":"db password is hunter2", "trace"`) || len(got) > len("webhook answered HTTP 500: ")+64 {
		t.Errorf("echoed last_error %q", got)
	}
}

// Secrets never reach a log line or an error: tokens, webhook secrets, a
// Redis password (in a redis:// URL and from a file), even when a
// receiver answers with one of them.
func TestSecretsAbsentFromLogs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const (
		token     = "log-test-token-9c2e5d41a7"
		hookKey   = "log-test-webhook-key-77d1"
		redisPass = "log-test-redis-pass-31f0"
	)
	redisAddr := startRedisWithPassword(t, redisPass)
	os.WriteFile(filepath.Join(dir, "token"), []byte(token), 0o600)
	os.WriteFile(filepath.Join(dir, "hook"), []byte(hookKey+"\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "redis"), []byte(redisPass), 0o600)
	// A receiver that answers with the secrets it can see, as a careless
	// debug endpoint would.
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(500)
		fmt.Fprintf(w, "bad signature %s, key %s", r.Header.Get("Ontime-Signature")[:30], hookKey)
	}))
	defer rcv.Close()
	var logs syncBuffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	mod := func(cfg *ontime.Config) {
		cfg.Auth.Tokens = []ontime.TokenConfig{{Name: "ops", TokenFile: filepath.Join(dir, "token"), Role: "admin"}}
		cfg.Delivery.WebhookSecretFile = filepath.Join(dir, "hook")
		cfg.Delivery.EchoErrorTargets = []string{"127.0.0.1"}
		cfg.Hot.Tier = "redis"
		cfg.Hot.RedisAddrs = []string{"redis://default:" + redisPass + "@" + redisAddr}
		cfg.Hot.RedisPrefix = "logtest"
	}
	c, own := secureNode(t, mod, ontime.WithLogger(log))
	authed, _ := client.New("http://"+own, client.WithToken(token))
	ctx := context.Background()
	tk, _, err := authed.Submit(ctx, client.TaskRequest{Topic: "logs", Target: rcv.URL + "/hook", MaxAttempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	dead := waitStatus(t, authed, tk.ID, "dead")
	for _, s := range []string{token, hookKey, redisPass} {
		if strings.Contains(dead.LastError, s) {
			t.Errorf("last_error shows a secret: %q", dead.LastError)
		}
	}
	if !strings.Contains(dead.LastError, "REDACTED") {
		t.Errorf("last_error %q: the receiver's echo of the key should be masked", dead.LastError)
	}
	// Wrong tokens and a wrong Redis password: errors and logs, no secret.
	if _, err := c.Get(ctx, tk.ID); err == nil {
		t.Fatal("served without a token")
	}
	cfg := ontime.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Hot.Tier = "redis"
	cfg.Hot.RedisAddrs = []string{"redis://default:not-the-" + redisPass + "@" + redisAddr}
	_, err = ontime.NewNode(ctx, cfg, ontime.WithLogger(log))
	if err == nil || !strings.Contains(err.Error(), "hot.redis_addrs") || strings.Contains(err.Error(), redisPass) {
		t.Errorf("wrong Redis password: %v", err)
	}
	// The Redis password from a file, without it in the URL, works too.
	mod2 := func(cfg *ontime.Config) {
		cfg.Hot.Tier = "redis"
		cfg.Hot.RedisAddrs = []string{redisAddr}
		cfg.Hot.RedisPasswordFile = filepath.Join(dir, "redis")
		cfg.Hot.RedisPrefix = "logtest2"
	}
	c2, _ := secureNode(t, mod2, ontime.WithLogger(log))
	if _, _, err := c2.Submit(ctx, client.TaskRequest{Topic: "logs", Target: rcv.URL + "/hook"}); err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if !strings.Contains(out, "delivery failed") {
		t.Fatalf("the test logged nothing of the deliveries:\n%.2000s", out)
	}
	for _, s := range []string{token, hookKey, redisPass} {
		if strings.Contains(out, s) {
			t.Errorf("the log holds secret %q:\n%s", s, grepSecretLines(out, s))
		}
	}
}

func grepSecretLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// startRedisWithPassword runs a private redis-server that requires a
// password, on a free loopback port, until the test ends.
func startRedisWithPassword(t *testing.T, password string, tlsFiles ...string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	args := []string{"--port", strconv.Itoa(port)}
	if len(tlsFiles) == 3 { // ca, cert, key: TLS only
		args = []string{"--port", "0", "--tls-port", strconv.Itoa(port), "--tls-ca-cert-file", tlsFiles[0],
			"--tls-cert-file", tlsFiles[1], "--tls-key-file", tlsFiles[2], "--tls-auth-clients", "no"}
	}
	cmd := exec.Command("redis-server", append(args, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", t.TempDir(), "--requirepass", password)...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("redis-server is required: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := "127.0.0.1:" + strconv.Itoa(port)
	for deadline := time.Now().Add(10 * time.Second); ; {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server did not listen on %s", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// rediss:// with a private CA (hot.redis_ca_file) and a password: the hot
// tier works over TLS; without the CA the node does not start.
func TestRedisTLSAndPassword(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	caFile, certFile, keyFile := testca.New(t, "redis test CA").Files(t, dir, "redis")
	const pw = "redis-tls-pass-8d2a"
	addr := startRedisWithPassword(t, pw, caFile, certFile, keyFile)
	cfg := ontime.DefaultConfig()
	cfg.DataDir = dir
	cfg.Store.Tables = 2
	cfg.Hot.Tier = "redis"
	cfg.Hot.RedisAddrs = []string{"rediss://:" + pw + "@" + addr}
	ctx := context.Background()
	// The dial and handshake share a 2 s budget; a machine too busy to
	// finish the handshake in it reports a deadline instead of the
	// certificate, so that answer is asked again.
	var err error
	for range 5 {
		if _, err = ontime.NewNode(ctx, cfg); err == nil || !strings.Contains(err.Error(), "deadline exceeded") {
			break
		}
	}
	if err == nil || !strings.Contains(err.Error(), "certificate") || strings.Contains(err.Error(), pw) {
		t.Fatalf("without the CA: %v", err)
	}
	cfg.Hot.RedisCAFile = caFile
	node, err := ontime.NewNode(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	node.Handle("tls.redis", func(_ context.Context, d *ontime.Delivery) error { got <- d.ID; return nil })
	if err := node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer node.Stop(context.Background())
	tk, _, err := node.Submit(ctx, ontime.TaskSpec{Topic: "tls.redis", Delay: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-got:
		if id != tk.ID {
			t.Fatalf("delivered %s, want %s", id, tk.ID)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("not delivered through the TLS hot tier")
	}
}
