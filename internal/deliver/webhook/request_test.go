package webhook

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/deliver"
)

// TestTemplatesManyTargets: more targets than slots, concurrently, each
// call reaching its own path with its own body.
func TestTemplatesManyTargets(t *testing.T) {
	var mu sync.Mutex
	got := map[string]string{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got[r.URL.Path+"?"+r.URL.RawQuery] = string(b)
		mu.Unlock()
	}))
	defer srv.Close()
	s, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	const n = 300 // > len(templates.slots): slots are shared and overwritten
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			d := deliver.Delivery{ID: fmt.Sprint("id", i), Topic: "t", Target: fmt.Sprintf("%s/p%d?q=%d", srv.URL, i%150, i)}
			if err := s.Deliver(context.Background(), d); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if len(got) != n {
		t.Fatalf("%d distinct calls, want %d", len(got), n)
	}
	for i := range n {
		body := got[fmt.Sprintf("/p%d?q=%d", i%150, i)]
		if !strings.Contains(body, fmt.Sprintf(`"id":"id%d"`, i)) {
			t.Fatalf("call %d: body %q", i, body)
		}
	}
}

// TestTransportErrorLikeClientDo: an error of a call made on the sink's
// own transport reads as Client.Do's would, the URL's password masked.
func TestTransportErrorLikeClientDo(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens: the dial is refused
	s, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Deliver(context.Background(), deliver.Delivery{ID: "x", Target: "http://user:s3cret@" + addr + "/h"})
	if err == nil {
		t.Fatal("delivered to a closed port")
	}
	want := `webhook: Post "http://user:***@` + addr + `/h": dial tcp`
	if !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("error %q, want prefix %q and no password", err, want)
	}
}

// TestGetBodyRewinds: the transport's resend of a call reads the same body.
func TestGetBodyRewinds(t *testing.T) {
	tp := newTemplates()
	req, err := tp.request(context.Background(), "http://example.invalid/x", []byte(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	first, _ := io.ReadAll(req.Body)
	again, err := req.GetBody()
	if err != nil {
		t.Fatal(err)
	}
	second, _ := io.ReadAll(again)
	if string(first) != `{"a":1}` || string(second) != string(first) || req.ContentLength != int64(len(first)) {
		t.Fatalf("body %q, again %q, length %d", first, second, req.ContentLength)
	}
	if req.Host != "example.invalid" || req.Method != http.MethodPost || req.Header != nil {
		t.Fatalf("request %+v", req)
	}
}

// writeCounter counts the writes of the connections it dials.
type writeCounter struct {
	writes atomic.Int64
	d      net.Dialer
}

type countedConn struct {
	net.Conn
	w *atomic.Int64
}

func (c countedConn) Write(b []byte) (int, error) {
	c.w.Add(1)
	return c.Conn.Write(b)
}

func (wc *writeCounter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := wc.d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return countedConn{Conn: c, w: &wc.writes}, nil
}

// TestCallIsOneWrite: a call's headers and body leave in one write, for
// single and batch calls. net/http flushes the headers on their own when
// it does not know a body is in memory: a second syscall and segment for
// every delivery, and a second read for the receiver (the cause: a body
// type of our own instead of io.NopCloser of a *bytes.Reader).
func TestCallIsOneWrite(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) }))
	defer srv.Close()
	batchURL := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1) // another destination, on the same server
	dest := deliver.Destination(batchURL)
	s, err := New(Config{Secret: "k", Destinations: map[string]Destination{dest: {Concurrency: 1, Batch: 5}}})
	if err != nil {
		t.Fatal(err)
	}
	var single, batch writeCounter
	s.client.rt.(*http.Transport).DialContext = single.dial
	s.dests[dest].client.rt.(*http.Transport).DialContext = batch.dial
	ctx := context.Background()
	const calls = 20
	for i := range calls {
		d := deliver.Delivery{ID: fmt.Sprint("id", i), Topic: "t", Key: "k", Target: srv.URL + "/hook", Payload: []byte(`{"order":12345}`), DueAt: time.Now(), Attempt: 1}
		if err := s.Deliver(ctx, d); err != nil {
			t.Fatal(err)
		}
		ds := make([]deliver.Delivery, 5)
		for j := range ds {
			ds[j] = deliver.Delivery{ID: fmt.Sprint("b", i, "-", j), Topic: "t", Target: batchURL + "/hook", Dest: dest, Payload: []byte(`{"n":1}`), DueAt: time.Now(), Attempt: 1}
		}
		for j, err := range s.DeliverBatch(ctx, ds) {
			if err != nil {
				t.Fatalf("batch element %d: %v", j, err)
			}
		}
	}
	if got := single.writes.Load(); got != calls {
		t.Errorf("%d single calls took %d writes, want one each", calls, got)
	}
	if got := batch.writes.Load(); got != calls {
		t.Errorf("%d batch calls took %d writes, want one each", calls, got)
	}
}
