package complete_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/complete"
	"github.com/ontimehq/ontime/internal/stagetest"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/store/sqlstore"
	"github.com/ontimehq/ontime/internal/task"
)

// gated is the real store whose outcome writes wait for a gate: a store
// that writes outcomes far slower than tasks are delivered.
type gated struct {
	*sqlstore.Store
	gate chan struct{}
}

func (g *gated) Finish(ctx context.Context, outs []store.Outcome) error {
	select {
	case <-g.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.Store.Finish(ctx, outs)
}

// From start until their outcome is written, tasks this node holds keep
// their running leases: half of them are still being delivered (no Finish
// yet), the other half have outcomes queued behind a store that does not
// write; after several lease lengths another node still cannot claim any
// of them (it could, and would deliver them again, without the heartbeat).
// Once written they are done and no longer extended.
func TestHeldOutcomesKeepTheirLeases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := stagetest.Store(t)
	const lease = 600 * time.Millisecond
	tasks := startedTasks(t, st, 50, lease)
	g := &gated{Store: st, gate: make(chan struct{})}
	c, err := complete.New(complete.Config{Store: g, Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	c.Expect(tasks, time.Now().Add(lease))
	for _, tk := range tasks[:len(tasks)/2] {
		c.Finish(tk, nil)
	}
	time.Sleep(4 * lease)
	other := store.Lease{Owner: "n2", Until: time.Now().Add(time.Minute), Token: store.NewToken()}
	for _, it := range st.Items() {
		refs, err := st.Claim(ctx, it, time.Now().Add(time.Hour), time.Now(), other, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(refs) > 0 {
			t.Fatalf("another node claimed %d tasks whose outcome was still held: their leases were not extended", len(refs))
		}
	}
	for _, tk := range tasks[len(tasks)/2:] {
		c.Finish(tk, nil)
	}
	close(g.gate)
	c.Stop()
	for _, tk := range tasks {
		got, err := st.Get(ctx, tk.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != task.StatusDone {
			t.Fatalf("task %s: %s, want done", tk.ID, got.Status)
		}
	}
}

// Stop of a completer that never started returns at once, even with
// outcomes announced.
func TestStopNeverStarted(t *testing.T) {
	t.Parallel()
	c, err := complete.New(complete.Config{Store: &gated{}})
	if err != nil {
		t.Fatal(err)
	}
	c.Expect(make([]*task.Task, 3), time.Now())
	done := make(chan struct{})
	go func() { c.Stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Stop of a never started completer waits for outcomes no writer will take")
	}
}

// Written is told only the outcomes the store surely took: those written
// while this node's lease on their task had more than the clock skew to
// run. An outcome under a lease that ran out and that another node then
// claimed matches no row (the write says nothing of it); one whose lease
// is within the skew of its end might have been claimed by a node whose
// clock runs ahead. Neither is passed on, so the outbox relay reads their
// tasks back instead of trusting them.
func TestWrittenOnlyWhatTheStoreSurelyTook(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := stagetest.Store(t)
	const skew = 2 * time.Second
	sure := startedKeyed(t, st, "sure", 3, time.Minute)
	near := startedKeyed(t, st, "near", 3, time.Second)
	stale := startedKeyed(t, st, "stale", 3, 100*time.Millisecond)
	var w writtenLog
	c := startCompleter(t, complete.Config{Store: st, Lease: time.Minute, ClockSkew: skew, Written: w.add})
	now := time.Now()
	c.Expect(sure, now.Add(time.Minute))
	c.Expect(near, now.Add(time.Second))
	c.Expect(stale, now.Add(100*time.Millisecond))
	time.Sleep(200 * time.Millisecond)
	other := store.Lease{Owner: "n2", Until: time.Now().Add(time.Minute), Token: store.NewToken()}
	claimed := 0
	for _, it := range st.Items() {
		refs, err := st.Claim(ctx, it, time.Now().Add(time.Hour), time.Now(), other, 100)
		if err != nil {
			t.Fatal(err)
		}
		claimed += len(refs)
	}
	if claimed != len(stale) {
		t.Fatalf("another node claimed %d tasks, want the %d whose lease ran out", claimed, len(stale))
	}
	for _, group := range [][]*task.Task{sure, near, stale} {
		for _, tk := range group {
			c.Finish(tk, nil)
		}
	}
	waitWritten(t, c)
	got := map[string]bool{}
	for _, o := range w.outcomes() {
		got[o.Ref.ID] = true
	}
	for _, tk := range sure {
		if !got[tk.ID] {
			t.Errorf("task %s, written under a lease with a minute to run, was not passed on", tk.ID)
		}
		stagetest.StatusIs(t, st, tk.ID, task.StatusDone)
	}
	for _, tk := range near {
		if got[tk.ID] {
			t.Errorf("task %s, written within the clock skew of its lease's end, was passed on", tk.ID)
		}
	}
	for _, tk := range stale {
		if got[tk.ID] {
			t.Errorf("task %s, claimed by another node before its outcome was written, was passed on", tk.ID)
		}
		stagetest.StatusIs(t, st, tk.ID, task.StatusClaimed)
	}
}

// A hold whose lease ran out before a heartbeat extended it is never
// passed on to Written again, though the heartbeat extends what is still
// this node's: another node may have claimed some of its tasks meanwhile.
func TestWrittenSkipsALapsedHold(t *testing.T) {
	t.Parallel()
	st := stagetest.Store(t)
	const lease = 400 * time.Millisecond
	tasks := startedKeyed(t, st, "lapsed", 5, time.Minute)
	cs := &counting{Store: st}
	var w writtenLog
	c := startCompleter(t, complete.Config{Store: cs, Lease: lease, ClockSkew: time.Millisecond, Written: w.add})
	// Held as if its lease had ended a moment ago.
	c.Expect(tasks, time.Now().Add(-time.Millisecond))
	deadline := time.Now().Add(30 * time.Second)
	for {
		cs.mu.Lock()
		calls := cs.calls
		cs.mu.Unlock()
		if calls > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no heartbeat")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, tk := range tasks {
		c.Finish(tk, nil)
	}
	waitWritten(t, c)
	for _, tk := range tasks {
		stagetest.StatusIs(t, st, tk.ID, task.StatusDone)
	}
	if got := w.outcomes(); len(got) > 0 {
		t.Fatalf("%d outcomes of a lapsed hold passed on as surely applied", len(got))
	}
}

// writtenLog records what a completer's Written is told.
type writtenLog struct {
	mu  sync.Mutex
	got []store.Outcome
}

func (w *writtenLog) add(applied []store.Outcome) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.got = append(w.got, applied...)
}

func (w *writtenLog) outcomes() []store.Outcome {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.got)
}

// startCompleter builds a completer of cfg and starts it; it stops at the
// test's end.
func startCompleter(t *testing.T, cfg complete.Config) *complete.Completer {
	t.Helper()
	c, err := complete.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

// waitWritten waits until every outcome c was given is written.
func waitWritten(t *testing.T, c *complete.Completer) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for c.Busy() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d outcomes still unwritten", c.Busy())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
