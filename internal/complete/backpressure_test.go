package complete_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/complete"
	"github.com/ontimehq/ontime/internal/stagetest"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/store/sqlstore"
	"github.com/ontimehq/ontime/internal/task"
)

// Busy counts a started task until its outcome is written, not only until
// it is delivered: with the store holding every write, all of them stay
// busy after delivery (so the fire stage, bounded by Busy, starts no more
// and delivery slows to the store's pace), and Queued counts the outcomes
// waiting. Once the store writes, both fall to zero.
func TestBusyUntilWritten(t *testing.T) {
	t.Parallel()
	st := stagetest.Store(t)
	tasks := startedTasks(t, st, 40, time.Minute)
	g := &gated{Store: st, gate: make(chan struct{})}
	c, err := complete.New(complete.Config{Store: g, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.Expect(tasks, time.Now().Add(time.Minute))
	for _, tk := range tasks {
		c.Finish(tk, nil)
	}
	if b, q := c.Busy(), c.Queued(); b != int64(len(tasks)) || q != int64(len(tasks)) {
		t.Fatalf("delivered, nothing written: Busy %d Queued %d, want %d and %d", b, q, len(tasks), len(tasks))
	}
	// The backlog's wait, which started tasks' leases cover, grows with it.
	if w0, w := c.Wait(0), c.Wait(1000); w0 <= 0 || w <= w0 {
		t.Fatalf("Wait with %d outcomes queued: %s, with 1000 more %s; want positive and growing", len(tasks), w0, w)
	}
	close(g.gate)
	deadline := time.Now().Add(30 * time.Second)
	for c.Busy() != 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if b, q := c.Busy(), c.Queued(); b != 0 || q != 0 {
		t.Fatalf("written: Busy %d Queued %d, want 0", b, q)
	}
	if w := c.Wait(0); w != 0 {
		t.Fatalf("Wait with nothing held: %s, want 0", w)
	}
	c.Stop()
	if n := stagetest.Count(t, st, task.StatusDone); n != int64(len(tasks)) {
		t.Fatalf("%d done, want %d", n, len(tasks))
	}
}

// counting is the real store counting heartbeat calls.
type counting struct {
	*sqlstore.Store
	mu     sync.Mutex
	calls  int
	tokens int
}

func (c *counting) ExtendHeld(ctx context.Context, status task.Status, tokens []int64, except []string, soon, until time.Time) (int, error) {
	c.mu.Lock()
	c.calls++
	c.tokens = len(tokens)
	c.mu.Unlock()
	return c.Store.ExtendHeld(ctx, status, tokens, except, soon, until)
}

// A heartbeat covers every held task in one ExtendHeld by claim token
// (one statement per table), not one update per task: 300 tasks started
// under 3 claims are one call with 3 tokens, and every running lease is
// moved past the original end.
func TestHeartbeatByToken(t *testing.T) {
	t.Parallel()
	st := stagetest.Store(t)
	// Long enough that a heartbeat held up under CI's load (-race, every
	// package at once) still comes before the first end.
	const lease = 2 * time.Second
	var tasks []*task.Task
	for i := range 3 {
		tasks = append(tasks, startedKeyed(t, st, fmt.Sprint("c", i, "-"), 100, lease)...)
	}
	cs := &counting{Store: st}
	c, err := complete.New(complete.Config{Store: cs, Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, tk := range tasks {
			c.Finish(tk, nil)
		}
		c.Stop()
	})
	first := time.Now().Add(lease)
	c.Expect(tasks, first)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		cs.mu.Lock()
		calls := cs.calls
		cs.mu.Unlock()
		if calls >= 2 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cs.mu.Lock()
	calls, tokens := cs.calls, cs.tokens
	cs.mu.Unlock()
	if calls < 2 || tokens != 3 {
		t.Fatalf("%d heartbeats, the last with %d tokens; want at least 2, with 3 tokens", calls, tokens)
	}
	// Every lease was moved past its first end (or the task was claimed
	// away, which the heartbeat must prevent).
	time.Sleep(lease / 2)
	for _, tk := range tasks {
		got := stagetest.Get(t, st, tk.ID)
		if got.Status != task.StatusRunning || got.Token != tk.Token {
			t.Fatalf("task %s: %s under token %d, want running under %d", tk.ID, got.Status, got.Token, tk.Token)
		}
	}
	other := store.Lease{Owner: "n2", Until: time.Now().Add(time.Minute), Token: store.NewToken()}
	for _, it := range st.Items() {
		refs, err := st.Claim(context.Background(), it, time.Now().Add(time.Hour), time.Now(), other, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(refs) > 0 {
			t.Fatalf("another node claimed %d held tasks", len(refs))
		}
	}
}
