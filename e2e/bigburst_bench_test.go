package e2e

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ontimehq/ontime"
)

// BenchmarkBigBurst: issue 11's congestion case — ONTIME_BENCH_BURST_N tasks
// (default 200,000) with 1 KB payloads due at one instant, by webhook, on
// the embedded default. Outcomes reach SQLite slower than deliveries
// happen; what matters is that the backlog does not expire into
// redeliveries. Reports dups and lost (both must be 0) beside lateness and
// how long after the due time the last task was delivered and the last
// outcome written.
func BenchmarkBigBurst(b *testing.B) {
	n := 200000
	if v, err := strconv.Atoi(os.Getenv("ONTIME_BENCH_BURST_N")); err == nil && v > 0 {
		n = v
	}
	payload := []byte(`{"pad":"` + strings.Repeat("x", 1000) + `"}`)
	for range b.N {
		rec := &latencyRecorder{seen: map[string]bool{}}
		srv := httptest.NewServer(rec.handler())
		node := benchNode(b)
		ctx := context.Background()
		due := time.Now().Add(40 * time.Second)
		specs := make([]ontime.TaskSpec, 0, 1000)
		var ids []string
		for i := 0; i < n; i++ {
			specs = append(specs, ontime.TaskSpec{Topic: "bench.bigburst", DueAt: due, Target: srv.URL, Payload: payload})
			if len(specs) == cap(specs) || i == n-1 {
				res, err := node.SubmitBatch(ctx, specs)
				if err != nil {
					b.Fatal(err)
				}
				for _, r := range res {
					if r.Err != nil {
						b.Fatal(r.Err)
					}
					ids = append(ids, r.Task.ID)
				}
				specs = specs[:0]
			}
		}
		if time.Now().After(due.Add(-5 * time.Second)) {
			b.Fatalf("enqueueing %d tasks took until %s before their due time; lower ONTIME_BENCH_BURST_N", n, time.Until(due))
		}
		deadline := due.Add(180 * time.Second)
		for rec.count() < n && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		rec.mu.Lock()
		delivered := rec.last.Sub(due)
		rec.mu.Unlock()
		// Outcomes written: sample tasks until none is left running.
		var written time.Duration
		for time.Now().Before(deadline) {
			running := 0
			for i := 0; i < len(ids); i += max(1, len(ids)/500) {
				if t, err := node.Get(ctx, ids[i]); err == nil && t.Status != "done" {
					running++
				}
			}
			if running == 0 {
				written = time.Since(due)
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
		// Wait a lease past the backlog, so a redelivery caused by an expired
		// lease would show up as a duplicate.
		time.Sleep(5 * time.Second)
		srv.Close()
		b.Log(pipelineCounts(b, node))
		report(b, rec, n)
		b.ReportMetric(delivered.Seconds(), "last_delivered_s")
		b.ReportMetric(written.Seconds(), "outcomes_written_s")
	}
}

// pipelineCounts scrapes the node's own counters: how many claims, starts
// and outcomes of each kind a workload took.
func pipelineCounts(b *testing.B, node *ontime.Node) string {
	srv := httptest.NewServer(node.HTTPHandler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var out []string
	for _, l := range strings.Split(string(body), "\n") {
		for _, p := range []string{"ontime_tasks_claimed_total", "ontime_deliveries_started_total", "ontime_deliveries_total", "ontime_leases_extended_total", "ontime_tasks_submitted_total"} {
			if strings.HasPrefix(l, p) {
				out = append(out, l)
			}
		}
	}
	return strings.Join(out, "; ")
}
