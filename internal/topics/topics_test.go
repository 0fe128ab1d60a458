package topics_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/stagetest"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/store/sqlstore"
	"github.com/ontimehq/ontime/internal/task"
	"github.com/ontimehq/ontime/internal/testdb"
	"github.com/ontimehq/ontime/internal/topics"
)

type waker struct{ n atomic.Int32 }

func (w *waker) NotifyAll(time.Time) { w.n.Add(1) }

func open(t *testing.T, dsn string) *sqlstore.Store {
	t.Helper()
	st, err := sqlstore.Open(context.Background(), sqlstore.Config{Driver: "sqlite", DSNs: []string{dsn},
		Tables: stagetest.Tables, Segments: stagetest.Segments})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// A pause written through one store (another node) reaches this node's
// watcher by its poll: Paused answers it, the store's claim filter passes
// over the topic's pending tasks, and the resume wakes the scanners and
// makes the tasks claimable again.
func TestWatcherFollowsAnotherNode(t *testing.T) {
	t.Parallel()
	dsn := testdb.SQLite(t)
	here, there := open(t, dsn), open(t, dsn)
	wk := &waker{}
	w, err := topics.New(topics.Config{Store: here, Waker: wk, Poll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	tk := stagetest.Insert(t, here, stagetest.NewTask(t, "w.topic", "k1", time.Now().Add(-time.Second)))[0]
	it := stagetest.ItemOf(tk.ShardHash, tk.Seg)
	if err := there.SetTopicPaused(ctx, "w.topic", true); err != nil {
		t.Fatal(err)
	}
	stagetest.Eventually(t, "the pause seen here", func() bool { return w.Paused("w.topic") })
	if w.Paused("other") {
		t.Fatal("an unpaused topic reads as paused")
	}
	now := time.Now()
	refs, err := here.Claim(ctx, it, now, now, store.Lease{Owner: "n", Until: now.Add(time.Minute), Token: 1}, 10)
	if err != nil || len(refs) != 0 {
		t.Fatalf("claim while paused: %v %+v", err, refs)
	}
	if wk.n.Load() != 0 {
		t.Fatal("a pause woke the scanners")
	}
	admin, err := topics.NewAdmin(there, w, wk)
	if err != nil {
		t.Fatal(err)
	}
	v, err := admin.Resume(ctx, "w.topic")
	if err != nil || v.Paused || v.Counts[task.StatusPending] != 1 {
		t.Fatalf("resume: %v %+v", err, v)
	}
	stagetest.Eventually(t, "the resume seen here", func() bool { return !w.Paused("w.topic") && wk.n.Load() > 0 })
	now = time.Now()
	refs, err = here.Claim(ctx, it, now, now, store.Lease{Owner: "n", Until: now.Add(time.Minute), Token: 2}, 10)
	if err != nil || len(refs) != 1 || refs[0].ID != tk.ID {
		t.Fatalf("claim after resume: %v %+v", err, refs)
	}
	if _, err := admin.Pause(ctx, "not a topic"); err == nil {
		t.Fatal("pausing an invalid topic name succeeded")
	}
}
