package sqlstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/testdb"
)

// BenchmarkTaskLife: the store's writes of one task's life on the service
// path, in batches of n as group commit hands them over: inserted already
// claimed (the submitting node holds it), started, finished done. Each
// write rewrites the index entries whose columns or WHERE terms change, so
// this is what the schema's indexes cost per task. On SQLite read
// cpu_us/task (the engine runs in this process; a shared machine stretches
// wall time far more). "keyed": each task with a business key of its own,
// as users submit them (its key's index entries are part of the cost):
//
//	go test ./internal/store/sqlstore -run '^$' -bench TaskLife -benchtime 300x
func BenchmarkTaskLife(b *testing.B) {
	for _, engine := range testdb.Engines {
		for _, c := range []struct {
			n     int
			keyed bool
		}{{16, false}, {100, false}, {16, true}, {100, true}} {
			name := fmt.Sprintf("%s/n=%d", engine, c.n)
			if c.keyed {
				name += "/keyed"
			}
			n := c.n
			b.Run(name, func(b *testing.B) {
				s := benchStore(b, engine)
				ctx := context.Background()
				var cpu time.Duration
				for i := 0; b.Loop(); i++ {
					b.StopTimer()
					lease := store.Lease{Owner: "bench", Until: time.Now().Add(time.Minute), Token: int64(i + 1)}
					tasks := batch(b, n, time.Now(), c.keyed)
					for j := range tasks {
						tasks[j].Claim = &lease
					}
					b.StartTimer()
					c0 := cpuTime()
					ins, err := s.Insert(ctx, tasks)
					if err != nil {
						b.Fatal(err)
					}
					refs := make([]store.Ref, len(ins))
					for j, r := range ins {
						refs[j] = store.Ref{ID: r.Task.ID, Token: lease.Token}
					}
					started, err := s.Start(ctx, refs, time.Now().Add(time.Minute))
					if err != nil || len(started) != n {
						b.Fatal(err, len(started))
					}
					outs := make([]store.Outcome, len(started))
					for j, t := range started {
						outs[j] = store.Outcome{Ref: store.Ref{ID: t.ID, Token: t.Token}, Done: true}
					}
					if err := s.Finish(ctx, outs); err != nil {
						b.Fatal(err)
					}
					cpu += cpuTime() - c0
				}
				b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "tasks/s")
				b.ReportMetric(float64(cpu.Microseconds())/float64(n*b.N), "cpu_us/task")
			})
		}
	}
}
