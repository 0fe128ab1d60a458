package fire_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/fire"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/store/sqlstore"
	"github.com/ontimehq/ontime/internal/task"
)

// lostAnswerStore commits the first Start and answers it with an error,
// as a store that crashed between its commit and its answer does.
type lostAnswerStore struct {
	*sqlstore.Store
	lost atomic.Bool
}

func (s *lostAnswerStore) Start(ctx context.Context, refs []store.Ref, leaseUntil time.Time) ([]*task.Task, error) {
	started, err := s.Store.Start(ctx, refs, leaseUntil)
	if err == nil && len(started) > 0 && s.lost.CompareAndSwap(false, true) {
		return nil, errors.New("start: unexpected EOF (test: the answer was lost)")
	}
	return started, err
}

// TestStartWhoseAnswerWasLost (issue 25 item 10): a Start that committed
// but failed to answer leaves its rows running under the entries' tokens.
// The retried entries' Start finds nothing to start; the firer reads those
// rows and delivers them itself, once, at their due time, under the first
// Start's attempt. Before, nobody delivered them until their running lease
// ran out (here a minute; delivery.lease_ttl, 30 s, in a node).
func TestStartWhoseAnswerWasLost(t *testing.T) {
	var ls *lostAnswerStore
	x := setupWith(t, 20*time.Millisecond, func(c *fire.Config) {
		ls = &lostAnswerStore{Store: c.Store.(*sqlstore.Store)}
		c.Store = ls
	})
	now := time.Now()
	tasks := x.hold(t, "lost", now.Add(100*time.Millisecond), now.Add(150*time.Millisecond))
	x.start(t)
	deadline := time.Now().Add(20 * time.Second)
	for _, tk := range tasks {
		for x.send.times(tk.ID) == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("task %s not sent within 20s of a Start whose answer was lost (lost answer: %v)", tk.ID, ls.lost.Load())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	time.Sleep(1500 * time.Millisecond) // a second retry would have come by now
	for _, tk := range tasks {
		if n := x.send.times(tk.ID); n != 1 {
			t.Fatalf("task %s sent %d times; want once", tk.ID, n)
		}
		row, err := x.st.Get(x.ctx, tk.ID)
		if err != nil {
			t.Fatal(err)
		}
		if row.Status != task.StatusRunning || row.Attempts != 1 || row.Token != tk.Token {
			t.Fatalf("row %s is %s, attempt %d, token %d; want running, attempt 1, its claim's token", tk.ID, row.Status, row.Attempts, row.Token)
		}
	}
	for _, s := range x.send.sent() {
		if s.at.Before(s.task.DueAt) {
			t.Fatalf("task %s sent %s early", s.task.ID, s.task.DueAt.Sub(s.at))
		}
	}
	if !ls.lost.Load() {
		t.Fatal("no Start answer was lost: nothing tested")
	}
}
