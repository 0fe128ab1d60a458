package redis

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/hot"
	"github.com/ontimehq/ontime/internal/hot/memory"
)

// BenchmarkSteadyPop: entries added one per Add at 1,000/s, for tasks due
// 1 s after their Add, each leaving its tier 20 ms before (the node's
// fire lead), popped as the fire stage does
// (one popper, at least 5 ms between pops that found entries, then an
// ack), for 5 s; the memory tier first, as the baseline of the same run.
// Reports how late each entry left its tier (p50, p99, max, in ms): the
// Redis tier's round trips on the path are what differ. due-p99-ms and
// due-max-ms are how late it left against its task's due time (the fire
// time plus the lead; 0 when before): what delivery sees with a Start
// that takes no time, for the tasks due after dueFrom (the first second
// of entries is planned before any Pop: a node's planner has been fed
// long before). The -adaptive runs plan each entry with a
// hot.Planner fed the tier's Pop delays as the fire stage feeds it
// (fire's notePop), so the lead grows with the tier's tail.
func BenchmarkSteadyPop(b *testing.B) {
	for _, name := range []string{"memory", "redis", "memory-adaptive", "redis-adaptive"} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				var tr hot.Tier
				if strings.HasPrefix(name, "memory") {
					m, err := memory.New(memory.Config{Visibility: 30 * time.Second})
					if err != nil {
						b.Fatal(err)
					}
					tr = m
				} else {
					r, _ := benchTier(b)
					tr = r
				}
				var p *hot.Planner
				if strings.HasSuffix(name, "-adaptive") {
					p = hot.NewPlanner(20*time.Millisecond, 5*time.Second)
				}
				late, overDue := steadyPop(b, tr, p, 1000, 5*time.Second)
				tr.Close()
				slices.Sort(late)
				slices.Sort(overDue)
				q := func(s []time.Duration, p float64) float64 {
					return float64(s[min(len(s)-1, int(p*float64(len(s))))]) / float64(time.Millisecond)
				}
				b.ReportMetric(q(late, 0.5), "p50-ms")
				b.ReportMetric(q(late, 0.99), "p99-ms")
				b.ReportMetric(q(late, 1), "max-ms")
				b.ReportMetric(q(overDue, 0.99), "due-p99-ms")
				b.ReportMetric(q(overDue, 1), "due-max-ms")
				if p != nil {
					b.ReportMetric(float64(p.Lead())/float64(time.Millisecond), "lead-end-ms")
				}
			}
		})
	}
}

// steadyPop answers, for each entry, how late it left the tier against its
// fire time and against its task's due time (0 when before). With p nil
// every entry fires 20 ms before its task is due; with p, when p says,
// and p is told each Pop's delay.
// dueFrom is when, into a run, the tasks measured against their due time
// start to be due.
const dueFrom = 2 * time.Second

func steadyPop(b *testing.B, tr hot.Tier, p *hot.Planner, rate int, dur time.Duration) ([]time.Duration, []time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := int(dur.Seconds() * float64(rate))
	var (
		mu      sync.Mutex
		late    []time.Duration
		overDue []time.Duration
		dueOf   = make(map[string]time.Time, n)
		got     int
	)
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		var last time.Time
		for {
			mu.Lock()
			all := got >= n
			mu.Unlock()
			if all {
				return
			}
			if wait := 5*time.Millisecond - time.Since(last); !last.IsZero() && wait > 0 {
				time.Sleep(wait)
			}
			c, cancel := context.WithTimeout(ctx, time.Second)
			popAt := time.Now()
			es, err := tr.Pop(c, 2048, 0)
			cancel()
			if err != nil || len(es) == 0 {
				continue
			}
			now := time.Now()
			last = now
			if p != nil { // as fire's notePop
				from := popAt
				for _, e := range es {
					if e.DueAt.After(from) {
						from = e.DueAt
					}
				}
				p.PopEnd(now, now.Sub(from))
			}
			mu.Lock()
			for _, e := range es {
				late = append(late, now.Sub(e.DueAt))
				if d := dueOf[e.ID]; d.After(start.Add(dueFrom)) {
					overDue = append(overDue, max(0, now.Sub(d)))
				}
			}
			got += len(es)
			mu.Unlock()
			if err := tr.Ack(ctx, es...); err != nil {
				b.Error(err)
			}
		}
	}()
	for i := range n {
		at := start.Add(time.Duration(i) * time.Second / time.Duration(rate))
		if w := time.Until(at); w > 0 {
			time.Sleep(w)
		}
		now := time.Now()
		due := now.Add(time.Second) // as the bench's steady runs
		e := hot.Entry{ID: fmt.Sprintf("steady-%08d", i), Topic: "steady", DueAt: due.Add(-20 * time.Millisecond), Token: 1}
		if p != nil {
			e = p.Entry(now, e.ID, e.Topic, due, e.Token)
		}
		e.DueAt = e.DueAt.Truncate(time.Microsecond)
		mu.Lock()
		dueOf[e.ID] = due
		mu.Unlock()
		if err := tr.Add(ctx, e); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		b.Fatal("not every entry was popped within 30s")
	}
	mu.Lock()
	defer mu.Unlock()
	return late, overDue
}
