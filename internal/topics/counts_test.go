package topics_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/stagetest"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
	"github.com/ontimehq/ontime/internal/testdb"
	"github.com/ontimehq/ontime/internal/topics"
)

// countingStore counts the store's count queries.
type countingStore struct {
	topics.CountStore
	n atomic.Int64
}

func (c *countingStore) TopicStats(ctx context.Context, topic string) ([]store.TopicStats, error) {
	c.n.Add(1)
	return c.CountStore.TopicStats(ctx, topic)
}

// Answers come from the cache: many lists make one count, a refresh makes
// new tasks visible and moves CountedAt on.
func TestCountsServeFromTheCache(t *testing.T) {
	t.Parallel()
	st := open(t, testdb.SQLite(t))
	cs := &countingStore{CountStore: st}
	// Not started, and a period far longer than the test: only the first
	// List and the explicit Refresh may count.
	c, err := topics.NewCounts(topics.CountsConfig{Store: cs, Every: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	stagetest.Insert(t, st, stagetest.NewTask(t, "c.one", "k1", time.Now().Add(time.Hour)))
	before := time.Now()
	var l topics.Listing
	for range 50 {
		if l, err = c.List(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := cs.n.Load(); n != 1 {
		t.Fatalf("50 lists made %d counts, want 1", n)
	}
	if len(l.Topics) != 1 || l.Topics[0].Topic != "c.one" || l.Topics[0].Counts[task.StatusPending] != 1 {
		t.Fatalf("list: %+v", l)
	}
	if l.CountedAt.Before(before.Add(-time.Second)) || l.CountedAt.After(time.Now()) {
		t.Fatalf("CountedAt %v, want between %v and now", l.CountedAt, before)
	}
	// An answer may not be changed by its caller behind the cache's back.
	l.Topics[0].Counts[task.StatusPending] = 99
	stagetest.Insert(t, st, stagetest.NewTask(t, "c.two", "k1", time.Now().Add(time.Hour)))
	if l2, _ := c.List(ctx); len(l2.Topics) != 1 || l2.Topics[0].Counts[task.StatusPending] != 1 {
		t.Fatalf("cached list: %+v, want c.one alone with its count", l2)
	}
	if err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	l2, err := c.List(ctx)
	if err != nil || len(l2.Topics) != 2 || l2.Topics[1].Topic != "c.two" || !l2.CountedAt.After(l.CountedAt) {
		t.Fatalf("after a refresh: %v %+v", err, l2)
	}
	if n := cs.n.Load(); n != 2 {
		t.Fatalf("%d counts, want 2", n)
	}
}

// The worker recounts in the background while the counts are asked for.
func TestCountsRefreshInTheBackground(t *testing.T) {
	t.Parallel()
	st := open(t, testdb.SQLite(t))
	cs := &countingStore{CountStore: st}
	c, err := topics.NewCounts(topics.CountsConfig{Store: cs, Every: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	if _, err := c.List(ctx); err != nil {
		t.Fatal(err)
	}
	stagetest.Insert(t, st, stagetest.NewTask(t, "bg.topic", "k1", time.Now().Add(time.Hour)))
	n0 := cs.n.Load()
	// Two counts after the insert without any List: the second began
	// after the insert.
	stagetest.Eventually(t, "two background counts", func() bool { return cs.n.Load() >= n0+2 })
	l, err := c.List(ctx)
	if err != nil || len(l.Topics) != 1 || l.Topics[0].Topic != "bg.topic" {
		t.Fatalf("list after background counts: %v %+v", err, l)
	}
}

// The paused flags are the watcher's current ones: a topic paused ahead
// of its first task is listed at once, and no longer once resumed, with
// no recount.
func TestCountsFollowThePausedFlags(t *testing.T) {
	t.Parallel()
	st := open(t, testdb.SQLite(t))
	cs := &countingStore{CountStore: st}
	w, err := topics.New(topics.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	c, err := topics.NewCounts(topics.CountsConfig{Store: cs, Paused: w, Every: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	stagetest.Insert(t, st, stagetest.NewTask(t, "p.real", "k1", time.Now().Add(time.Hour)))
	if _, err := c.List(ctx); err != nil {
		t.Fatal(err)
	}
	w.Set("p.ghost", true)
	w.Set("p.real", true)
	l, err := c.List(ctx)
	if err != nil || len(l.Topics) != 2 || l.Topics[0].Topic != "p.ghost" || !l.Topics[0].Paused || topics.Known(l.Topics[0]) ||
		!l.Topics[1].Paused || l.Topics[1].Counts[task.StatusPending] != 1 {
		t.Fatalf("list with pauses: %v %+v", err, l)
	}
	w.Set("p.ghost", false)
	w.Set("p.real", false)
	l, err = c.List(ctx)
	if err != nil || len(l.Topics) != 1 || l.Topics[0].Topic != "p.real" || l.Topics[0].Paused {
		t.Fatalf("list after the resumes: %v %+v", err, l)
	}
	if n := cs.n.Load(); n != 1 {
		t.Fatalf("%d counts, want 1", n)
	}
}

// Concurrent first answers share one count (single-flight).
func TestCountsSingleFlight(t *testing.T) {
	t.Parallel()
	st := open(t, testdb.SQLite(t))
	cs := &countingStore{CountStore: st}
	c, err := topics.NewCounts(topics.CountsConfig{Store: cs, Every: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	stagetest.Insert(t, st, stagetest.NewTask(t, "sf.topic", "k1", time.Now().Add(time.Hour)))
	errs := make(chan error, 20)
	for range 20 {
		go func() {
			_, err := c.List(context.Background())
			errs <- err
		}()
	}
	for range 20 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := cs.n.Load(); n != 1 {
		t.Fatalf("20 concurrent first lists made %d counts, want 1", n)
	}
}
