package redis

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/ontimehq/ontime/internal/testdb"
)

// TestEpochNoticesLostData: a FLUSHALL and a restart of a Redis without
// persistence each make every tier on it call OnLost, once per loss, and
// nothing else does.
func TestEpochNoticesLostData(t *testing.T) {
	r := testdb.StartRedis(t)
	ctx := context.Background()
	p := prefix()
	var lostA, lostB atomic.Int32
	open := func(n *atomic.Int32) *Tier {
		tr, err := New(ctx, Config{Addrs: []string{r.Addr()}, Prefix: p, EpochCheck: 50 * time.Millisecond,
			OnLost: func() { n.Add(1) }})
		if err != nil {
			t.Fatal(err)
		}
		if err := tr.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		return tr
	}
	a, b := open(&lostA), open(&lostB)
	epoch := func(tr *Tier) string {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return tr.epoch
	}
	if ea, eb := epoch(a), epoch(b); ea == "" || ea != eb {
		t.Fatalf("two tiers on one Redis see epochs %q and %q", ea, eb)
	}
	wait := func(what string, want int32) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for lostA.Load() < want || lostB.Load() < want {
			if time.Now().After(deadline) {
				t.Fatalf("%s: OnLost called %d and %d times, want %d", what, lostA.Load(), lostB.Load(), want)
			}
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond) // several more checks: no second call for one loss
		if lostA.Load() != want || lostB.Load() != want {
			t.Fatalf("%s: OnLost called %d and %d times, want %d", what, lostA.Load(), lostB.Load(), want)
		}
	}
	time.Sleep(200 * time.Millisecond)
	if lostA.Load() != 0 || lostB.Load() != 0 {
		t.Fatal("OnLost called with nothing lost")
	}

	admin := goredis.NewClient(&goredis.Options{Addr: r.Addr()})
	defer admin.Close()
	if err := admin.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	wait("after FLUSHALL", 1)

	r.Stop()
	time.Sleep(150 * time.Millisecond) // checks fail meanwhile: not a loss by themselves
	if lostA.Load() != 1 {
		t.Fatalf("Redis away counted as a loss: %d", lostA.Load())
	}
	r.Start()
	wait("after a restart", 2)
}
