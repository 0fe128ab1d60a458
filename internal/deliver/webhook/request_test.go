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
	"testing"

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
