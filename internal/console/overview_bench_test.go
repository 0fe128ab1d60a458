package console_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/apiv1"
)

// BenchmarkOverviewLive: one refresh of the overview's live block (the
// htmx poll every 2 s) over 200 topics, each in every status column:
// the node's CPU per open browser.
//
//	go test ./internal/console -run '^$' -bench OverviewLive -benchtime 200x
func BenchmarkOverviewLive(b *testing.B) {
	dir := b.TempDir()
	cfg := ontime.DefaultConfig()
	cfg.DataDir = dir
	cfg.Store.Tables = 2
	ctx := b.Context()
	n, err := ontime.NewNode(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := n.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer n.Stop(ctx)
	h := n.HTTPHandler()
	var reqs []json.RawMessage
	for i := range 200 {
		raw, _ := json.Marshal(apiv1.TaskRequest{Topic: fmt.Sprintf("bench.t%03d", i), Delay: "1h", Target: "http://127.0.0.1:1/x"})
		reqs = append(reqs, raw)
	}
	body, _ := json.Marshal(apiv1.BatchRequest{Tasks: reqs})
	r := newReq(http.MethodPost, "/v1/tasks:batch", body)
	w := &sink{}
	h.ServeHTTP(w, r)
	if w.code != 0 && w.code >= 300 {
		b.Fatalf("batch: %d %s", w.code, w.buf.String())
	}
	get := func() int {
		r := newReq(http.MethodGet, "/ui/", nil)
		r.Header.Set("HX-Request", "true")
		r.Header.Set("HX-Target", "live")
		w := &sink{}
		h.ServeHTTP(w, r)
		if w.code != 0 && w.code != 200 {
			b.Fatalf("GET /ui/: %d", w.code)
		}
		return w.buf.Len()
	}
	get()
	time.Sleep(100 * time.Millisecond)
	b.ResetTimer()
	size := 0
	for b.Loop() {
		size = get()
	}
	b.ReportMetric(float64(size), "bytes/page")
}

func newReq(method, path string, body []byte) *http.Request {
	r, _ := http.NewRequest(method, "http://127.0.0.1"+path, bytes.NewReader(body))
	r.RemoteAddr = "127.0.0.1:1"
	if body != nil {
		r.Header.Set("Content-Type", "application/json")
	}
	return r
}

type sink struct {
	hdr  http.Header
	code int
	buf  bytes.Buffer
}

func (s *sink) Header() http.Header {
	if s.hdr == nil {
		s.hdr = http.Header{}
	}
	return s.hdr
}
func (s *sink) WriteHeader(c int)           { s.code = c }
func (s *sink) Write(p []byte) (int, error) { return s.buf.Write(p) }
