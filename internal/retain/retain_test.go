package retain_test

import (
	"context"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/retain"
	"github.com/ontimehq/ontime/internal/stagetest"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// TestPassDeletesExpiredOfOwnedItems: a pass deletes, in batches, every
// final row past its status's retention in the owned items, and nothing
// else: not live rows, not rows still within retention, not other items.
func TestPassDeletesExpiredOfOwnedItems(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := stagetest.Store(t)
	items := st.Items()
	owned, other := items[0], items[1]
	now := time.Now()
	// Done and cancelled rows in both items; a pending one in each.
	var ownedDone, otherDone []string
	for i := range 30 {
		for _, it := range []store.Item{owned, other} {
			nt := stagetest.NewTaskIn(t, it, "ret", "d", now)
			tk := stagetest.Running(t, st, nt)[0]
			if err := st.Finish(ctx, []store.Outcome{{Ref: store.Ref{ID: tk.ID, Token: tk.Token}, Done: true}}); err != nil {
				t.Fatal(err)
			}
			if it == owned {
				ownedDone = append(ownedDone, tk.ID)
			} else {
				otherDone = append(otherDone, tk.ID)
			}
			if i < 3 {
				c := stagetest.Insert(t, st, stagetest.NewTaskIn(t, it, "ret", "c", now.Add(time.Hour)))[0]
				if _, err := st.Cancel(ctx, c.ID); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	livePending := stagetest.Insert(t, st, stagetest.NewTaskIn(t, owned, "ret", "p", now.Add(time.Hour)))[0]
	time.Sleep(20 * time.Millisecond)
	c, err := retain.New(retain.Config{Store: st, Items: func() []store.Item { return []store.Item{owned} },
		Done: 10 * time.Millisecond, Cancelled: time.Hour, Dead: time.Hour, Batch: 7})
	if err != nil {
		t.Fatal(err)
	}
	n, err := c.Pass(ctx)
	if err != nil || n != int64(len(ownedDone)) {
		t.Fatalf("pass deleted %d, %v; want the %d done rows of the owned item", n, err, len(ownedDone))
	}
	for _, id := range ownedDone {
		if _, err := st.Get(ctx, id); err == nil {
			t.Fatalf("expired done task %s kept", id)
		}
	}
	for _, id := range append(otherDone, livePending.ID) {
		stagetest.Get(t, st, id)
	}
	if got := stagetest.Count(t, st, task.StatusCancelled); got != 6 {
		t.Fatalf("cancelled rows %d, want 6 (within their retention)", got)
	}
	if n, err := c.Pass(ctx); err != nil || n != 0 {
		t.Fatalf("second pass deleted %d, %v", n, err)
	}
}

// TestCleanerRunsUntilStopped: started, the cleaner deletes expired rows on
// its own; Stop returns.
func TestCleanerRunsUntilStopped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := stagetest.Store(t)
	nt := stagetest.NewTask(t, "ret", "", time.Now())
	tk := stagetest.Running(t, st, nt)[0]
	if err := st.Finish(ctx, []store.Outcome{{Ref: store.Ref{ID: tk.ID, Token: tk.Token}, Dead: true}}); err != nil {
		t.Fatal(err)
	}
	c, err := retain.New(retain.Config{Store: st, Items: st.Items, Done: time.Hour, Cancelled: time.Hour, Dead: time.Millisecond,
		Interval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	stagetest.Eventually(t, "dead row deleted", func() bool { return stagetest.Total(t, st) == 0 })
	c.Stop()
	c.Stop()
	if _, err := retain.New(retain.Config{Store: st, Items: st.Items}); err == nil {
		t.Fatal("zero retentions accepted")
	}
}
