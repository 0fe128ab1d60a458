package topics_test

import (
	"context"
	"database/sql"
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
	admin, err := topics.NewAdmin(there, w, newCounts(t, there, w), wk, nil)
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

// A topic without tasks may be paused ahead of its first task; the answer
// says it is not known (no silent success for a typo), the list shows it
// paused, and a resume removes the pause from the store altogether.
func TestPauseAheadOfFirstTask(t *testing.T) {
	t.Parallel()
	dsn := testdb.SQLite(t)
	st := open(t, dsn)
	w, err := topics.New(topics.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := topics.NewAdmin(st, w, newCounts(t, st, w), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	stagetest.Insert(t, st, stagetest.NewTask(t, "real.topic", "k1", time.Now().Add(time.Hour)))
	v, err := admin.Pause(ctx, "real.topic")
	if err != nil || !v.Paused || !topics.Known(*v) {
		t.Fatalf("pause of a topic with a task: %v %+v, want paused and known", err, v)
	}
	v, err = admin.Pause(ctx, "no.such.topic")
	if err != nil || !v.Paused || topics.Known(*v) {
		t.Fatalf("pause of a topic without tasks: %v %+v, want paused and not known", err, v)
	}
	if !w.Paused("no.such.topic") {
		t.Fatal("the pause ahead of the first task does not hold here")
	}
	l, err := admin.List(ctx)
	list := l.Topics
	if err != nil || len(list) != 2 || list[0].Topic != "no.such.topic" || !list[0].Paused || topics.Known(list[0]) {
		t.Fatalf("list: %v %+v", err, list)
	}
	for _, topic := range []string{"no.such.topic", "real.topic"} {
		if v, err = admin.Resume(ctx, topic); err != nil || v.Paused {
			t.Fatalf("resume %s: %v %+v", topic, err, v)
		}
	}
	if topics.Known(*v) != true {
		t.Fatalf("resume of real.topic: %+v, want known", v)
	}
	l, err = admin.List(ctx)
	list = l.Topics
	if err != nil || len(list) != 1 || list[0].Topic != "real.topic" || list[0].Paused {
		t.Fatalf("list after resume: %v %+v", err, list)
	}
	// The table holds paused topics only: a resume leaves no row behind.
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rows int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM ontime_topics`).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("rows of ontime_topics after resume: %d %v, want 0", rows, err)
	}
}

func newCounts(t *testing.T, st topics.CountStore, w *topics.Watcher) *topics.Counts {
	t.Helper()
	c, err := topics.NewCounts(topics.CountsConfig{Store: st, Paused: w})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
