// Package fire is the stage between the hot tier and delivery: it pops
// entries as the lead planner lets them out (a little before they are due),
// marks them running in the store, and releases each to delivery at its
// due time, never before.
package fire

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ontimehq/ontime/internal/hot"
	"github.com/ontimehq/ontime/internal/metrics"
	"github.com/ontimehq/ontime/internal/startstop"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// Defaults for Config.
const (
	DefaultBatch   = 2048
	DefaultWorkers = 4
	// DefaultMaxOutstanding bounds the tasks started and not yet finished:
	// past it, firing waits for outcomes (backpressure) and due tasks wait,
	// claimed, in the hot tier, rather than in lanes and queues where
	// their running leases would have to be kept alive.
	// 50,000 lets a burst of that size be started ahead of its due time
	// (see hot.Planner) and keeps a backlog short enough to be delivered
	// within its running lease at a few thousand webhooks a second.
	DefaultMaxOutstanding = 50000
)

// Store is what firing needs of the store.
type Store interface {
	// Start marks claimed tasks running under their claim token and
	// returns those it started, sorted by due time.
	Start(ctx context.Context, refs []store.Ref, leaseUntil time.Time) ([]*task.Task, error)
	// Release hands claimed tasks back (pending), for a tier that would
	// otherwise lose them at shutdown.
	Release(ctx context.Context, refs []store.Ref) error
}

// Tier is the consuming side of the hot tier.
type Tier interface {
	Pop(ctx context.Context, max int, ahead time.Duration) ([]hot.Entry, error)
	Ack(ctx context.Context, entries ...hot.Entry) error
	Nack(ctx context.Context, retryAt time.Time, entries ...hot.Entry) error
}

// Sender delivers tasks that are due (the delivery stage).
type Sender interface {
	Send(tasks []*task.Task)
}

// Expecter is told of the started tasks that will report an outcome, and
// how many have not yet (the completion stage).
type Expecter interface {
	Expect(tasks []*task.Task, leaseUntil time.Time)
	Busy() int64
}

// Pauser says whether a topic is paused (the topics watcher).
type Pauser interface {
	Paused(topic string) bool
}

// Config wires a Firer. Store, Tier, Planner, Sender and Outcomes are
// required.
type Config struct {
	Store    Store
	Tier     Tier
	Planner  *hot.Planner // measures the store's start rate for the tier's entries
	Sender   Sender
	Outcomes Expecter
	// Batch is the most entries one Pop (and one Store.Start) takes.
	Batch int
	// Workers pop and start concurrently.
	Workers int
	// StartGap is the least time between two pops that start tasks (one
	// worker pops at a time): entries due meanwhile wait and are started
	// together. 0 is DefaultStartGap; negative, no gap.
	StartGap time.Duration
	// MaxOutstanding: firing pauses while this many started tasks have
	// not reported their outcome. Default DefaultMaxOutstanding.
	MaxOutstanding int
	// MaxBytes: firing also pauses while the payloads of the started tasks
	// not delivered yet add up to this many bytes (0: no bound), as
	// HeldBytes counts them. A start batch may pass it by one batch.
	MaxBytes int64
	// HeldBytes counts the payload bytes of the started tasks not
	// delivered yet (the completer's HeldBytes): they are in this
	// process's memory, and MaxBytes bounds them. nil: no bound.
	HeldBytes func() int64
	// Wait is how long the outcomes of n more started tasks would wait
	// behind those not written yet (the completer's Wait); a start's
	// running lease is lengthened by it. nil: no wait.
	Wait func(n int) time.Duration
	// Drain takes the entries a hot tier private to this process still
	// holds (the memory tier's Drain): at shutdown they are handed back to
	// the store rather than left to expire. nil: the tier's entries outlive
	// this process (Redis), nothing to hand back.
	Drain func() []hot.Entry
	// MaxLead is the furthest ahead of its due time a task may leave the
	// tier (the planner's max, at least its base): the running lease
	// covers that wait as well as the delivery.
	MaxLead time.Duration
	// DeliveryLease is the lease of a running task beyond MaxLead; it must
	// exceed the longest delivery (the webhook timeout).
	DeliveryLease time.Duration
	// Paused, when set, holds back the entries of paused topics: they are
	// handed back to the store (pending) without being started, and the
	// scanners pass over them until the topic resumes. Never started then
	// cancelled: a start counts an attempt and can no longer be undone.
	Paused  Pauser
	Logger  *slog.Logger
	Metrics *metrics.Metrics // nil: series kept but not registered
}

// Firer runs the fire loops. Stop ends them, waits for started tasks to be
// handed to delivery (at most MaxLead) and, with an in-process tier
// (Config.Drain), hands what still waits in it back to the store.
type Firer struct {
	startstop.Base
	cfg  Config
	log  *slog.Logger
	m    *metrics.Metrics
	gate *gate

	// live is the running start's number (runs counts them), 0 outside
	// Start and Stop: RunNow admits tasks while it is set. A number, not a
	// flag, so that a stopped run's late clearing cannot end a new one.
	live, runs atomic.Int64
	reserved   atomic.Int64   // room taken by TakeRoom, not yet given back
	waiting    sync.WaitGroup // started tasks waiting for their due time
	restoring  sync.WaitGroup // restore of live claims whose entry lost (restore.go)
	unsure     unsure         // entries whose Start failed, maybe committed (unsure.go)
}

// New checks cfg and builds a Firer; nothing runs until Start.
func New(cfg Config) (*Firer, error) {
	switch {
	case cfg.Store == nil, cfg.Tier == nil, cfg.Planner == nil, cfg.Sender == nil, cfg.Outcomes == nil:
		return nil, errors.New("fire: Store, Tier, Planner, Sender and Outcomes are required")
	case cfg.DeliveryLease <= 0:
		return nil, errors.New("fire: DeliveryLease must be positive")
	}
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.MaxOutstanding <= 0 {
		cfg.MaxOutstanding = DefaultMaxOutstanding
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New(nil)
	}
	if cfg.StartGap == 0 {
		cfg.StartGap = DefaultStartGap
	}
	return &Firer{cfg: cfg, log: cfg.Logger, m: cfg.Metrics, gate: newGate(cfg.StartGap)}, nil
}

// Start launches the fire loops.
func (f *Firer) Start(ctx context.Context) error {
	ctx, ok, started, stopped := f.StartInit(ctx)
	if !ok {
		return nil
	}
	run := f.runs.Add(1)
	f.live.Store(run)
	// Admissions end as soon as the stop begins, and surely before Stop
	// returns: AfterFunc runs its function in a goroutine of its own,
	// which a loaded machine may schedule after the loops have exited.
	context.AfterFunc(ctx, func() { f.live.CompareAndSwap(run, 0) })
	var loops sync.WaitGroup
	for range f.cfg.Workers {
		loops.Go(func() { f.loop(ctx) })
	}
	go func() {
		defer stopped()
		loops.Wait()
		f.live.CompareAndSwap(run, 0)
		f.restoring.Wait() // before drain: what it puts back is drained too
		f.waiting.Wait()   // at most MaxLead: started tasks reach their lanes
		f.drain(context.WithoutCancel(ctx))
	}()
	started()
	return nil
}

// RunNow says whether a task of topic, due at once, may be inserted
// running (store.NewTask.Running) and handed to Run when its row has
// committed, and the running lease to insert it with. It may while the
// loops run, delivery keeps up (the bound of a Start: full) and its
// topic is not paused; otherwise the task goes the way of the others,
// claimed into the tier. A task admitted holds one place of room, as
// TakeRoom's, until its submitter gives it back (GiveRoom) once the task
// is handed to Run or was not inserted: concurrent submits cannot pass
// the bound together. A task that runs saves its Start, a write of its
// row, and the tier's pop and start gap: the latency of a task due now is
// its insert's commit and the delivery.
func (f *Firer) RunNow(topic string) (leaseUntil time.Time, ok bool) {
	if f.cfg.Paused != nil && f.cfg.Paused.Paused(topic) {
		return time.Time{}, false
	}
	n, leaseUntil := f.TakeRoom(1)
	return leaseUntil, n == 1
}

// TakeRoom reserves room for up to max tasks that a scanner claims
// straight to running (overdue tasks: store ClaimRunning) and hands to
// Run: as many as the bound of started tasks without an outcome leaves
// (0 while the loops do not run, or at the bound of held bytes), and the
// running lease for them. GiveRoom(n) returns the reservation once they
// are handed to Run (which counts them itself) or were not claimed.
func (f *Firer) TakeRoom(max int) (n int, leaseUntil time.Time) {
	if f.live.Load() == 0 || max <= 0 || f.cfg.HeldBytes != nil && f.cfg.MaxBytes > 0 && f.cfg.HeldBytes() >= f.cfg.MaxBytes {
		return 0, time.Time{}
	}
	for {
		r := f.reserved.Load()
		free := int64(f.cfg.MaxOutstanding) - f.cfg.Outcomes.Busy() - r
		if free <= 0 {
			return 0, time.Time{}
		}
		n = int(min(free, int64(max)))
		if f.reserved.CompareAndSwap(r, r+int64(n)) {
			break
		}
	}
	leaseUntil = time.Now().Add(f.cfg.MaxLead + f.cfg.DeliveryLease)
	if f.cfg.Wait != nil {
		leaseUntil = leaseUntil.Add(f.cfg.Wait(n))
	}
	return n, leaseUntil
}

// GiveRoom returns n of TakeRoom's reservation.
func (f *Firer) GiveRoom(n int) { f.reserved.Add(-int64(n)) }

// Run hands tasks inserted running under RunNow's lease, or claimed
// running under TakeRoom's, to delivery, as a Start hands those it started: their outcomes expected, each released at
// its due time (already past, unless the wall clock stepped back since).
func (f *Firer) Run(tasks []*task.Task) {
	if len(tasks) == 0 {
		return
	}
	lease := tasks[0].LeaseUntil
	for _, t := range tasks[1:] {
		if t.LeaseUntil.Before(lease) {
			lease = t.LeaseUntil
		}
	}
	tasks = slices.Clone(tasks)
	slices.SortStableFunc(tasks, func(a, b *task.Task) int { return a.DueAt.Compare(b.DueAt) })
	f.cfg.Outcomes.Expect(tasks, lease)
	f.m.Started.Add(float64(len(tasks)))
	f.m.StartedDirect.Add(float64(len(tasks)))
	f.releaseAt(tasks)
}

// loop pops due entries, marks them running in the store (which also
// settles races with cancel and with other claimers: only rows still
// claimed under the entry's token start) and hands them to delivery. Pop
// ends with ctx; the store and tier writes of a popped batch do not, so a
// stop never strands a batch half started.
func (f *Firer) loop(ctx context.Context) {
	wctx := context.WithoutCancel(ctx)
	for {
		// Backpressure: start no more than delivery and the store keep up
		// with; what waits meanwhile stays claimed in the tier.
		for f.full() {
			if startstop.Sleep(ctx, 5*time.Millisecond); ctx.Err() != nil {
				return
			}
		}
		var popAt time.Time
		var ahead time.Duration
		entries, err := f.gate.pop(ctx, func(ctx context.Context) ([]hot.Entry, error) {
			popAt = time.Now()
			// Entries booked before the lead grew leave that much sooner.
			ahead = f.cfg.Planner.PopAhead()
			return f.cfg.Tier.Pop(ctx, f.cfg.Batch, ahead)
		})
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, hot.ErrClosed) {
				return
			}
			f.log.Warn("hot tier pop failed", "err", err)
			startstop.Sleep(ctx, 100*time.Millisecond)
			continue
		}
		f.notePop(popAt, time.Now(), ahead, entries)
		if entries = f.holdPaused(wctx, entries); len(entries) == 0 {
			continue
		}
		// The lease covers the wait until the due time (at most MaxLead),
		// the wait behind the outcomes not written yet (a burst's
		// backlog) and the delivery: sized now, so the backlog does not
		// need its leases rewritten while the store is busiest.
		t0 := time.Now()
		f.cfg.Planner.StartBegin(t0)
		leaseUntil := t0.Add(f.cfg.MaxLead + ahead + f.cfg.DeliveryLease)
		if f.cfg.Wait != nil {
			leaseUntil = leaseUntil.Add(f.cfg.Wait(len(entries)))
		}
		started, err := f.cfg.Store.Start(wctx, Refs(entries), leaseUntil)
		f.cfg.Planner.StartEnd(time.Now(), len(entries), time.Since(t0))
		if err != nil {
			f.log.Warn("start failed; entries retried in 1s", "count", len(entries), "err", err)
			f.unsure.add(entries)
			if err := f.cfg.Tier.Nack(wctx, time.Now().Add(time.Second), entries...); err != nil {
				f.log.Warn("hot tier nack failed; tasks wait for lease expiry", "err", err)
			}
			continue
		}
		// The store now tracks them as running: the hot entries are spent,
		// including those whose Start lost (cancelled or claimed elsewhere).
		// They are acked below, once the started tasks are on their way
		// to delivery.
		spent := entries
		if mine, lease := f.startedBefore(wctx, f.unsure.take(entries, started)); len(mine) > 0 {
			f.log.Info("tasks started by a Start whose answer was lost; delivering them", "count", len(mine))
			f.cfg.Outcomes.Expect(mine, lease)
			f.waiting.Add(1)
			go f.release(mine)
			f.m.Started.Add(float64(len(mine)))
			entries = slices.DeleteFunc(slices.Clone(entries), func(en hot.Entry) bool {
				return slices.ContainsFunc(mine, func(t *task.Task) bool { return t.ID == en.ID })
			})
		}
		f.m.Started.Add(float64(len(started)))
		if len(started) < len(entries) {
			f.restoreLost(ctx, entries, started)
		}
		if len(started) > 0 {
			f.cfg.Outcomes.Expect(started, leaseUntil)
			f.waiting.Add(1)
			go f.release(started)
		}
		// After the hand-off to delivery: with a shared tier (Redis) the
		// ack is a round trip, and on a loaded machine one can take tens
		// of milliseconds, more than the 20 ms a task leaves the tier
		// before it is due (FireLead), which is for the store's Start.
		// Nothing waits for the ack: an entry not acked is only offered
		// again after the visibility timeout, and its Start then loses.
		if err := f.cfg.Tier.Ack(wctx, spent...); err != nil {
			f.log.Warn("hot tier ack failed", "err", err)
		}
	}
}

// full says whether the started tasks not done with are at a bound: their
// count, or their payloads' bytes.
func (f *Firer) full() bool {
	if f.cfg.Outcomes.Busy()+f.reserved.Load() >= int64(f.cfg.MaxOutstanding) {
		return true
	}
	return f.cfg.HeldBytes != nil && f.cfg.MaxBytes > 0 && f.cfg.HeldBytes() >= f.cfg.MaxBytes
}

// holdPaused hands the entries of paused topics back to the store and
// returns the others. A claim made before the pause (or by a node that has
// not read it yet, or a submit due within the window) is released to
// pending; entries whose release fails go back to the tier for a second.
func (f *Firer) holdPaused(ctx context.Context, entries []hot.Entry) []hot.Entry {
	if f.cfg.Paused == nil {
		return entries
	}
	var held []hot.Entry
	keep := entries[:0:0]
	for _, en := range entries {
		if f.cfg.Paused.Paused(en.Topic) {
			held = append(held, en)
		} else {
			keep = append(keep, en)
		}
	}
	if len(held) == 0 {
		return entries
	}
	if err := f.cfg.Store.Release(ctx, Refs(held)); err != nil {
		f.log.Warn("releasing tasks of paused topics failed; retried in 1s", "count", len(held), "err", err)
		if err := f.cfg.Tier.Nack(ctx, time.Now().Add(time.Second), held...); err != nil {
			f.log.Warn("hot tier nack failed; tasks wait for lease expiry", "err", err)
		}
		return keep
	}
	if err := f.cfg.Tier.Ack(ctx, held...); err != nil {
		f.log.Warn("hot tier ack failed", "err", err)
	}
	f.m.Paused.Add(float64(len(held)))
	return keep
}

// release hands started tasks (sorted by due time) to delivery, each at
// its due time. Tasks are popped and started ahead (the planner's lead,
// more in a burst), so the store write is off the lateness path; the wait
// here is what keeps delivery never early. One goroutine and one timer per
// Start batch, not per task: 50,000 timers due at one instant cost the Go
// runtime 0.3 s before the first of them ran.
func (f *Firer) release(tasks []*task.Task) {
	defer f.waiting.Done()
	f.releaseAt(tasks)
}

// releaseAt hands tasks (sorted by due time) to delivery, each at its due
// time.
func (f *Firer) releaseAt(tasks []*task.Task) {
	for len(tasks) > 0 {
		// Due times are wall-clock readings and timers run on the
		// monotonic clock: if the wall clock was stepped back while this
		// slept, the due time is still ahead, so look again.
		for wait := time.Until(tasks[0].DueAt); wait > 0; wait = time.Until(tasks[0].DueAt) {
			time.Sleep(wait)
		}
		now := time.Now()
		n := 1
		for n < len(tasks) && !tasks[n].DueAt.After(now) {
			n++
		}
		f.cfg.Sender.Send(tasks[:n])
		tasks = tasks[n:]
	}
}

// drain hands the entries an in-process tier still holds (Config.Drain)
// back to the store, so other nodes (or this one, restarted) take them at
// once rather than after their leases.
func (f *Firer) drain(ctx context.Context) {
	if f.cfg.Drain == nil {
		return
	}
	entries := f.cfg.Drain()
	if len(entries) == 0 {
		return
	}
	if err := f.cfg.Store.Release(ctx, Refs(entries)); err != nil {
		f.log.Warn("releasing held tasks failed; they wait for their leases", "count", len(entries), "err", err)
		return
	}
	f.log.Info("released held tasks", "count", len(entries))
}

// Refs converts hot entries to the store's references.
func Refs(entries []hot.Entry) []store.Ref {
	refs := make([]store.Ref, len(entries))
	for i, en := range entries {
		refs[i] = store.Ref{ID: en.ID, Token: en.Token, DueAt: en.DueAt, Topic: en.Topic, Priority: en.Priority}
	}
	return refs
}
