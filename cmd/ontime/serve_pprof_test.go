package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// TestServePprof: debug.pprof_listen serves Go's profiles on its own
// loopback port, and the API's port does not.
func TestServePprof(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pp := l.Addr().String()
	l.Close()
	addr := startServe(t, fmt.Sprintf("debug:\n  pprof_listen: %s\n", pp))
	get := func(url string) (int, string) {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("http://" + pp + "/debug/pprof/goroutine?debug=1"); code != http.StatusOK || !strings.Contains(body, "goroutine profile:") {
		t.Fatalf("goroutine profile on %s: %d %.200q", pp, code, body)
	}
	if code, body := get("http://" + pp + "/debug/pprof/heap?debug=1"); code != http.StatusOK || !strings.Contains(body, "heap profile:") {
		t.Fatalf("heap profile: %d %.200q", code, body)
	}
	if code, _ := get("http://" + addr + "/debug/pprof/"); code != http.StatusNotFound && code != http.StatusUnauthorized {
		t.Fatalf("the API's port answered /debug/pprof/ with %d", code)
	}
}
