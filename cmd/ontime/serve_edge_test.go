package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/client"
	"github.com/ontimehq/ontime/internal/api/apitest"
)

// edgeServer serves a real node's API through newHTTPServer (as `ontime
// serve` does) on a loopback listener, counting the connections accepted
// and the HTTP major version of every request.
type edgeServer struct {
	url    string
	conns  atomic.Int64
	h1, h2 atomic.Int64
}

func startEdgeServer(t *testing.T) *edgeServer {
	t.Helper()
	_, h := apitest.StartHandler(t, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	es := &edgeServer{url: "http://" + ln.Addr().String()}
	srv := newHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor == 2 {
			es.h2.Add(1)
		} else {
			es.h1.Add(1)
		}
		h.ServeHTTP(w, r)
	}), ontime.DefaultConfig().HTTP)
	srv.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			es.conns.Add(1)
		}
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	return es
}

// submitN submits n tasks (keys prefix-w-i) from each of workers
// goroutines and checks every answer.
func submitN(t *testing.T, c *client.Client, prefix string, workers, n int) {
	t.Helper()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range n {
				key := prefix + strconv.Itoa(w) + "-" + strconv.Itoa(i)
				tk, created, err := c.Submit(context.Background(), client.TaskRequest{Topic: "edge", Key: key, Delay: "1h", Payload: json.RawMessage(`{"n":1}`), Target: "http://127.0.0.1:9/hook"})
				if err != nil {
					t.Error(err)
					return
				}
				if !created || tk.Key != key || string(tk.Payload) != `{"n":1}` {
					t.Errorf("submit %s: created=%v task %+v", key, created, tk)
				}
			}
		})
	}
	wg.Wait()
}

// TestServeKeepAliveOneConnection: 100 sequential calls of the client over
// HTTP/1.1 reuse one connection.
func TestServeKeepAliveOneConnection(t *testing.T) {
	t.Parallel()
	es := startEdgeServer(t)
	// One call per submit: concurrent Submits would otherwise share batch
	// calls (client/coalesce.go), one in flight, and never need more than
	// one connection.
	single := client.WithCoalesce(client.Coalesce{Off: true})
	c, err := client.New(es.url, single)
	if err != nil {
		t.Fatal(err)
	}
	submitN(t, c, "r1-", 1, 100)
	if n := es.conns.Load(); n != 1 {
		t.Errorf("100 sequential calls opened %d connections, want 1", n)
	}
	if h1, h2 := es.h1.Load(), es.h2.Load(); h1 != 100 || h2 != 0 {
		t.Errorf("requests: %d HTTP/1.x, %d HTTP/2; want 100 and 0", h1, h2)
	}
	// Concurrent callers: every connection opened is kept for reuse (the
	// default transport keeps DefaultMaxIdleConns), so a second round
	// opens none.
	submitN(t, c, "r2-", 8, 10)
	after := es.conns.Load()
	submitN(t, c, "r3-", 8, 10)
	if n := es.conns.Load(); n != after {
		t.Errorf("a second round of 8 concurrent callers opened %d more connections, want 0", n-after)
	}
}

// TestServeH2C: a client speaking HTTP/2 cleartext is served over HTTP/2,
// sequential and concurrent calls sharing one connection; an HTTP/1.1
// client of the same server still works.
func TestServeH2C(t *testing.T) {
	t.Parallel()
	es := startEdgeServer(t)
	// Coalescing off: the counts below are one call per submit.
	c, err := client.New(es.url, client.WithHTTP2Cleartext(), client.WithCoalesce(client.Coalesce{Off: true}))
	if err != nil {
		t.Fatal(err)
	}
	submitN(t, c, "r4-", 1, 100)
	submitN(t, c, "r5-", 16, 10)
	items, err := c.SubmitBatch(context.Background(), []client.TaskRequest{{Topic: "edge", Delay: "1h", Target: "http://127.0.0.1:9/hook"}, {Topic: "bad topic"}})
	if err != nil || len(items) != 2 || items[0].Task == nil || items[1].Error == nil || items[1].Error.Field != "topic" {
		t.Fatalf("batch over h2c: %v %+v", err, items)
	}
	if n := es.conns.Load(); n != 1 {
		t.Errorf("h2c calls opened %d connections, want 1", n)
	}
	if h1, h2 := es.h1.Load(), es.h2.Load(); h1 != 0 || h2 != 261 {
		t.Errorf("requests: %d HTTP/1.x, %d HTTP/2; want 0 and 261", h1, h2)
	}
	c1, err := client.New(es.url)
	if err != nil {
		t.Fatal(err)
	}
	submitN(t, c1, "r6-", 1, 10)
	if h1 := es.h1.Load(); h1 != 10 {
		t.Errorf("HTTP/1.1 client beside h2c: %d HTTP/1.x requests, want 10", h1)
	}
}
