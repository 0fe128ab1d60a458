package webhook

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/deliver"
)

// BenchmarkWebhookSinkParallel: signed single calls to a receiver on loopback
// from 32 goroutines (a lane's default concurrency), the sink's share of
// a webhook burst. Profile with -cpuprofile / -memprofile.
func BenchmarkWebhookSinkParallel(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	s, err := New(Config{Secret: "k", Concurrency: 32})
	if err != nil {
		b.Fatal(err)
	}
	d := deliver.Delivery{ID: "01JD000000000000000000000", Topic: "bench.burst", Key: "k", Target: srv.URL + "/hook",
		Dest: deliver.Destination(srv.URL), Payload: []byte(`{"order":12345}`), DueAt: time.Now(), Attempt: 1}
	b.SetParallelism(16) // × GOMAXPROCS (2): 32 in flight
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := s.Deliver(context.Background(), d); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkWebhookLoopbackBatch100: BenchmarkWebhookSinkParallel's tasks in batch calls of 100;
// ns/op is per task.
func BenchmarkWebhookLoopbackBatch100(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	s, err := New(Config{Secret: "k", Concurrency: 32})
	if err != nil {
		b.Fatal(err)
	}
	ds := make([]deliver.Delivery, 100)
	for i := range ds {
		ds[i] = deliver.Delivery{ID: fmt.Sprintf("01JD%021d", i), Topic: "bench.burst", Key: "k", Target: srv.URL + "/hook",
			Dest: deliver.Destination(srv.URL), Payload: []byte(`{"order":12345}`), DueAt: time.Now(), Attempt: 1}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += len(ds) {
		for _, err := range s.DeliverBatch(context.Background(), ds[:min(len(ds), b.N-i)]) {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
}
