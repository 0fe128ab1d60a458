package submit

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/ontimehq/ontime/internal/store"
)

// Group commit: concurrent small submits bound for one database share one
// Store.Insert, so one transaction and one sync. There is no background
// goroutine: the first submit to find no write in flight leads, alone if
// it is alone; submits arriving while a group is being written queue up,
// and when the write returns the first of them leads the next group with
// everything queued by the time it runs. A lone sequential submitter
// pays nothing. A leader in a crowd first lets the crowd's submits reach
// the queue (gather: it yields the processor), so under load a group is
// larger than what arrived during one commit.
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
// groups are written at once. A server engine could commit several in
// parallel, but the node runs one (ontime.go: on a machine it shares with
// its clients, more writers made smaller groups and fewer submits).
// Invariant: the queue holds submits only while all writers are busy (a
// leader is busy from when it is made leader, before it takes its group).
type committer struct {
	max     int // tasks per group
	writers int
	sizes   interface{ Observe(float64) } // submits per group

	inside atomic.Int32 // submits inside do
	queued atomic.Int32 // len(queue), read without mu by a yielding leader
	// gathers counts the leaders that yielded (tests).
	gathers atomic.Int64

	mu    sync.Mutex
	busy  int       // leaders, from when they are made leader until their write returns
	queue []*waiter // submits waiting for a leader to take them, in arrival order
	last  int       // submits of the last group taken
}

// waiter is one submit in a committer.
type waiter struct {
	tasks []store.NewTask
	bytes int
	wake  chan struct{} // cap 1: signalled once, when it leads or is done

	// Guarded by the committer's mu.
	taken  bool // out of the queue: in a group, or made leader
	lead   bool // leads a group
	waited bool // queued behind a write before it was made leader
	done   bool // ins and err are set

	ins []store.Inserted
	err error
}

// groupWork is the shared work of a group, on a context no caller
// cancels: insert stores the tasks; after runs what follows the commit
// (hot tier, scanner wake-ups) while the next group is already writing;
// dropped, when set, is told of the tasks of a caller that left before
// its group was taken (nothing of them written).
type groupWork struct {
	insert  func(ctx context.Context, tasks []store.NewTask) ([]store.Inserted, error)
	after   func(ctx context.Context, tasks []store.NewTask, ins []store.Inserted)
	dropped func(tasks []store.NewTask)
}

// do stores tasks in a group and returns their results. A caller whose
// ctx ends while it waits returns ctx.Err(): before its group was taken
// nothing of it is written; once taken, its tasks may be committed (as
// with any request that timed out). A caller made leader leads even so:
// the others queued behind it wait on it.
func (c *committer) do(ctx context.Context, tasks []store.NewTask, work groupWork) ([]store.Inserted, error) {
	c.inside.Add(1)
	defer c.inside.Add(-1)
	w := &waiter{tasks: tasks, wake: make(chan struct{}, 1)}
	for _, t := range tasks {
		w.bytes += len(t.Payload) + len(t.Target)
	}
	c.mu.Lock()
	if c.busy < c.writers {
		// The queue is empty (invariant): nobody to wait for.
		c.busy++
		w.taken, w.lead = true, true
	} else {
		c.queue = append(c.queue, w)
		c.queued.Store(int32(len(c.queue)))
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
				if work.dropped != nil {
					work.dropped(tasks)
				}
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
	c.leadGroup(ctx, w, work)
	return w.ins, w.err
}

// leadGroup gathers the group of leader, writes it, makes the first
// submit queued meanwhile leader of the next group (or frees the writer),
// runs the after-commit work and answers the group.
func (c *committer) leadGroup(ctx context.Context, leader *waiter, work groupWork) {
	c.gather(leader)
	c.mu.Lock()
	group := c.take(leader)
	c.mu.Unlock()
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
		// The next leader takes its group when it runs, not now: what
		// arrives until then joins it.
		next := c.queue[0]
		m := copy(c.queue, c.queue[1:])
		c.queue[m] = nil
		c.queue = c.queue[:m]
		c.queued.Store(int32(m))
		next.taken, next.lead, next.waited = true, true, true
		next.wake <- struct{}{}
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

// gatherYields bounds the yields of a leader while the queue grows.
const gatherYields = 4

// gather lets the submits of a crowd join leader's group before it is
// taken. A leader is in a crowd when it waited behind a write, the last
// group was not alone, or other submits are inside the committer; a lone
// sequential submitter is none of these and goes on at once.
//
// On a busy machine (2 cores: HTTP handling competes with the writer) the
// submits about to queue are goroutines waiting for a processor, so the
// leader first yields it (runtime.Gosched), again while the queue grows:
// free when nothing else is runnable. Larger groups pay fewer commits.
// A timed linger was tried (wait up to 500 µs for a group as large as the
// last): groups 2–3× larger over HTTP on SQLite, but submits/s from 16
// clients moved between −11 % and +11 % with the machine's load, and a
// parked leader costs ~1 ms on an idle process, so leaders only yield.
func (c *committer) gather(leader *waiter) {
	c.mu.Lock()
	crowded := leader.waited || c.last > 1 || c.inside.Load() > 1
	c.mu.Unlock()
	if !crowded {
		return
	}
	c.gathers.Add(1)
	queued := c.queued.Load()
	for range gatherYields {
		runtime.Gosched()
		q := c.queued.Load()
		if q == queued {
			break
		}
		queued = q
	}
}

// take removes leader's group from the queue: leader, then the queued
// submits while the group stays within its bounds. Called with mu held.
func (c *committer) take(leader *waiter) []*waiter {
	tasks, bytes := len(leader.tasks), leader.bytes
	n := 0
	for _, w := range c.queue {
		if tasks+len(w.tasks) > c.max || bytes+w.bytes > groupMaxBytes {
			break
		}
		tasks += len(w.tasks)
		bytes += w.bytes
		w.taken = true
		n++
	}
	group := make([]*waiter, 0, n+1)
	group = append(append(group, leader), c.queue[:n]...)
	m := copy(c.queue, c.queue[n:])
	clear(c.queue[m:])
	c.queue = c.queue[:m]
	c.queued.Store(int32(m))
	c.last = len(group)
	return group
}

// drop removes a waiter that gave up before its group was taken. Called
// with mu held.
func (c *committer) drop(w *waiter) {
	for i, q := range c.queue {
		if q == w {
			c.queue = append(c.queue[:i:i], c.queue[i+1:]...)
			c.queued.Store(int32(len(c.queue)))
			return
		}
	}
}
