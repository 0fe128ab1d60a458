package limit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/ontimehq/ontime/internal/testdb"
)

// The concurrency of a limit splits so the shares add up to it, the
// remainder to the first nodes, each at least 1; the rate into equal parts.
func TestSharesSplit(t *testing.T) {
	for _, tc := range []struct {
		conc, n int
		want    []int
	}{
		{7, 3, []int{3, 2, 2}},
		{6, 3, []int{2, 2, 2}},
		{2, 3, []int{1, 1, 1}}, // below the node count: at least 1 each
		{5, 1, []int{5}},
	} {
		for idx, want := range tc.want {
			s := NewShares(SharesConfig{Self: "x"})
			g := s.Gate(KindDestination, "d", Spec{Rate: 90, Concurrency: tc.conc}).(*shareGate)
			s.set(tc.n, idx)
			v := g.View()
			if v.ConcurrencyShare != want {
				t.Errorf("concurrency %d over %d nodes, node %d: share %d, want %d", tc.conc, tc.n, idx, v.ConcurrencyShare, want)
			}
			if v.RateShare != 90/float64(tc.n) {
				t.Errorf("rate 90 over %d nodes: share %v", tc.n, v.RateShare)
			}
		}
	}
}

// Shares follows the live nodes: this node's share changes when one
// joins or leaves, and a node missing from the list counts itself.
func TestSharesFollowLiveNodes(t *testing.T) {
	var mu sync.Mutex
	live := []string{"a", "b", "c"}
	s := NewShares(SharesConfig{Self: "b", Every: 10 * time.Millisecond, Live: func(context.Context) ([]string, error) {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), live...), nil
	}})
	g := s.Gate(KindTopic, "t", Spec{Rate: 60, Concurrency: 4})
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	waitShare := func(rate float64, conc int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			v := g.View()
			if v.RateShare == rate && v.ConcurrencyShare == conc {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("share %v/%d, want %v/%d", v.RateShare, v.ConcurrencyShare, rate, conc)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitShare(20, 1) // b is second of a, b, c: 4 = 2 + 1 + 1
	mu.Lock()
	live = []string{"a"} // b not listed (rejoining): counts itself
	mu.Unlock()
	waitShare(30, 2)
}

// A share's concurrency holds: never more in flight than the share.
func TestShareGateConcurrency(t *testing.T) {
	s := NewShares(SharesConfig{Self: "x"})
	g := s.Gate(KindDestination, "d", Spec{Concurrency: 3})
	var in, most atomic.Int32
	var wg sync.WaitGroup
	for range 30 {
		wg.Go(func() {
			leave, err := g.Enter(t.Context())
			if err != nil {
				t.Error(err)
				return
			}
			n := in.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(2 * time.Millisecond)
			in.Add(-1)
			leave()
		})
	}
	wg.Wait()
	if most.Load() != 3 {
		t.Errorf("at most %d in flight; want 3", most.Load())
	}
	if g.View().Throttled == 0 {
		t.Error("no call counted as throttled")
	}
}

func redisClient(t *testing.T) (goredis.UniversalClient, string) {
	t.Helper()
	r := testdb.StartRedis(t)
	c := goredis.NewClient(&goredis.Options{Addr: r.Addr()})
	t.Cleanup(func() { c.Close() })
	var b [6]byte
	_, _ = rand.Read(b[:])
	return c, "limit-test-" + hex.EncodeToString(b[:])
}

// Three nodes' gates on one Redis: their calls add up to the rate, and
// their calls in flight never exceed the concurrency.
func TestRedisGatesShareOneLimit(t *testing.T) {
	c, prefix := redisClient(t)
	const rate, conc = 200.0, 5
	var gates []Gate
	for _, id := range []string{"n1", "n2", "n3"} {
		r, err := NewRedis(RedisConfig{Client: c, Prefix: prefix, Self: id})
		if err != nil {
			t.Fatal(err)
		}
		gates = append(gates, r.Gate(KindDestination, "http://d", Spec{Rate: rate, Concurrency: conc, Lease: time.Minute}))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	var calls, in, most atomic.Int32
	var wg sync.WaitGroup
	start := time.Now()
	for i := range 30 {
		g := gates[i%3]
		wg.Go(func() {
			for ctx.Err() == nil {
				leave, err := g.Enter(ctx)
				if err != nil {
					return
				}
				n := in.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				calls.Add(1)
				time.Sleep(time.Millisecond)
				in.Add(-1)
				leave()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	got := float64(calls.Load()) / elapsed
	// The burst (a tenth of a second) comes on top at the start.
	if got > rate*1.05+rate/10/elapsed || got < rate*0.9 {
		t.Errorf("%d calls in %.2fs: %.1f/s; want %v/s", calls.Load(), elapsed, got, rate)
	}
	if most.Load() > conc {
		t.Errorf("%d calls in flight at once; want at most %d", most.Load(), conc)
	}
	t.Logf("%.1f calls/s, at most %d in flight", got, most.Load())
}

// A holder that never leaves (a node killed mid-call) gives its slot back
// when its lease ends.
func TestRedisSlotLease(t *testing.T) {
	c, prefix := redisClient(t)
	r, _ := NewRedis(RedisConfig{Client: c, Prefix: prefix, Self: "n1"})
	g := r.Gate(KindTopic, "t", Spec{Concurrency: 1, Lease: 300 * time.Millisecond})
	if _, err := g.Enter(t.Context()); err != nil { // never left
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	start := time.Now()
	leave, err := g.Enter(ctx)
	if err != nil {
		t.Fatalf("the slot did not come back: %v", err)
	}
	leave()
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("second holder entered after %s, before the first's lease ended", d)
	}
}

func TestSpecValidate(t *testing.T) {
	if err := (Spec{Rate: -1}).Validate("topics.a"); err == nil || err.Error()[:13] != "topics.a.rate" {
		t.Errorf("negative rate: %v", err)
	}
	if err := (Spec{Concurrency: MaxConcurrency + 1}).Validate("topics.a"); err == nil {
		t.Error("concurrency above the bound accepted")
	}
	if err := (Spec{Rate: 5, Concurrency: 2}).Validate("topics.a"); err != nil {
		t.Error(err)
	}
}
