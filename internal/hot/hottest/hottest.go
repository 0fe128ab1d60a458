// Package hottest is the contract suite of the hot tier. Every tier passes
// it: Run(t, newTier). The tier it makes must use a visibility timeout of
// about 1 s (VisibilityForTests), so redelivery can be observed.
package hottest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/hot"
)

// VisibilityForTests is the visibility timeout the suite expects.
const VisibilityForTests = time.Second

// Run runs the suite; newTier returns a fresh, empty tier and arranges its
// cleanup.
func Run(t *testing.T, newTier func(t *testing.T) hot.Tier) {
	ctx := context.Background()
	entry := func(id string, due time.Time) hot.Entry {
		return hot.Entry{ID: id, Topic: "topic.a", DueAt: due.Truncate(time.Microsecond), Token: 7}
	}
	popWithin := func(t *testing.T, tr hot.Tier, max int, d time.Duration) []hot.Entry {
		t.Helper()
		c, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		got, err := tr.Pop(c, max, 0)
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("pop: %v", err)
		}
		return got
	}

	t.Run("NeverEarlyAndInOrder", func(t *testing.T) {
		t.Parallel()
		tr := newTier(t)
		base := time.Now().Add(100 * time.Millisecond)
		var entries []hot.Entry
		for i := range 200 {
			entries = append(entries, entry(fmt.Sprintf("e%03d", i), base.Add(time.Duration((i*37)%200)*5*time.Millisecond)))
		}
		if err := tr.Add(ctx, entries...); err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for len(seen) < len(entries) {
			got := popWithin(t, tr, 16, 10*time.Second)
			now := time.Now()
			if len(got) == 0 {
				t.Fatalf("pop returned nothing; %d of %d seen", len(seen), len(entries))
			}
			var last time.Time
			for _, e := range got {
				if e.DueAt.After(now) {
					t.Fatalf("entry %s popped %s early", e.ID, e.DueAt.Sub(now))
				}
				if e.DueAt.Before(last) {
					t.Fatalf("entry %s popped out of due order", e.ID)
				}
				if seen[e.ID] {
					t.Fatalf("entry %s popped twice", e.ID)
				}
				if e.Topic != "topic.a" || e.Token != 7 {
					t.Fatalf("entry fields lost: %+v", e)
				}
				last = e.DueAt
				seen[e.ID] = true
			}
			if err := tr.Ack(ctx, got...); err != nil {
				t.Fatal(err)
			}
		}
	})

	t.Run("EarlierAddWakesSleeper", func(t *testing.T) {
		t.Parallel()
		tr := newTier(t)
		far := time.Now().Add(time.Minute)
		if err := tr.Add(ctx, entry("far", far)); err != nil {
			t.Fatal(err)
		}
		done := make(chan []hot.Entry, 1)
		go func() { done <- popWithin(t, tr, 10, 30*time.Second) }()
		time.Sleep(200 * time.Millisecond) // let Pop go to sleep on the far entry
		if err := tr.Add(ctx, entry("near", time.Now().Add(50*time.Millisecond))); err != nil {
			t.Fatal(err)
		}
		got := <-done
		if len(got) != 1 || got[0].ID != "near" || time.Now().After(far) {
			t.Fatalf("pop got %+v; want the near entry long before the far one", got)
		}
	})

	t.Run("MaxAndLen", func(t *testing.T) {
		t.Parallel()
		tr := newTier(t)
		past := time.Now().Add(-time.Second)
		var es []hot.Entry
		for i := range 10 {
			es = append(es, entry(fmt.Sprint(i), past))
		}
		tr.Add(ctx, es...)
		tr.Add(ctx, es[0]) // a duplicate keeps one
		if n, err := tr.Len(ctx); err != nil || n != 10 {
			t.Fatalf("len %d %v, want 10", n, err)
		}
		got := popWithin(t, tr, 3, 5*time.Second)
		if len(got) != 3 {
			t.Fatalf("pop(3) returned %d", len(got))
		}
		tr.Ack(ctx, got...)
		if n, _ := tr.Len(ctx); n != 7 {
			t.Fatalf("len after ack %d, want 7", n)
		}
	})

	// A Pop taking entries ahead returns those due within ahead, no
	// sooner (a sleeping one wakes ahead of the head, not at it), and
	// leaves the rest; in-flight entries still expire by now alone.
	t.Run("Ahead", func(t *testing.T) {
		t.Parallel()
		tr := newTier(t)
		now := time.Now()
		near, far := now.Add(3*time.Second), now.Add(time.Hour)
		tr.Add(ctx, entry("near", near), entry("far", far))
		if got := popWithin(t, tr, 10, 100*time.Millisecond); len(got) != 0 {
			t.Fatalf("pop without ahead returned %+v, nothing is due", got)
		}
		const ahead = 2500 * time.Millisecond
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		got, err := tr.Pop(c, 10, ahead)
		cancel()
		at := time.Now()
		if err != nil || len(got) != 1 || got[0].ID != "near" {
			t.Fatalf("pop ahead %s: %+v %v, want near alone", ahead, got, err)
		}
		if at.Before(near.Add(-ahead)) {
			t.Fatalf("pop ahead %s returned the entry %s before it was due within ahead", ahead, near.Add(-ahead).Sub(at))
		}
		if !at.Before(near) {
			t.Fatalf("pop ahead %s returned at %s, not before the entry's time: it slept to the head", ahead, at.Sub(near))
		}
		// Not acked: hidden for the visibility timeout even to a Pop that
		// looks an hour ahead, then back.
		c, cancel = context.WithTimeout(ctx, VisibilityForTests/4)
		got, _ = tr.Pop(c, 10, time.Millisecond)
		cancel()
		if len(got) != 0 {
			t.Fatalf("in-flight entry popped again before its visibility timeout: %+v", got)
		}
		c, cancel = context.WithTimeout(ctx, 10*VisibilityForTests)
		got, err = tr.Pop(c, 10, 30*time.Second)
		cancel()
		if err != nil || len(got) != 1 || got[0].ID != "near" {
			t.Fatalf("after the visibility timeout: %+v %v, want near again (and not far)", got, err)
		}
	})

	t.Run("InFlightHiddenThenVisibleAgain", func(t *testing.T) {
		t.Parallel()
		tr := newTier(t)
		tr.Add(ctx, entry("v", time.Now().Add(-time.Millisecond)))
		first := popWithin(t, tr, 10, 5*time.Second)
		if len(first) != 1 {
			t.Fatalf("first pop %+v", first)
		}
		if again := popWithin(t, tr, 10, VisibilityForTests/4); len(again) != 0 {
			t.Fatalf("in-flight entry popped again before its visibility timeout: %+v", again)
		}
		// Neither acked nor nacked: it comes back after the timeout.
		back := popWithin(t, tr, 10, 10*VisibilityForTests)
		if len(back) != 1 || back[0].ID != "v" {
			t.Fatalf("entry not redelivered after the visibility timeout: %+v", back)
		}
		tr.Ack(ctx, back...)
		if gone := popWithin(t, tr, 10, 2*VisibilityForTests); len(gone) != 0 {
			t.Fatalf("acked entry came back: %+v", gone)
		}
	})

	t.Run("NackAndRemove", func(t *testing.T) {
		t.Parallel()
		tr := newTier(t)
		tr.Add(ctx, entry("n", time.Now().Add(-time.Millisecond)), entry("r", time.Now().Add(300*time.Millisecond)))
		got := popWithin(t, tr, 1, 5*time.Second)
		if len(got) != 1 || got[0].ID != "n" {
			t.Fatalf("pop %+v", got)
		}
		retry := time.Now().Add(400 * time.Millisecond)
		if err := tr.Nack(ctx, retry, got...); err != nil {
			t.Fatal(err)
		}
		if err := tr.Remove(ctx, hot.Entry{ID: "r", Topic: "topic.a"}, hot.Entry{ID: "unknown", Topic: "topic.a"}); err != nil {
			t.Fatal(err)
		}
		again := popWithin(t, tr, 10, 5*time.Second)
		if len(again) != 1 || again[0].ID != "n" || time.Now().Before(retry) {
			t.Fatalf("after nack: %+v (removed r must not come back; n not before its retry)", again)
		}
	})

	t.Run("ConcurrentPoppersGetEachEntryOnce", func(t *testing.T) {
		t.Parallel()
		tr := newTier(t)
		const n = 2000
		due := time.Now().Add(200 * time.Millisecond)
		var es []hot.Entry
		for i := range n {
			es = append(es, entry(fmt.Sprint(i), due))
		}
		tr.Add(ctx, es...)
		var mu sync.Mutex
		seen := map[string]int{}
		var wg sync.WaitGroup
		for range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					mu.Lock()
					all := len(seen) == n
					mu.Unlock()
					if all {
						return
					}
					got := popWithin(t, tr, 50, 300*time.Millisecond)
					mu.Lock()
					for _, e := range got {
						seen[e.ID]++
					}
					mu.Unlock()
					tr.Ack(ctx, got...)
				}
			}()
		}
		wg.Wait()
		for id, c := range seen {
			if c != 1 {
				t.Fatalf("entry %s delivered %d times", id, c)
			}
		}
	})

	t.Run("CloseAndCancel", func(t *testing.T) {
		t.Parallel()
		tr := newTier(t)
		c, cancel := context.WithCancel(ctx)
		errc := make(chan error, 1)
		go func() { _, err := tr.Pop(c, 1, 0); errc <- err }()
		time.Sleep(50 * time.Millisecond)
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("pop after cancel: %v", err)
		}
		go func() { _, err := tr.Pop(ctx, 1, 0); errc <- err }()
		time.Sleep(50 * time.Millisecond)
		if err := tr.Close(); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-errc:
			if !errors.Is(err, hot.ErrClosed) {
				t.Fatalf("pop after close: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("close did not wake a blocked pop")
		}
		if err := tr.Close(); err != nil {
			t.Fatalf("second close: %v", err)
		}
	})
}
