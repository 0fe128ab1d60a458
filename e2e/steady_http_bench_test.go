package e2e

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ontimehq/ontime/client"
)

// BenchmarkSteady5000PerSecond16HTTP is bench/'s steady 5,000/s workload
// on the service path, in one process: 16 submitters each make single
// HTTP submits (the Go client, keep-alive) on their share of a 5,000/s
// schedule, each task due a second after its call, while the node
// delivers the tasks submitted a second earlier by webhook. A submitter
// behind its schedule calls at once, so accepted_tasks/s falls below the
// rate when a submit takes longer than 16/5,000 s. It reports the submit
// latency percentiles beside the delivery lateness, and the store writes
// of the run from the node's metrics (outcome batches and group commits
// per second), which is what competes with the submits for SQLite's one
// writer.
func BenchmarkSteady5000PerSecond16HTTP(b *testing.B) {
	benchSteadyHTTP(b, "sqlite", 5000, 16, 10*time.Second)
}

// BenchmarkSteady5000PerSecond16HTTPPostgres: the same on PostgreSQL.
func BenchmarkSteady5000PerSecond16HTTPPostgres(b *testing.B) {
	benchSteadyHTTP(b, "postgres", 5000, 16, 10*time.Second)
}

func benchSteadyHTTP(b *testing.B, engine string, rate, submitters int, span time.Duration) {
	for range b.N {
		rec := &latencyRecorder{seen: map[string]bool{}}
		hook := httptest.NewServer(rec.handler())
		node := runBenchNode(b, benchConfig(b, engine), benchOptions()...)
		api := httptest.NewServer(node.HTTPHandler())
		hc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 256, DisableCompression: true}}
		cl, err := client.New(api.URL, client.WithHTTPClient(hc))
		if err != nil {
			b.Fatal(err)
		}
		before := scrape(b, api.URL)
		cpu0 := cpuTime()
		ctx := context.Background()
		n := int(span.Seconds() * float64(rate))
		start := time.Now().Add(200 * time.Millisecond)
		end := start.Add(span + 250*time.Millisecond)
		var (
			mu        sync.Mutex
			ok        int
			calls     []time.Duration
			lastReply time.Time
			wg        sync.WaitGroup
		)
		for s := range submitters {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := s; k < n; k += submitters {
					planned := start.Add(time.Duration(float64(k) / float64(rate) * float64(time.Second)))
					if wait := time.Until(planned); wait > 0 {
						time.Sleep(wait)
					}
					now := time.Now()
					if !now.Before(end) {
						return
					}
					_, _, err := cl.Submit(ctx, client.TaskRequest{Topic: "bench.steady", Target: hook.URL,
						DueAt: now.Add(time.Second).UTC().Format(time.RFC3339Nano)})
					took := time.Since(now)
					mu.Lock()
					if err == nil {
						ok++
					} else {
						b.Error(err)
					}
					calls = append(calls, took)
					lastReply = later(lastReply, now.Add(took))
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		ran := lastReply.Sub(start)
		deadline := time.Now().Add(30 * time.Second)
		for rec.count() < ok && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		cpu := cpuTime() - cpu0
		after := scrape(b, api.URL)
		api.Close()
		hook.Close()
		hc.CloseIdleConnections()
		slices.Sort(calls)
		b.ReportMetric(float64(ok)/ran.Seconds(), "accepted_tasks/s")
		b.ReportMetric(float64(pct(calls, .5).Microseconds())/1000, "submit_p50_ms")
		b.ReportMetric(float64(pct(calls, .99).Microseconds())/1000, "submit_p99_ms")
		// CPU per task (this process: client, node and receiver) is what a
		// loaded machine changes least, unlike the rates.
		b.ReportMetric(float64(cpu.Microseconds())/float64(max(ok, 1)), "cpu_us/task")
		d := func(name string) float64 { return (after[name] - before[name]) / ran.Seconds() }
		b.ReportMetric(d("ontime_outcome_write_seconds_count"), "outcome_writes/s")
		b.ReportMetric(d("ontime_submit_group_submits_count"), "group_commits/s")
		report(b, rec, ok)
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// scrape reads the node's unlabelled metric samples.
func scrape(b *testing.B, base string) map[string]float64 {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, val, found := strings.Cut(sc.Text(), " ")
		if !found || strings.HasPrefix(name, "#") || strings.Contains(name, "{") {
			continue
		}
		if v, err := strconv.ParseFloat(val, 64); err == nil {
			out[name] = v
		}
	}
	return out
}
