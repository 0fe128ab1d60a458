package submit

import (
	"context"
	"sync"

	"github.com/ontimehq/ontime/internal/store"
)

// Group commit: concurrent small submits bound for one database share one
// Store.Insert, so one transaction and one sync. There is no background
// goroutine and no linger: the first submit to find no write in flight
// leads and writes at once, alone if it is alone; submits arriving while a
// group is being written queue up, and when the write returns the first of
// them leads the next group with everything queued by then. A lone
// sequential submitter pays nothing; under load a group is as large as
// what arrived during one commit.
//
// Every submit of a group is answered only after the group's commit (and
// the hot-tier add that follows it): acknowledged means committed. A
// failed commit answers its error to every submit of the group.
const (
	// DefaultGroupMax bounds the tasks of one group.
	DefaultGroupMax = 1000
	// groupMaxBytes bounds the payload bytes of one group, so a few large
	// payloads do not make one huge transaction.
	groupMaxBytes = 8 << 20
	// groupMaxSubmit: submits of more tasks go alone; a batch already
	// shares its commit.
	groupMaxSubmit = 100
)

// committer gathers the submits bound for one database. Up to writers
// groups are written at once: SQLite has one writer, so one; a server
// engine commits several transactions in parallel (and syncs them
// together), so a few leaders keep it busy while the next groups gather.
// Invariant: the queue holds submits only while all writers are busy.
type committer struct {
	max     int // tasks per group
	writers int
	sizes   interface{ Observe(float64) } // submits per group

	mu    sync.Mutex
	busy  int       // leaders writing a group
	queue []*waiter // submits waiting for a group, in arrival order
}

// waiter is one submit in a committer.
type waiter struct {
	tasks []store.NewTask
	bytes int
	wake  chan struct{} // cap 1: signalled once, when it leads or is done

	// Guarded by the committer's mu.
	taken bool      // in a group
	lead  bool      // leads group, which it heads
	group []*waiter // the group it leads
	done  bool      // ins and err are set

	ins []store.Inserted
	err error
}

// groupWork is the shared work of a group, on a context no caller
// cancels: insert stores the tasks; after runs what follows the commit
// (hot tier, scanner wake-ups) while the next group is already writing.
type groupWork struct {
	insert func(ctx context.Context, tasks []store.NewTask) ([]store.Inserted, error)
	after  func(ctx context.Context, tasks []store.NewTask, ins []store.Inserted)
}

// do stores tasks in a group and returns their results. A caller whose
// ctx ends while it waits returns ctx.Err(): before its group was taken
// nothing of it is written; once taken, its tasks may be committed (as
// with any request that timed out). A caller made leader leads even so:
// the others of its group wait on it.
func (c *committer) do(ctx context.Context, tasks []store.NewTask, work groupWork) ([]store.Inserted, error) {
	w := &waiter{tasks: tasks, wake: make(chan struct{}, 1)}
	for _, t := range tasks {
		w.bytes += len(t.Payload) + len(t.Target)
	}
	c.mu.Lock()
	c.queue = append(c.queue, w)
	if c.busy < c.writers {
		// The queue was empty (invariant): the group is this submit.
		c.busy++
		w.group, w.lead = c.take(), true
	}
	lead := w.lead
	c.mu.Unlock()
	if !lead {
		select {
		case <-w.wake:
		case <-ctx.Done():
			c.mu.Lock()
			if !w.taken {
				c.drop(w)
				c.mu.Unlock()
				return nil, ctx.Err()
			}
			if !w.lead {
				c.mu.Unlock()
				return nil, ctx.Err()
			}
			c.mu.Unlock()
			<-w.wake // made leader: signalled already
		}
		c.mu.Lock()
		lead = w.lead
		c.mu.Unlock()
		if !lead {
			return w.ins, w.err
		}
	}
	c.leadGroup(ctx, w.group, work)
	return w.ins, w.err
}

// leadGroup writes group, hands the next group to its first submit as
// leader (or frees the writer), runs the after-commit work and answers
// the group.
func (c *committer) leadGroup(ctx context.Context, group []*waiter, work groupWork) {
	c.sizes.Observe(float64(len(group)))
	n := 0
	for _, w := range group {
		n += len(w.tasks)
	}
	tasks := make([]store.NewTask, 0, n)
	for _, w := range group {
		tasks = append(tasks, w.tasks...)
	}
	// The group's write is everyone's: the leader's caller going away
	// must not cancel it.
	ctx = context.WithoutCancel(ctx)
	ins, err := work.insert(ctx, tasks)

	c.mu.Lock()
	if len(c.queue) > 0 {
		next := c.take()
		next[0].group, next[0].lead = next, true
		next[0].wake <- struct{}{}
	} else {
		c.busy--
	}
	c.mu.Unlock()
	if err == nil {
		work.after(ctx, tasks, ins)
	}
	c.mu.Lock()
	off := 0
	for i, w := range group {
		if err != nil {
			w.err = err
		} else {
			w.ins = ins[off : off+len(w.tasks) : off+len(w.tasks)]
		}
		off += len(w.tasks)
		w.done = true
		if i > 0 {
			w.wake <- struct{}{}
		}
	}
	c.mu.Unlock()
}

// take removes the next group from the queue: at least its first submit,
// then more while the group stays within its bounds. Called with mu held.
func (c *committer) take() []*waiter {
	n, tasks, bytes := 0, 0, 0
	for _, w := range c.queue {
		if n > 0 && (tasks+len(w.tasks) > c.max || bytes+w.bytes > groupMaxBytes) {
			break
		}
		tasks += len(w.tasks)
		bytes += w.bytes
		w.taken = true
		n++
	}
	group := c.queue[:n:n]
	c.queue = append([]*waiter(nil), c.queue[n:]...)
	return group
}

// drop removes a waiter that gave up before its group was taken. Called
// with mu held.
func (c *committer) drop(w *waiter) {
	for i, q := range c.queue {
		if q == w {
			c.queue = append(c.queue[:i:i], c.queue[i+1:]...)
			return
		}
	}
}
