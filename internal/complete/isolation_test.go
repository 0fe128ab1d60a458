package complete_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/complete"
	"github.com/ontimehq/ontime/internal/router"
	"github.com/ontimehq/ontime/internal/stagetest"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/store/sqlstore"
	"github.com/ontimehq/ontime/internal/task"
)

// refusing is the real store, except that it refuses any Finish batch that
// holds the poisoned task, as PostgreSQL refused a whole batch for one row
// with invalid text.
type refusing struct {
	*sqlstore.Store
	poison string
	mu     sync.Mutex
	calls  int
}

func (r *refusing) Finish(ctx context.Context, outs []store.Outcome) error {
	r.mu.Lock()
	r.calls++
	r.mu.Unlock()
	if slices.ContainsFunc(outs, func(o store.Outcome) bool { return o.Ref.ID == r.poison }) {
		return errors.New("invalid byte sequence for encoding UTF8 (SQLSTATE 22021)")
	}
	return r.Store.Finish(ctx, outs)
}

// startedTasks inserts n claimed tasks due now and starts them, running
// under a lease that ends lease from now.
func startedTasks(t *testing.T, st *sqlstore.Store, n int, lease time.Duration) []*task.Task {
	t.Helper()
	return startedKeyed(t, st, "k", n, lease)
}

// startedKeyed is startedTasks with keys prefix0…prefix(n-1), under one
// claim token of its own.
func startedKeyed(t *testing.T, st *sqlstore.Store, prefix string, n int, lease time.Duration) []*task.Task {
	t.Helper()
	ctx := context.Background()
	now := time.Now()
	claim := store.Lease{Owner: "n1", Until: now.Add(lease), Token: store.NewToken()}
	news := make([]store.NewTask, n)
	refs := make([]store.Ref, n)
	for i := range news {
		key := fmt.Sprint(prefix, i)
		v, err := task.Validate(task.Spec{Topic: "t", Key: key, DueAt: &now}, task.Limits{}, now)
		if err != nil {
			t.Fatal(err)
		}
		id, p := router.NewID(now, router.HashKey(key), true)
		news[i] = store.NewTask{ID: id, ShardHash: p.ShardHash, Seg: p.Segment(stagetest.Segments), Validated: v, Claim: &claim}
		refs[i] = store.Ref{ID: id, Token: claim.Token, DueAt: v.DueAt, Topic: "t"}
	}
	if _, err := st.Insert(ctx, news); err != nil {
		t.Fatal(err)
	}
	started, err := st.Start(ctx, refs, now.Add(lease))
	if err != nil || len(started) != n {
		t.Fatalf("start: %d of %d, %v", len(started), n, err)
	}
	return started
}

// One outcome the store refuses does not fail the others in its batch, and
// does not hold back the batches queued behind it: it is given up (its task
// stays running, to be delivered again after its lease) and everything
// else is written.
func TestRefusedOutcomeIsIsolated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := stagetest.Store(t)
	tasks := startedTasks(t, st, 300, time.Minute)
	poison := tasks[137]
	rs := &refusing{Store: st, poison: poison.ID}
	c, err := complete.New(complete.Config{Store: rs})
	if err != nil {
		t.Fatal(err)
	}
	c.Expect(tasks, time.Now().Add(time.Minute))
	for _, tk := range tasks {
		c.Finish(tk, nil) // queued before the writer runs: one batch
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { c.Stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("Stop did not return: the refused outcome holds the completer")
	}
	for _, tk := range tasks {
		got, err := st.Get(ctx, tk.ID)
		if err != nil {
			t.Fatal(err)
		}
		want := task.StatusDone
		if tk.ID == poison.ID {
			want = task.StatusRunning
		}
		if got.Status != want {
			t.Fatalf("task %s: %s, want %s", tk.ID, got.Status, want)
		}
	}
	if rs.calls > 60 {
		t.Fatalf("%d Finish calls to isolate one row of 300: the split should take about 2·log2(300)+3", rs.calls)
	}
}
