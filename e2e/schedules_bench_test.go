package e2e

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/ontimehq/ontime"
)

// BenchmarkScheduleLateness: ONTIME_BENCH_SCHEDULES schedules (default
// 20), each `* * * * * *` (every second), fire for ONTIME_BENCH_SPAN
// (default 10s) to a webhook on loopback, on the embedded default (SQLite,
// memory tier); lateness is delivery − fire time. The baseline, in the
// same run on the same node, is the same load as plain tasks: as many due
// at each whole second, submitted ahead. Run with -benchtime=1x:
//
//	go test ./e2e -run '^$' -bench ScheduleLateness -benchtime=1x
func BenchmarkScheduleLateness(b *testing.B) {
	schedules, span := 20, 10*time.Second
	if v, err := strconv.Atoi(os.Getenv("ONTIME_BENCH_SCHEDULES")); err == nil && v > 0 {
		schedules = v
	}
	if v, err := time.ParseDuration(os.Getenv("ONTIME_BENCH_SPAN")); err == nil && v > 0 {
		span = v
	}
	seconds := int(span / time.Second)
	for range b.N {
		node := benchNode(b)
		ctx := context.Background()

		// Baseline: plain tasks, schedules of them per whole second.
		base := &latencyRecorder{seen: map[string]bool{}}
		bsrv := httptest.NewServer(base.handler())
		first := time.Now().Add(2 * time.Second).Truncate(time.Second).Add(time.Second)
		var specs []ontime.TaskSpec
		for s := range seconds {
			for range schedules {
				specs = append(specs, ontime.TaskSpec{Topic: "bench.base", DueAt: first.Add(time.Duration(s) * time.Second), Target: bsrv.URL})
			}
		}
		if _, err := node.SubmitBatch(ctx, specs); err != nil {
			b.Fatal(err)
		}
		waitCount(b, base, len(specs), first.Add(span+30*time.Second))
		bsrv.Close()

		// Schedules: the same fire times, made by the schedule service.
		rec := &latencyRecorder{seen: map[string]bool{}}
		srv := httptest.NewServer(rec.handler())
		for i := range schedules {
			if _, err := node.CreateSchedule(ctx, ontime.Schedule{Name: fmt.Sprintf("bench-%d", i), Cron: "* * * * * *",
				Task: ontime.ScheduleTask{Topic: "bench.sched", Target: srv.URL}}); err != nil {
				b.Fatal(err)
			}
		}
		lastCreated := time.Now()
		time.Sleep(span)
		firstDeleted := time.Now()
		for i := range schedules {
			if _, err := node.DeleteSchedule(ctx, fmt.Sprintf("bench-%d", i)); err != nil {
				b.Fatal(err)
			}
		}
		// Every schedule fires at least at the whole seconds in
		// (lastCreated, firstDeleted]; the edges depend on each one's
		// create and delete.
		atLeast := int(firstDeleted.Truncate(time.Second).Sub(lastCreated.Truncate(time.Second))/time.Second) * schedules
		waitCount(b, rec, atLeast, firstDeleted.Add(30*time.Second))
		time.Sleep(1500 * time.Millisecond)
		srv.Close()

		report(b, rec, max(atLeast, rec.count()))
		rec.mu.Lock()
		base.mu.Lock()
		slices.Sort(base.late)
		bp99 := pct(base.late, 0.99)
		sp99 := pct(rec.late, 0.99) // sorted by report
		b.ReportMetric(float64(bp99.Microseconds())/1000, "base_p99_ms")
		b.ReportMetric(float64(pct(base.late, 1).Microseconds())/1000, "base_max_ms")
		if bp99 > 0 {
			b.ReportMetric(sp99.Seconds()/bp99.Seconds(), "p99_vs_base")
		}
		b.ReportMetric(float64(len(rec.seen)), "fires")
		base.mu.Unlock()
		rec.mu.Unlock()
	}
}

// waitCount waits until rec has seen n tasks or deadline passes.
func waitCount(b *testing.B, rec *latencyRecorder, n int, deadline time.Time) {
	for rec.count() < n && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if c := rec.count(); c < n {
		b.Logf("only %d of %d delivered by the deadline", c, n)
	}
}
