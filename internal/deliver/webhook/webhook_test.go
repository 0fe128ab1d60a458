package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/buildinfo"
	"github.com/ontimehq/ontime/internal/deliver"
	"github.com/ontimehq/ontime/internal/deliver/policy"
)

func TestDeliverBodyHeadersSignature(t *testing.T) {
	var got struct {
		body []byte
		hdr  http.Header
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.body, _ = io.ReadAll(r.Body)
		got.hdr = r.Header.Clone()
		w.WriteHeader(204)
	}))
	defer srv.Close()
	s, err := New(Config{Secret: "k"})
	if err != nil {
		t.Fatal(err)
	}
	due := time.Date(2026, 11, 23, 10, 0, 0, 123456000, time.UTC)
	d := deliver.Delivery{ID: "abc", Topic: "t.x", Key: "k1", Target: srv.URL + "/p", Payload: []byte(`{"a":[1,2]}`), DueAt: due, Attempt: 3}
	if err := s.Deliver(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal(got.body, &body); err != nil {
		t.Fatal(err)
	}
	if body["id"] != "abc" || body["topic"] != "t.x" || body["key"] != "k1" || body["attempt"] != 3.0 || body["due_at"] != "2026-11-23T10:00:00.123456Z" {
		t.Fatalf("body %s", got.body)
	}
	if !strings.Contains(string(got.body), `"payload":{"a":[1,2]}`) {
		t.Fatalf("payload not embedded as-is: %s", got.body)
	}
	if got.hdr.Get("Ontime-Task-Id") != "abc" || got.hdr.Get("Ontime-Attempt") != "3" || got.hdr.Get("Content-Type") != "application/json" ||
		got.hdr.Get("Ontime-Target") != d.Target || got.hdr.Get("User-Agent") != buildinfo.Read().UserAgent() ||
		!strings.HasPrefix(got.hdr.Get("User-Agent"), "ontime/") {
		t.Fatalf("headers %v", got.hdr)
	}
	sig := got.hdr.Get("Ontime-Signature")
	// A receiver checks the call by itself: the signature over the target
	// the call names.
	if err := Verify(sig, got.hdr.Get("Ontime-Target"), got.body, time.Now(), time.Minute, "k"); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(sig, "v1=") {
		t.Fatalf("v1 sent without delivery.signature_v1: %s", sig)
	}
	if err := Verify(sig, d.Target, append(got.body, ' '), time.Now(), time.Minute, "k"); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("tampered body verified: %v", err)
	}
	if err := Verify(sig, srv.URL+"/other", got.body, time.Now(), time.Minute, "k"); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("signature for one target verified at another: %v", err)
	}
	if err := Verify(sig, d.Target, got.body, time.Now(), time.Minute, "other"); !errors.Is(err, ErrBadSignature) {
		t.Fatal("wrong secret verified")
	}
	if err := Verify(sig, d.Target, got.body, time.Now().Add(10*time.Minute), time.Minute, "k"); !errors.Is(err, ErrBadSignature) {
		t.Fatal("stale signature verified")
	}
	if err := Verify("garbage", d.Target, got.body, time.Now(), time.Minute, "k"); !errors.Is(err, ErrBadSignature) {
		t.Fatal("garbage header verified")
	}
}

func TestDeliverErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/500":
			w.WriteHeader(500)
			io.WriteString(w, "database down")
		case "/410":
			w.WriteHeader(410)
		case "/slow":
			time.Sleep(500 * time.Millisecond)
		case "/redirect":
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		}
	}))
	defer srv.Close()
	s, _ := New(Config{Timeout: 100 * time.Millisecond})
	ctx := context.Background()
	err := s.Deliver(ctx, deliver.Delivery{Target: srv.URL + "/500"})
	var se *StatusError
	// No read-back: the receiver's answer stays out of the error, which
	// becomes the task's last_error.
	if !errors.As(err, &se) || se.Code != 500 || strings.Contains(err.Error(), "database") || deliver.IsPermanent(err) {
		t.Fatalf("500: %v", err)
	}
	if err := s.Deliver(ctx, deliver.Delivery{Target: srv.URL + "/410"}); !deliver.IsPermanent(err) {
		t.Fatalf("410 should be permanent: %v", err)
	}
	if err := s.Deliver(ctx, deliver.Delivery{Target: srv.URL + "/slow"}); err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("slow: %v", err)
	}
	if err := s.Deliver(ctx, deliver.Delivery{Target: srv.URL + "/redirect"}); err == nil {
		t.Fatal("a redirect counted as delivered")
	}
	if err := s.Deliver(ctx, deliver.Delivery{Target: "http://127.0.0.1:1/"}); err == nil {
		t.Fatal("connection refused counted as delivered")
	}
}

func BenchmarkWebhookLoopback(b *testing.B) { benchWebhook(b, Config{Secret: "k"}) }

// BenchmarkWebhookLoopbackPolicy is the same with the target policy on
// (every dial resolved and checked) and two secrets (a rotation): the
// ratio to BenchmarkWebhookLoopback is the cost of both.
func BenchmarkWebhookLoopbackPolicy(b *testing.B) {
	pol, err := policy.New(policy.Config{Deny: []string{"10.0.0.0/8"}, Self: []string{"127.0.0.1:7070"}})
	if err != nil {
		b.Fatal(err)
	}
	benchWebhook(b, Config{Keys: &Keyring{Global: []string{"k-new", "k-old"}}, Policy: pol})
}

func benchWebhook(b *testing.B, cfg Config) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) }))
	defer srv.Close()
	s, _ := New(cfg)
	p, _ := deliver.NewDispatcher(deliver.DispatcherConfig{PerDestConcurrency: 32})
	ctx := context.Background()
	if err := p.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer p.Stop()
	done := make(chan error, 1024)
	window := make(chan struct{}, 512) // outstanding deliveries, below the lane's queue
	b.ResetTimer()
	go func() {
		for i := 0; i < b.N; i++ {
			window <- struct{}{}
			p.DispatchAll(ctx, srv.URL, s, []deliver.Job{{Delivery: deliver.Delivery{ID: "x", Target: srv.URL, Payload: []byte(`{}`)}, Done: func(err error) { <-window; done <- err }}})
		}
	}()
	for i := 0; i < b.N; i++ {
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "deliveries/s")
}
