package memory

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/hot"
	"github.com/ontimehq/ontime/internal/hot/hottest"
)

func TestContract(t *testing.T) {
	hottest.Run(t, func(t *testing.T) hot.Tier {
		tr, err := New(Config{Visibility: hottest.VisibilityForTests})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		return tr
	})
}

func TestDrainAndNewerClaim(t *testing.T) {
	ctx := context.Background()
	tr, _ := New(Config{})
	due := time.Now().Add(time.Hour)
	tr.Add(ctx, hot.Entry{ID: "a", DueAt: due, Token: 1}, hot.Entry{ID: "b", DueAt: due, Token: 1})
	// A newer claim of a replaces the old entry.
	tr.Add(ctx, hot.Entry{ID: "a", DueAt: due.Add(time.Second), Token: 2})
	got := tr.Drain()
	if len(got) != 2 {
		t.Fatalf("drain returned %d entries", len(got))
	}
	for _, e := range got {
		if e.ID == "a" && e.Token != 2 {
			t.Fatalf("old claim kept: %+v", e)
		}
	}
	if n, _ := tr.Len(ctx); n != 0 {
		t.Fatalf("len after drain %d", n)
	}
	if _, err := New(Config{Visibility: -time.Second}); err == nil {
		t.Fatal("negative visibility accepted")
	}
}

// BenchmarkAddPop: add then pop+ack a burst of 50,000 entries due at once.
func BenchmarkAddPop(b *testing.B) {
	ctx := context.Background()
	const n = 50000
	es := make([]hot.Entry, n)
	past := time.Now().Add(-time.Second)
	for i := range es {
		es[i] = hot.Entry{ID: fmt.Sprintf("%026d", i), Topic: "t", DueAt: past.Add(time.Duration(i%1000) * time.Microsecond), Token: 1}
	}
	for b.Loop() {
		tr, _ := New(Config{})
		tr.Add(ctx, es...)
		for left := n; left > 0; {
			got, err := tr.Pop(ctx, 512, 0)
			if err != nil {
				b.Fatal(err)
			}
			tr.Ack(ctx, got...)
			left -= len(got)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "entries/s")
}

// BenchmarkMemoryPerEntry: heap bytes per waiting entry with 1,000,000
// entries (26-character IDs, one topic).
func BenchmarkMemoryPerEntry(b *testing.B) {
	ctx := context.Background()
	for b.Loop() {
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		tr, _ := New(Config{})
		due := time.Now().Add(time.Hour)
		batch := make([]hot.Entry, 0, 1000)
		for i := range 1_000_000 {
			batch = append(batch, hot.Entry{ID: fmt.Sprintf("%026d", i), Topic: string([]byte("orders.cancel")), DueAt: due.Add(time.Duration(i)), Token: int64(i)})
			if len(batch) == cap(batch) {
				tr.Add(ctx, batch...)
				batch = batch[:0]
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&m1)
		b.ReportMetric(float64(m1.HeapAlloc-m0.HeapAlloc)/1e6, "bytes/entry")
		runtime.KeepAlive(tr)
	}
}

// BenchmarkLateness: pops of entries due 1 ms apart; lateness = pop − due.
func BenchmarkLateness(b *testing.B) {
	ctx := context.Background()
	for b.Loop() {
		tr, _ := New(Config{})
		start := time.Now().Add(50 * time.Millisecond)
		const n = 2000
		for i := range n {
			tr.Add(ctx, hot.Entry{ID: fmt.Sprint(i), DueAt: start.Add(time.Duration(i) * time.Millisecond), Token: 1})
		}
		var late []time.Duration
		for len(late) < n {
			got, _ := tr.Pop(ctx, 64, 0)
			now := time.Now()
			for _, e := range got {
				late = append(late, now.Sub(e.DueAt))
			}
			tr.Ack(ctx, got...)
		}
		slices.Sort(late)
		b.ReportMetric(float64(late[n/2].Microseconds()), "p50_µs")
		b.ReportMetric(float64(late[n*99/100].Microseconds()), "p99_µs")
		b.ReportMetric(float64(late[0].Microseconds()), "min_µs")
	}
}

func TestPriorityBacklog(t *testing.T) {
	hottest.RunPriority(t, func(t *testing.T) hot.Tier {
		tr, err := New(Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		return tr
	})
}
