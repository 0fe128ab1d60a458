package redis

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/ontimehq/ontime/internal/hot"
)

// countingHook counts the commands a client sends (a script call is one).
type countingHook struct{ n atomic.Int64 }

func (h *countingHook) DialHook(next goredis.DialHook) goredis.DialHook { return next }
func (h *countingHook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error { h.n.Add(1); return next(ctx, cmd) }
}
func (h *countingHook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		h.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

func benchTier(b *testing.B) (*Tier, *countingHook) {
	p := prefix()
	tr, err := New(context.Background(), Config{Addrs: []string{localRedis}, Prefix: p})
	if err != nil {
		b.Fatal(err)
	}
	if err := tr.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	h := &countingHook{}
	tr.rdb.AddHook(h)
	b.Cleanup(func() { tr.Close(); cleanKeys(nil, localRedis, p) })
	return tr, h
}

// BenchmarkPopAck: 20,000 entries due at once, added in batches of 500,
// popped and acked in batches of 512 by 4 poppers (as the engine does).
// Reports entries/s and Redis commands per entry (add + pop + ack).
func BenchmarkPopAck(b *testing.B) {
	const n = 20000
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		tr, h := benchTier(b)
		past := time.Now().Add(-time.Second)
		es := make([]hot.Entry, n)
		for i := range es {
			es[i] = hot.Entry{ID: fmt.Sprintf("%026d", i), Topic: "bench", DueAt: past, Token: 1}
		}
		b.StartTimer()
		start := time.Now()
		for i := 0; i < n; i += 500 {
			if err := tr.Add(ctx, es[i:i+500]...); err != nil {
				b.Fatal(err)
			}
		}
		var got atomic.Int64
		done := make(chan struct{})
		for range 4 {
			go func() {
				for got.Load() < n {
					c, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
					es, _ := tr.Pop(c, 512, 0)
					cancel()
					if len(es) > 0 {
						tr.Ack(ctx, es...)
						got.Add(int64(len(es)))
					}
				}
				done <- struct{}{}
			}()
		}
		for range 4 {
			<-done
		}
		elapsed := time.Since(start)
		b.ReportMetric(float64(n)/elapsed.Seconds(), "entries/s")
		b.ReportMetric(float64(h.n.Load())/n, "cmds/entry")
	}
}

// BenchmarkLateness: 1,000 entries/s due evenly for 3 s, each added 1 s
// ahead (as the scanner preheats); lateness = pop − due.
func BenchmarkLateness(b *testing.B) {
	ctx := context.Background()
	for b.Loop() {
		tr, h := benchTier(b)
		const n = 3000
		start := time.Now().Add(1500 * time.Millisecond)
		go func() {
			for i := 0; i < n; i += 100 {
				at := start.Add(time.Duration(i) * time.Millisecond)
				time.Sleep(time.Until(at.Add(-time.Second)))
				batch := make([]hot.Entry, 100)
				for j := range batch {
					batch[j] = hot.Entry{ID: fmt.Sprint(i + j), Topic: "lat", DueAt: start.Add(time.Duration(i+j) * time.Millisecond), Token: 1}
				}
				tr.Add(ctx, batch...)
			}
		}()
		var late []time.Duration
		for len(late) < n {
			c, cancel := context.WithTimeout(ctx, 10*time.Second)
			es, err := tr.Pop(c, 64, 0)
			cancel()
			if err != nil {
				b.Fatal(err)
			}
			now := time.Now()
			for _, e := range es {
				late = append(late, now.Sub(e.DueAt))
			}
			tr.Ack(ctx, es...)
		}
		slices.Sort(late)
		b.ReportMetric(float64(late[n/2].Microseconds())/1000, "p50_ms")
		b.ReportMetric(float64(late[n*99/100].Microseconds())/1000, "p99_ms")
		b.ReportMetric(float64(late[0].Microseconds())/1000, "min_ms")
		b.ReportMetric(float64(h.n.Load())/n, "cmds/entry")
	}
}
