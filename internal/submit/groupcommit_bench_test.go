package submit_test

import (
	"context"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/hot"
	"github.com/ontimehq/ontime/internal/router"
	"github.com/ontimehq/ontime/internal/stagetest"
	"github.com/ontimehq/ontime/internal/store/sqlstore"
	"github.com/ontimehq/ontime/internal/submit"
	"github.com/ontimehq/ontime/internal/task"
	"github.com/ontimehq/ontime/internal/testdb"
)

// BenchmarkConcurrentSubmit: single-task submits from 16 goroutines per
// core on each engine, each commit alone (GroupMax -1, as before group
// commit) and grouped; compare the tasks/s of the two in one run.
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
				svc, err := submit.New(submit.Config{Store: st, Tier: stagetest.Tier(b), Planner: hot.NewPlanner(20*time.Millisecond, 0),
					Notifier: &notifier{}, Topology: topo, Segments: 2, NodeID: node,
					Window: window, LeaseTTL: time.Minute, GroupMax: mode.max, GroupWriters: mode.writers, GroupByTable: mode.byTable})
				if err != nil {
					b.Fatal(err)
				}
				svc.SetReady(true)
				spec := []task.Spec{{Topic: "bench.submit", Delay: delay(time.Hour), Payload: payload}}
				b.SetParallelism(16)
				b.ResetTimer()
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
			})
		}
	}
}
