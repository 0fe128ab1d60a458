package fire_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/stagetest"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/store/sqlstore"
	"github.com/ontimehq/ontime/internal/testdb"
)

// BenchmarkStartFinishBySize: the store's cost per task of marking tasks
// running (Store.Start) and done (Store.Finish) by the size of the call,
// on the embedded default (SQLite, 16 tables × 4 segments): what DefaultStartGap and
// complete.DefaultFlushGap buy. At 5,000 tasks/s a 5 ms gap makes starts
// of 25 rather than the 6 or so a steady 2,400/s made without it, and a
// 20 ms gap outcome writes of 100 rather than 28. Read cpu_us/task:
//
//	go test ./internal/fire -run '^$' -bench StartFinishBySize -benchtime 20x
func BenchmarkStartFinishBySize(b *testing.B) {
	for _, size := range []int{6, 25, 100} {
		b.Run(fmt.Sprintf("start%d", size), func(b *testing.B) { benchStoreCall(b, size, true) })
	}
	for _, size := range []int{28, 100, 400} {
		b.Run(fmt.Sprintf("finish%d", size), func(b *testing.B) { benchStoreCall(b, size, false) })
	}
}

// benchStoreCall times one Start (start) or one Finish of size tasks per
// op; the inserts (and, for Finish, the starts) before it are not timed.
func benchStoreCall(b *testing.B, size int, start bool) {
	ctx := context.Background()
	// The node's default layout: a task of a few per table per call.
	st, err := sqlstore.Open(ctx, sqlstore.Config{Driver: "sqlite", DSNs: []string{testdb.SQLite(b)}, Tables: 16, Segments: 4})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	tasks := 0
	var cpu time.Duration
	for b.Loop() {
		b.StopTimer()
		due := time.Now().Add(time.Second)
		token := store.NewToken()
		news := make([]store.NewTask, size)
		refs := make([]store.Ref, size)
		for i := range news {
			news[i] = stagetest.Claimed(stagetest.NewTask(b, "bench", "", due), node, token)
			refs[i] = store.Ref{ID: news[i].ID, Token: token, DueAt: due, Topic: "bench"}
		}
		stagetest.Insert(b, st, news...)
		if !start {
			if _, err := st.Start(ctx, refs, due.Add(time.Minute)); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		c0 := cpuTime()
		if start {
			if _, err := st.Start(ctx, refs, due.Add(time.Minute)); err != nil {
				b.Fatal(err)
			}
		} else {
			outs := make([]store.Outcome, size)
			for i, r := range refs {
				outs[i] = store.Outcome{Ref: r, Done: true}
			}
			if err := st.Finish(ctx, outs); err != nil {
				b.Fatal(err)
			}
		}
		cpu += cpuTime() - c0
		tasks += size
	}
	// CPU time rather than wall time: SQLite runs in this process, and a
	// shared machine stretches wall time far more than CPU time.
	b.ReportMetric(float64(cpu.Microseconds())/float64(tasks), "cpu_us/task")
}

// cpuTime is the user and system CPU time this process has used.
func cpuTime() time.Duration {
	var r syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r)
	return time.Duration(r.Utime.Nano() + r.Stime.Nano())
}
