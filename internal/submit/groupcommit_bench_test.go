package submit_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ontimehq/ontime/internal/hot"
	"github.com/ontimehq/ontime/internal/metrics"
	"github.com/ontimehq/ontime/internal/router"
	"github.com/ontimehq/ontime/internal/stagetest"
	"github.com/ontimehq/ontime/internal/store/sqlstore"
	"github.com/ontimehq/ontime/internal/submit"
	"github.com/ontimehq/ontime/internal/task"
	"github.com/ontimehq/ontime/internal/testdb"
)

// cpuTime is the CPU time this process used so far: per task, what other
// load on the machine changes least.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// groupSubmits returns the sum and count of the group-size histogram.
func groupSubmits(b *testing.B, reg *prometheus.Registry) (sum, count float64) {
	b.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "ontime_submit_group_submits" {
			h := mf.GetMetric()[0].GetHistogram()
			return h.GetSampleSum(), float64(h.GetSampleCount())
		}
	}
	return 0, 0
}

// BenchmarkConcurrentSubmit: single-task submits from 16 goroutines per
// core on each engine, each commit alone (GroupMax -1, as before group
// commit) and grouped; compare the tasks/s of the two in one run.
// subs/group is the average number of submits per group commit,
// cpu_us/task the process's CPU time per task.
func BenchmarkConcurrentSubmit(b *testing.B) {
	topo := router.Topology{Databases: 1, Tables: 4}
	payload := []byte(`{"id":"bench-000000","due":"2026-11-23T10:00:00.25Z"}`)
	for _, engine := range testdb.Engines {
		for _, mode := range []struct {
			name         string
			max, writers int
			byTable      bool
		}{{"alone", -1, 0, false}, {"db1", 0, 1, false}, {"db4", 0, 4, false}, {"table1", 0, 1, true}, {"table2", 0, 2, true}} {
			b.Run(engine+"/"+mode.name, func(b *testing.B) {
				st, err := sqlstore.Open(context.Background(), sqlstore.Config{Driver: engine, DSNs: testdb.DSNs(b, engine, 1),
					Tables: topo.Tables, Segments: 2})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { st.Close() })
				reg := prometheus.NewRegistry()
				svc, err := submit.New(submit.Config{Store: st, Tier: stagetest.Tier(b), Planner: hot.NewPlanner(20*time.Millisecond, 0),
					Notifier: &notifier{}, Topology: topo, Segments: 2, NodeID: node, Metrics: metrics.New(reg),
					Window: window, LeaseTTL: time.Minute, GroupMax: mode.max, GroupWriters: mode.writers, GroupByTable: mode.byTable})
				if err != nil {
					b.Fatal(err)
				}
				svc.SetReady(true)
				spec := []task.Spec{{Topic: "bench.submit", Delay: delay(time.Hour), Payload: payload}}
				b.SetParallelism(16)
				b.ResetTimer()
				cpu0 := cpuTime(b)
				b.RunParallel(func(pb *testing.PB) {
					ctx := context.Background()
					for pb.Next() {
						if _, err := svc.Submit(ctx, spec); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
				b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/float64(b.N), "cpu_us/task")
				if sum, n := groupSubmits(b, reg); n > 0 {
					b.ReportMetric(sum/n, "subs/group")
				}
			})
		}
	}
}
