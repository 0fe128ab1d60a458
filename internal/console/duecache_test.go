package console

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// TestDueCache: the first view waits for a count; views within dueFresh
// share it; a view of an older one gets it at once while one refresh runs
// beside it; a histogram past dueStale is waited for again.
func TestDueCache(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	release := make(chan struct{}, 10)
	d := &dueCache{count: func(ctx context.Context, from time.Time, step time.Duration, n int) ([]DueCounts, error) {
		calls.Add(1)
		<-release
		return []DueCounts{{Topic: "t", Counts: make([]int64, n)}}, nil
	}}
	ctx := context.Background()
	step := time.Minute
	from := time.Now().Truncate(step)
	release <- struct{}{}
	got, counts, at, err := d.get(ctx, from, step, 3)
	if err != nil || !got.Equal(from) || len(counts) != 1 || at.IsZero() || calls.Load() != 1 {
		t.Fatalf("first view: %v %v %v %v, %d counts", got, counts, at, err, calls.Load())
	}
	if _, _, _, err := d.get(ctx, from, step, 3); err != nil || calls.Load() != 1 {
		t.Fatalf("a fresh histogram was counted again: %d counts, %v", calls.Load(), err)
	}
	// Older than dueFresh, and the next minute: shown at once, as counted
	// (its own first bucket), while one refresh runs.
	d.mu.Lock()
	d.by[step].at = time.Now().Add(-dueFresh - time.Second)
	d.mu.Unlock()
	next := from.Add(step)
	for range 3 {
		got, _, _, err := d.get(ctx, next, step, 3)
		if err != nil || !got.Equal(from) {
			t.Fatalf("stale view: %v %v", got, err)
		}
	}
	release <- struct{}{}
	d.wg.Wait()
	if calls.Load() != 2 {
		t.Fatalf("%d counts, want one refresh for three stale views", calls.Load())
	}
	if got, _, _, _ := d.get(ctx, next, step, 3); !got.Equal(next) {
		t.Fatalf("after the refresh the histogram starts at %v, want %v", got, next)
	}
	// Past dueStale: waited for.
	d.mu.Lock()
	d.by[step].at = time.Now().Add(-dueStale - time.Second)
	d.mu.Unlock()
	release <- struct{}{}
	if _, _, at, err := d.get(ctx, next, step, 3); err != nil || at.IsZero() || time.Since(at) > time.Second || calls.Load() != 3 {
		t.Fatalf("a stale histogram was not recounted before the view: %v %v %d", at, err, calls.Load())
	}
}

// TestDueCacheSlowCount: a view does not wait past dueWait for a count;
// it gets no histogram (the page says it is counting) and the count goes
// on for the next view.
func TestDueCacheSlowCount(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	d := &dueCache{count: func(ctx context.Context, from time.Time, step time.Duration, n int) ([]DueCounts, error) {
		<-release
		return []DueCounts{{Topic: "t", Counts: make([]int64, n)}}, nil
	}}
	from := time.Now().Truncate(time.Hour)
	t0 := time.Now()
	_, counts, at, err := d.get(context.Background(), from, time.Hour, 2)
	if err != nil || counts != nil || !at.IsZero() || time.Since(t0) > dueWait+time.Second {
		t.Fatalf("a slow first count: %v %v %v after %s", counts, at, err, time.Since(t0))
	}
	close(release)
	d.wg.Wait()
	if _, counts, at, err := d.get(context.Background(), from, time.Hour, 2); err != nil || len(counts) != 1 || at.IsZero() {
		t.Fatalf("the next view: %v %v %v", counts, at, err)
	}
}
