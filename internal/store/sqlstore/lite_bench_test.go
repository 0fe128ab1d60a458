package sqlstore

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/store"
)

// BenchmarkLiteClaimSmall: the CPU of one Claim of an item holding a few
// due tasks, on the embedded default (SQLite, 16 tables × 4 segments): at
// 5,000 tasks/s over 64 items a claim finds a handful, so its statements'
// fixed cost, not its rows, is what it pays. Read cpu_us/claim:
//
//	go test ./internal/store/sqlstore -run '^$' -bench LiteClaimSmall -benchtime 200x
func BenchmarkLiteClaimSmall(b *testing.B) {
	for _, n := range []int{0, 4} {
		b.Run(fmt.Sprintf("due%d", n), func(b *testing.B) {
			s := benchStore(b, "sqlite")
			ctx := context.Background()
			items := s.Items()
			now := time.Now()
			var cpu time.Duration
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				it := items[i%len(items)]
				var tasks []store.NewTask
				for len(tasks) < n {
					nt := newTask(b, "", now.Add(-time.Second), 4)
					db, table := s.topo.Locate(nt.ShardHash)
					if db == it.DB && table == it.Table && nt.Seg == it.Segment {
						tasks = append(tasks, nt)
					}
				}
				if n > 0 {
					if _, err := s.Insert(ctx, tasks); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				c0 := cpuTime()
				refs, err := s.Claim(ctx, it, time.Now(), time.Now(), store.Lease{Owner: "bench", Until: time.Now().Add(time.Minute), Token: int64(i + 1)}, 500)
				cpu += cpuTime() - c0
				if err != nil {
					b.Fatal(err)
				}
				if len(refs) != n {
					b.Fatalf("claimed %d, want %d", len(refs), n)
				}
			}
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu_us/claim")
		})
	}
}

// cpuTime is the user and system CPU time this process has used: SQLite
// runs in it, and a shared machine stretches wall time far more.
func cpuTime() time.Duration {
	var r syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r)
	return time.Duration(r.Utime.Nano() + r.Stime.Nano())
}
