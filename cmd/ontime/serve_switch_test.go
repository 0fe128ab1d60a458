package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestGateHoldsCalls: while the node is switched to a grown store, calls
// wait at the gate and reach the next node's handler once it reopens.
func TestGateHoldsCalls(t *testing.T) {
	t.Parallel()
	answer := func(s string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, s) })
	}
	g := newGate(answer("old"))
	srv := httptest.NewServer(g)
	defer srv.Close()
	get := func() string {
		resp, err := http.Get(srv.URL)
		if err != nil {
			t.Error(err)
			return ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if got := get(); got != "old" {
		t.Fatalf("open gate: %q", got)
	}
	g.close(0)
	got := make(chan string)
	go func() { got <- get() }()
	g.reopen(answer("new"))
	if s := <-got; s != "new" {
		t.Fatalf("a call held during the switch reached %q, want the next node", s)
	}
}
