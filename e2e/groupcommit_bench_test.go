package e2e

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/internal/testdb"
)

// BenchmarkConcurrentSubmit: single-task submits on each engine, tasks due
// in an hour: one after the other (seq, the baseline), from 16 goroutines
// through the Go API (go16) and from 16 HTTP clients with keep-alive
// (http16). Concurrent submits share their commits (group commit).
func BenchmarkConcurrentSubmit(b *testing.B) {
	payload := []byte(`{"id":"bench-000000","due":"2026-11-23T10:00:00.25Z"}`)
	per := (16 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0) // RunParallel runs per × GOMAXPROCS goroutines
	for _, engine := range testdb.Engines {
		b.Run(engine+"/seq", func(b *testing.B) {
			node := benchNodeOn(b, engine)
			ctx := context.Background()
			for b.Loop() {
				if _, _, err := node.Submit(ctx, ontime.TaskSpec{Topic: "bench.submit", Delay: time.Hour, Payload: payload}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
		})
		b.Run(engine+"/go16", func(b *testing.B) {
			node := benchNodeOn(b, engine)
			b.SetParallelism(per)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				for pb.Next() {
					if _, _, err := node.Submit(ctx, ontime.TaskSpec{Topic: "bench.submit", Delay: time.Hour, Payload: payload}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
		})
		b.Run(engine+"/http16", func(b *testing.B) {
			node := benchNodeOn(b, engine)
			srv := httptest.NewServer(node.HTTPHandler())
			b.Cleanup(srv.Close)
			hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			body := []byte(`{"topic":"bench.submit","delay":"1h","payload":` + string(payload) + `}`)
			b.SetParallelism(per)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := hc.Post(srv.URL+"/v1/tasks", "application/json", bytes.NewReader(body))
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusCreated {
						b.Errorf("POST /v1/tasks: %s", resp.Status)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
		})
		// Every submit with a key of its own (an order ID), as issue 24's
		// workload: a group's tasks go to their keys' tables.
		b.Run(engine+"/http16keyed", func(b *testing.B) {
			node := benchNodeOn(b, engine)
			srv := httptest.NewServer(node.HTTPHandler())
			b.Cleanup(srv.Close)
			hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			var seq atomic.Int64
			run := time.Now().UnixNano()
			b.SetParallelism(per)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					body := []byte(`{"topic":"bench.submit","key":"order-` + strconv.FormatInt(run, 36) + `-` + strconv.FormatInt(seq.Add(1), 10) + `","delay":"1h","payload":` + string(payload) + `}`)
					resp, err := hc.Post(srv.URL+"/v1/tasks", "application/json", bytes.NewReader(body))
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusCreated {
						b.Errorf("POST /v1/tasks: %s", resp.Status)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
		})
	}
}
