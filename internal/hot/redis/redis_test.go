package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/ontimehq/ontime/internal/hot"
	"github.com/ontimehq/ontime/internal/hot/hottest"
	"github.com/ontimehq/ontime/internal/testdb"
)

const localRedis = "127.0.0.1:6379"

func prefix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "ontime-test-" + hex.EncodeToString(b[:])
}

// newTier opens a tier on addr with a fresh key prefix and deletes its keys
// when the test ends.
func newTier(t *testing.T, addr string, vis time.Duration) *Tier {
	t.Helper()
	p := prefix()
	tr, err := New(context.Background(), Config{Addrs: []string{addr}, Prefix: p, Visibility: vis, Resync: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		tr.Close()
		cleanKeys(t, addr, p)
	})
	return tr
}

func cleanKeys(_ testing.TB, addr, p string) {
	rdb := goredis.NewClient(&goredis.Options{Addr: addr})
	defer rdb.Close()
	ctx := context.Background()
	iter := rdb.Scan(ctx, 0, p+":*", 1000).Iterator()
	for iter.Next(ctx) {
		rdb.Del(ctx, iter.Val())
	}
}

func TestContract(t *testing.T) {
	hottest.Run(t, func(t *testing.T) hot.Tier { return newTier(t, localRedis, hottest.VisibilityForTests) })
}

// Two tiers are two nodes on one Redis: each entry goes to exactly one.
func TestTwoNodesShareSlots(t *testing.T) {
	t.Parallel()
	p := prefix()
	ctx := context.Background()
	var tiers []*Tier
	for range 2 {
		tr, err := New(ctx, Config{Addrs: []string{localRedis}, Prefix: p, Slots: 4})
		if err != nil {
			t.Fatal(err)
		}
		if err := tr.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		tiers = append(tiers, tr)
	}
	t.Cleanup(func() {
		for _, tr := range tiers {
			tr.Close()
		}
		cleanKeys(t, localRedis, p)
	})
	const n = 1000
	due := time.Now().Add(300 * time.Millisecond)
	var es []hot.Entry
	for i := range n {
		es = append(es, hot.Entry{ID: fmt.Sprintf("task-%d", i), Topic: fmt.Sprint("t", i%3), DueAt: due, Token: 1})
	}
	// Node 0 adds; node 1 learns the slots from the registry and wake-ups.
	if err := tiers[0].Add(ctx, es...); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]int{}
	perNode := make([]int, 2)
	var wg sync.WaitGroup
	deadline := time.Now().Add(20 * time.Second)
	for i, tr := range tiers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				mu.Lock()
				done := len(seen) == n
				mu.Unlock()
				if done {
					return
				}
				c, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
				got, _ := tr.Pop(c, 20, 0)
				cancel()
				now := time.Now()
				mu.Lock()
				for _, e := range got {
					if e.DueAt.After(now) {
						t.Errorf("entry popped early")
					}
					seen[e.ID]++
					perNode[i]++
				}
				mu.Unlock()
				tr.Ack(ctx, got...)
			}
		}()
	}
	wg.Wait()
	if len(seen) != n {
		t.Fatalf("%d of %d entries popped", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Fatalf("entry %s popped %d times", id, c)
		}
	}
	if perNode[0] == 0 || perNode[1] == 0 {
		t.Logf("work split %v (both nodes may not get work on a fast machine)", perNode)
	}
}

// After Redis restarts empty or is flushed, the tier keeps working: new
// entries are popped, nothing errors forever. (What Redis lost comes back
// from the store when the claims' leases expire: the engine's job.)
func TestRestartAndFlushAll(t *testing.T) {
	t.Parallel()
	r := testdb.StartRedis(t)
	tr := newTier(t, r.Addr(), 2*time.Second)
	ctx := context.Background()
	popOne := func(id string) {
		t.Helper()
		if err := tr.Add(ctx, hot.Entry{ID: id, Topic: "t", DueAt: time.Now().Add(50 * time.Millisecond), Token: 1}); err != nil {
			t.Fatalf("add %s: %v", id, err)
		}
		deadline := time.Now().Add(15 * time.Second)
		for time.Now().Before(deadline) {
			c, cancel := context.WithTimeout(ctx, time.Second)
			got, err := tr.Pop(c, 10, 0)
			cancel()
			if err == nil && len(got) == 1 && got[0].ID == id {
				tr.Ack(ctx, got...)
				return
			}
		}
		t.Fatalf("entry %s never popped", id)
	}
	popOne("before")
	// FLUSHALL under the tier's feet.
	admin := goredis.NewClient(&goredis.Options{Addr: r.Addr()})
	defer admin.Close()
	if err := admin.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	popOne("after-flush")
	// Restart without persistence: everything gone, connections broken.
	r.Stop()
	r.Start()
	deadline := time.Now().Add(15 * time.Second)
	for {
		err := tr.Add(ctx, hot.Entry{ID: "probe", Topic: "t", DueAt: time.Now().Add(time.Hour), Token: 1})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tier did not reconnect: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	popOne("after-restart")
}

// TestCluster runs the tier contract on a 3-master Redis Cluster: each
// slot's keys share a hash tag, so every script runs on one node.
func TestCluster(t *testing.T) {
	addrs := testdb.StartRedisCluster(t)
	hottest.Run(t, func(t *testing.T) hot.Tier {
		tr, err := New(context.Background(), Config{Addrs: addrs, Prefix: prefix(), Visibility: hottest.VisibilityForTests, Resync: 500 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if err := tr.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		return tr
	})
}

func TestConfigValidation(t *testing.T) {
	for _, c := range []Config{
		{},
		{Addrs: []string{"nohost"}},
		{Addrs: []string{localRedis}, Slots: 5000},
		{Addrs: []string{localRedis}, Prefix: "a{b}"},
		{Addrs: []string{localRedis}, Visibility: time.Microsecond},
	} {
		if _, err := New(context.Background(), c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	if _, err := New(context.Background(), Config{Addrs: []string{"127.0.0.1:1"}}); err == nil {
		t.Error("unreachable Redis accepted")
	}
}

// One slot: a tier orders each slot's backlog by rank.
func TestPriorityBacklog(t *testing.T) {
	hottest.RunPriority(t, func(t *testing.T) hot.Tier {
		p := prefix()
		tr, err := New(context.Background(), Config{Addrs: []string{localRedis}, Prefix: p, Slots: 1, Resync: 500 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if err := tr.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			tr.Close()
			cleanKeys(t, localRedis, p)
		})
		return tr
	})
}
