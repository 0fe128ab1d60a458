package e2e

import (
	"context"
	"net/http/httptest"
	"os"
	"runtime/pprof"
	"syscall"
	"testing"
	"time"

	"github.com/ontimehq/ontime"
)

// BenchmarkBurst50000WebhookDrainCPU: BenchmarkBurst50000 measuring only
// the drain, from two seconds before the due instant (starts are booked
// ahead of it) until the last delivery: the process's CPU per task
// (cpu_us/task; the receiver shares the process, so it is both sides of a
// call) and, with ONTIME_BENCH_DRAIN_PROFILE=file, a CPU profile of that
// window alone (not with -cpuprofile, which holds the profiler).
func BenchmarkBurst50000WebhookDrainCPU(b *testing.B) {
	const n = 50000
	for range b.N {
		rec := &latencyRecorder{seen: map[string]bool{}}
		srv := httptest.NewServer(rec.handler())
		node := benchNode(b)
		ctx := context.Background()
		due := time.Now().Add(40 * time.Second)
		specs := make([]ontime.TaskSpec, 0, 1000)
		for i := 0; i < n; i++ {
			specs = append(specs, ontime.TaskSpec{Topic: "bench.burst", DueAt: due, Target: srv.URL})
			if len(specs) == cap(specs) || i == n-1 {
				if _, err := node.SubmitBatch(ctx, specs); err != nil {
					b.Fatal(err)
				}
				specs = specs[:0]
			}
		}
		time.Sleep(time.Until(due.Add(-2 * time.Second)))
		var prof *os.File
		if path := os.Getenv("ONTIME_BENCH_DRAIN_PROFILE"); path != "" {
			f, err := os.Create(path)
			if err != nil {
				b.Fatal(err)
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				b.Fatal(err)
			}
			prof = f
		}
		var r0, r1 syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
		for rec.count() < n && time.Now().Before(due.Add(60*time.Second)) {
			time.Sleep(20 * time.Millisecond)
		}
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
		if prof != nil {
			pprof.StopCPUProfile()
			_ = prof.Close()
		}
		cpu := time.Duration(r1.Utime.Nano() + r1.Stime.Nano() - r0.Utime.Nano() - r0.Stime.Nano())
		srv.Close()
		report(b, rec, n)
		rec.mu.Lock()
		drain := rec.last.Sub(due)
		rec.mu.Unlock()
		b.ReportMetric(float64(n)/drain.Seconds(), "drain_tasks/s")
		b.ReportMetric(float64(cpu.Microseconds())/n, "cpu_us/task")
	}
}
