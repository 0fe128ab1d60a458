package redis

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/ontimehq/ontime/internal/testdb"
)

// TestRestartedRedisAnswersAtOnce: many callers that find Redis gone (as
// a node's fire stage and submits do) wait for it instead of failing, and
// the first command after Redis answers again succeeds. With go-redis's
// own dialer the callers' failed dials opened its circuit breaker, which
// let nothing through until its next probe, up to a second after Redis
// was back (the restart rounds' 3.4 s lateness).
func TestRestartedRedisAnswersAtOnce(t *testing.T) {
	r := testdb.StartRedis(t)
	ctx := context.Background()
	var lost atomic.Int32
	tr, err := New(ctx, Config{Addrs: []string{r.Addr()}, Prefix: prefix(), EpochCheck: time.Hour,
		OnLost: func() { lost.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })

	r.Stop()
	const callers = 60 // more than go-redis's PoolSize on this machine
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() { _, errs[i] = tr.readEpoch(ctx) })
	}
	// Long enough for go-redis's dialer to have failed every caller's dial
	// (5 tries 100 ms apart) and opened its breaker; well under dialTimeout.
	time.Sleep(600 * time.Millisecond)
	r.Start()
	admin := goredis.NewClient(&goredis.Options{Addr: r.Addr()})
	defer admin.Close()
	if err := admin.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := tr.rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("first command after Redis answers again: %v", err)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("caller %d, waiting through a %s outage: %v", i, 600*time.Millisecond, err)
		}
	}
	if lost.Load() != 0 {
		t.Fatal("OnLost called before any epoch check")
	}
	// The callers wrote a new epoch: the tier's check finds the loss.
	if !tr.checkEpoch(ctx) {
		t.Fatal("epoch check failed with Redis up")
	}
	if lost.Load() != 1 {
		t.Fatalf("OnLost called %d times after a restart, want 1", lost.Load())
	}
}

// TestEpochCheckSaysRedisAway: a check that cannot reach Redis says so
// (watchEpoch then checks again within redialEvery) and is not a loss.
func TestEpochCheckSaysRedisAway(t *testing.T) {
	r := testdb.StartRedis(t)
	ctx := context.Background()
	var lost atomic.Int32
	tr, err := New(ctx, Config{Addrs: []string{r.Addr()}, Prefix: prefix(), EpochCheck: time.Hour,
		OnLost: func() { lost.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	if !tr.checkEpoch(ctx) {
		t.Fatal("epoch check failed with Redis up")
	}
	r.Stop()
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if tr.checkEpoch(short) {
		t.Fatal("epoch check succeeded with Redis down")
	}
	if lost.Load() != 0 {
		t.Fatal("Redis away counted as a loss")
	}
}
