package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startServe runs `ontime serve` with the config yaml (listen and data_dir
// are added) and returns its address once it listens.
func startServe(t *testing.T, yaml string, args ...string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "ontime.yaml")
	yaml = fmt.Sprintf("listen: 127.0.0.1:0\ndata_dir: %s\nlog_level: error\nstore:\n  tables: 2\n%s", filepath.Join(dir, "data"), yaml)
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"serve", "--config", cfg}, args...), pw, io.Discard)
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("serve exited %d", code)
		}
	})
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("serve did not start: %v", err)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "ontime listening on http://")
	var js struct{ Listening string }
	if json.Unmarshal([]byte(line), &js) == nil {
		addr, ok = strings.CutPrefix(js.Listening, "http://")
	}
	if !ok {
		t.Fatalf("serve printed %q", line)
	}
	return addr
}

// closedWithin reports whether the server closes c within d, reading (and
// dropping) whatever it answers first.
func closedWithin(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	// EOF (nil from Copy) or a reset: closed. Our own deadline: still open.
	return !errors.Is(err, os.ErrDeadlineExceeded)
}

// TestServeCutsSlowAndIdleClients: a client trickling a body is cut off
// after http.read_timeout, an idle keep-alive connection after
// http.idle_timeout.
func TestServeCutsSlowAndIdleClients(t *testing.T) {
	t.Parallel()
	addr := startServe(t, "http:\n  read_timeout: 300ms\n  write_timeout: 2s\n  idle_timeout: 300ms\n  read_header_timeout: 300ms\n")

	// A body of 1,000 bytes sent a byte every 50 ms would take 50 s.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	fmt.Fprintf(c, "POST /v1/tasks HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n")
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
				if _, err := c.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	}()
	if !closedWithin(c, 10*time.Second) {
		t.Fatal("a client trickling a body was still connected after 10s; read_timeout is 300ms")
	}
	if el := time.Since(start); el < 250*time.Millisecond {
		t.Fatalf("cut off after %s, before the read timeout", el)
	}

	// Idle keep-alive: one request, then nothing.
	k, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	// Timed from before the request: the server's idle timer starts when
	// it has answered, which a busy machine may show the client much later.
	start = time.Now()
	fmt.Fprintf(k, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(k), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	resp.Body.Close()
	if !closedWithin(k, 10*time.Second) {
		t.Fatal("an idle keep-alive connection was still open after 10s; idle_timeout is 300ms")
	}
	if el := time.Since(start); el < 250*time.Millisecond {
		t.Fatalf("idle connection closed after %s, before the idle timeout", el)
	}
}

// TestServeLimitsConnections: past http.max_connections, a new connection
// is not served until one of the open ones closes.
func TestServeLimitsConnections(t *testing.T) {
	t.Parallel()
	addr := startServe(t, "http:\n  max_connections: 2\n  read_header_timeout: 10s\n  idle_timeout: 10s\n")
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	get := func(timeout time.Duration) error {
		cl := &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := cl.Get("http://" + addr + "/healthz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}
	if err := get(300 * time.Millisecond); err == nil {
		t.Fatal("a third connection was served while two were open; max_connections is 2")
	}
	held[0].Close()
	if err := get(3 * time.Second); err != nil {
		t.Fatalf("after one connection closed: %v", err)
	}
}

// TestServeJSON: with --json the line saying where the node listens is
// JSON, and the node serves there.
func TestServeJSON(t *testing.T) {
	t.Parallel()
	addr := startServe(t, "", "--json")
	code, out, errs := runCLI("cluster", "--server", addr, "--json")
	if code != 0 || !strings.Contains(out, `"coordinator":"none"`) {
		t.Fatalf("cluster against serve --json: %d %q %q", code, out, errs)
	}
}

// TestServeChecksThePortFirst: a taken port is the error even when the
// store could not be reached either: the port is bound before the store is
// opened (connections, migrations).
func TestServeChecksThePortFirst(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "ontime.yaml")
	yaml := fmt.Sprintf("listen: %s\ndata_dir: %s\nstore:\n  driver: postgres\n  databases: [\"postgres://u@127.0.0.1:1/db?connect_timeout=30\"]\n", taken.Addr(), dir)
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := runCLI("serve", "--config", cfg)
	if code != exitError || !strings.Contains(errs, "listen: cannot listen on "+taken.Addr().String()) || !strings.Contains(errs, "address already in use") {
		t.Fatalf("exit %d %q", code, errs)
	}
	oneLine(t, errs)
}

// TestServeCheckPackagedConfig: the shipped packaging/ontime.yaml is valid
// and its connections are reachable (serve --check exits 0); a config
// whose store cannot be reached fails the check, naming the key.
func TestServeCheckPackagedConfig(t *testing.T) {
	t.Setenv("ONTIME_DATA_DIR", t.TempDir())
	var out, errs strings.Builder
	if code := run(context.Background(), []string{"serve", "--config", "../../packaging/ontime.yaml", "--check"}, &out, &errs); code != 0 {
		t.Fatalf("serve --check packaging/ontime.yaml: exit %d\n%s", code, errs.String())
	}
	if !strings.HasPrefix(out.String(), "config ok: store sqlite") {
		t.Fatalf("serve --check printed %q", out.String())
	}

	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("store:\n  driver: mysql\n  databases: [\"root@tcp(127.0.0.1:1)/nope\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errs.Reset()
	if code := run(context.Background(), []string{"serve", "--config", bad, "--check"}, &out, &errs); code == 0 || !strings.Contains(errs.String(), "store.databases[0]") {
		t.Fatalf("serve --check with an unreachable store: exit %d, %q", code, errs.String())
	}
	out.Reset()
	errs.Reset()
	if code := run(context.Background(), []string{"serve", "--config", bad, "--check"}, &out, &errs); code == 0 || out.Len() != 0 {
		t.Fatalf("a failed check printed %q", out.String())
	}
	if err := os.WriteFile(bad, []byte("hot:\n  window: 30\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	errs.Reset()
	if code := run(context.Background(), []string{"serve", "--config", bad, "--check"}, &out, &errs); code == 0 || !strings.Contains(errs.String(), "hot.window") {
		t.Fatalf("serve --check with a bad value: exit %d, %q", code, errs.String())
	}
}
