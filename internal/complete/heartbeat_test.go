package complete_test

import (
	"context"
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
