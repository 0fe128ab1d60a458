// Package complete is the last stage of the pipeline: it turns each
// delivery's result into the task's outcome (done, retry later, dead, or
// "never attempted") and writes outcomes to the store in batches.
package complete

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ontimehq/ontime/internal/deliver"
	"github.com/ontimehq/ontime/internal/hot"
	"github.com/ontimehq/ontime/internal/metrics"
	"github.com/ontimehq/ontime/internal/startstop"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

const (
	batchSize = 1000
	// While a burst is being delivered the completer holds its writes, up
	// to maxHold, so that the store's CPU goes to delivery first (on SQLite
	// the store is this process's own CPU).
	holdAbove = 1000 // tasks started and not yet finished
	maxHold   = time.Second
)

// Store is what completion needs of the store.
type Store interface {
	Finish(ctx context.Context, outcomes []store.Outcome) error
	// ExtendHeld moves the lease end of the running tasks held under
	// these tokens (but the given-up IDs) whose lease ends before soon:
	// one statement per table, however many tasks the node holds.
	ExtendHeld(ctx context.Context, status task.Status, tokens []int64, except []string, soon, until time.Time) (int, error)
	// Ping tells a store that cannot be reached (keep retrying the batch)
	// from one that refuses a row of it (split the batch to find it).
	Ping(ctx context.Context) error
}

// refusedTries is how often the store may refuse a single outcome, while
// it answers pings, before the outcome is given up: its task is delivered
// again after its lease (at least once), and the outcomes behind it are
// not held back.
const refusedTries = 3

// Config wires a Completer. Store is required.
type Config struct {
	Store Store
	// Retry is the node's policy: the waits of deliveries that never
	// reached their target (a full lane, a node stopping), and of failed
	// attempts when Policy is nil. Its Max caps a receiver's Retry-After.
	Retry deliver.RetryPolicy
	// Policy, when set, is the retry policy of a failed attempt of t: its
	// own, else its topic's, else the node's (topics.Settings.RetryOf).
	Policy func(t *task.Task) task.Retry
	// Lease is the running lease a started task gets (the fire stage's).
	// From Expect until its outcome is written — waiting for its due
	// time, queued in a lane behind a burst, delivering, or its outcome
	// queued behind a slow store — a task whose lease would end within
	// Lease/2 has it extended by Lease, every Lease/4, so that this node
	// holding a task never lets another claim and deliver it again. 0: no
	// extension.
	Lease time.Duration
	// Hot, when set, sends retries due within Hot.Window straight back to
	// the hot tier: their outcome is written claimed by this node, and once
	// it is committed the task enters the tier, so a retry is delivered at
	// its due time rather than when a scanner next looks. Nil: retries go
	// back pending and wait for a scan.
	Hot *HotRetry
	// FlushGap is the least time between the beginnings of two outcome
	// writes after the queue emptied: outcomes arriving meanwhile are
	// written together. 0 is DefaultFlushGap; negative, no gap.
	FlushGap time.Duration
	// Written, when set, is told the outcomes the store has just
	// committed for certain (after each batch, on the completer's
	// goroutine: it must not block): those written while their task's
	// running lease, as this node holds it, had more than ClockSkew to
	// run — no other node can have claimed the task meanwhile, so the
	// write matched its row (a write under a spent token matches none,
	// and says nothing). The outbox relay finishes a message whose task
	// ended here without reading the task back.
	Written func(applied []store.Outcome)
	// ClockSkew is how far another node's clock may be ahead of this
	// one's (Written).
	ClockSkew time.Duration
	Logger    *slog.Logger
	Metrics   *metrics.Metrics // nil: series kept but not registered
	// Unhandled decides what becomes of a task without a target this
	// node has no Go handler for (unhandled.go).
	Unhandled *Unhandled
}

// HotRetry is what sending retries straight to the hot tier needs; every
// field is required.
type HotRetry struct {
	Tier    Tier
	Planner *hot.Planner // when each entry leaves the tier
	NodeID  string
	// Incarnation is this process's (nil: unattributed tokens): the
	// retries' claims carry its tokens (see scan.Config).
	Incarnation *store.Incarnation
	// Window is the preheat window: retries due within it go to the tier.
	Window time.Duration
	// LeaseTTL is how long the claim outlives the retry's due time (the
	// scanner's and the submit path's lease).
	LeaseTTL time.Duration
	// Open, when set, says whether the fire stage still takes entries: a
	// node stopping returns its retries pending, for any node to claim,
	// rather than claimed into a tier nobody pops any more.
	Open func() bool
}

// Tier is the feeding side of the hot tier.
type Tier interface {
	Add(ctx context.Context, entries ...hot.Entry) error
}

// Completer writes delivery outcomes in batches (group commit): under load
// one Store.Finish covers up to batchSize deliveries; when idle an outcome
// is written at once. A failed write is retried until it succeeds or the
// completer stops; an outcome never written leaves its task running with a
// lease, so it is delivered again (at least once), never lost.
//
// Finish never blocks: when a burst is delivered faster than the store
// writes outcomes, the outcomes wait here rather than holding up the
// deliveries behind them. The queue is bounded by the tasks this node has
// started, and Busy counts a task until its outcome is written, so the
// fire stage (which starts no more while Busy is at its bound) slows
// delivery to the pace of the store's writes: running tasks in the store
// never exceed that bound however slow the writes are.
type Completer struct {
	startstop.Base
	st     Store
	retry  deliver.RetryPolicy
	policy func(t *task.Task) task.Retry
	lease  time.Duration
	hot    *HotRetry
	log    *slog.Logger
	m      *metrics.Metrics

	unhand    *Unhandled
	onWritten func(batch []store.Outcome) // Config.Written
	skew      time.Duration               // Config.ClockSkew
	topics    unhandledTopics             // the topics no live node handles, as seen here

	// outstanding counts started tasks whose outcome is not in yet
	// (Expect adds, Finish subtracts); unwritten those whose outcome is
	// not written yet (Expect adds, the writer subtracts).
	outstanding atomic.Int64
	unwritten   atomic.Int64
	// heldBytes adds up the payloads of the outstanding tasks: they are
	// in memory until delivered (the fire stage bounds it).
	heldBytes atomic.Int64

	mu    sync.Mutex
	q     [][]store.Outcome // chunks of batchSize: a burst's outcomes queue without copying
	since time.Time         // when the oldest queued outcome was added
	wake  chan struct{}     // one pending signal: q is not empty

	pace pace // outcomes written per second

	gap       time.Duration
	lastFlush time.Time // when the last write began; the writer's own
	// after makes the gap's timer (time.After; tests hold the gap open).
	after func(time.Duration) <-chan time.Time

	heldMu sync.Mutex
	held   map[string]int64 // task ID → token: started, outcome not written yet
	tokens map[int64]*hold  // by the tokens of held
	// gaveUp lists, by token still held, the IDs whose outcome the store
	// refused: their lease must run out (they are delivered again), so
	// the heartbeat leaves them out.
	gaveUp map[int64][]string
}

// hold is what the completer holds under one claim token.
type hold struct {
	n      int       // held tasks
	until  time.Time // the earliest of their running leases as last written
	lapsed bool      // a lease ran out before a heartbeat extended it
}

// New builds a completer; nothing runs until Start.
func New(cfg Config) (*Completer, error) {
	if cfg.Store == nil {
		return nil, errors.New("complete: Store is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New(nil)
	}
	if cfg.Lease < 0 {
		return nil, errors.New("complete: Lease is negative")
	}
	if h := cfg.Hot; h != nil && (h.Tier == nil || h.Planner == nil || h.NodeID == "" || h.Window <= 0 || h.LeaseTTL <= 0) {
		return nil, errors.New("complete: Hot needs a Tier, a Planner, a NodeID and a positive Window and LeaseTTL")
	}
	if u := cfg.Unhandled; u != nil && (u.NodeID == "" || u.LeaseTTL <= 0) {
		return nil, errors.New("complete: Unhandled needs a NodeID and a positive LeaseTTL")
	}
	if cfg.FlushGap == 0 {
		cfg.FlushGap = DefaultFlushGap
	}
	return &Completer{st: cfg.Store, retry: cfg.Retry, policy: cfg.Policy, lease: cfg.Lease, hot: cfg.Hot, log: cfg.Logger, m: cfg.Metrics,
		wake: make(chan struct{}, 1), held: map[string]int64{}, tokens: map[int64]*hold{}, gaveUp: map[int64][]string{},
		gap: max(cfg.FlushGap, 0), after: time.After, unhand: cfg.Unhandled, onWritten: cfg.Written, skew: cfg.ClockSkew}, nil
}

// Start runs the writer.
func (c *Completer) Start(ctx context.Context) error {
	ctx, ok, started, stopped := c.StartInit(ctx)
	if !ok {
		return nil
	}
	var wg sync.WaitGroup
	// Stop cancels ctx only once every expected outcome is queued; the
	// last writes must still reach the store, so they run without it.
	wg.Go(func() { c.run(context.WithoutCancel(ctx), ctx.Done()) })
	if c.lease > 0 {
		wg.Go(func() { startstop.Every(ctx, c.lease/4, c.heartbeat) })
	}
	go func() {
		defer stopped()
		wg.Wait()
	}()
	started()
	return nil
}

// Stop waits until every expected outcome is in (the stages before have
// stopped, so each started task has been delivered or refused), writes
// what is queued and stops. Idempotent.
func (c *Completer) Stop() {
	if c.Stopped() == nil {
		return // never started: no writer to wait for
	}
	// The last deliveries report within the dispatcher's grace; polling
	// only while stopping keeps Finish free of any signalling.
	for c.outstanding.Load() > 0 {
		time.Sleep(2 * time.Millisecond)
	}
	c.Base.Stop()
}

// Busy is the number of started tasks whose outcome is not written yet:
// being delivered, or delivered with the outcome queued for the store.
func (c *Completer) Busy() int64 { return c.unwritten.Load() }

// Queued is the number of outcomes waiting to be written.
func (c *Completer) Queued() int64 { return c.unwritten.Load() - c.outstanding.Load() }

// Expect announces started tasks, running until leaseUntil: each gets
// exactly one Finish, and this node holds it until its outcome is written.
func (c *Completer) Expect(tasks []*task.Task, leaseUntil time.Time) {
	var bytes int64
	for _, t := range tasks {
		if t != nil {
			bytes += int64(len(t.Payload))
		}
	}
	c.heldBytes.Add(bytes)
	c.outstanding.Add(int64(len(tasks)))
	c.unwritten.Add(int64(len(tasks)))
	c.m.OutcomesPending.Add(float64(len(tasks)))
	if c.lease <= 0 {
		return
	}
	c.heldMu.Lock()
	for _, t := range tasks {
		if old, ok := c.held[t.ID]; ok {
			if old == t.Token {
				continue
			}
			c.release(old) // started again under a new claim: the old one is spent
		}
		c.held[t.ID] = t.Token
		h := c.tokens[t.Token]
		if h == nil {
			h = &hold{until: leaseUntil}
			c.tokens[t.Token] = h
		}
		h.n++
		if leaseUntil.Before(h.until) {
			h.until = leaseUntil
		}
	}
	c.heldMu.Unlock()
}

// release drops one held task from its token's count; heldMu is held.
func (c *Completer) release(tok int64) {
	if h := c.tokens[tok]; h != nil {
		if h.n--; h.n <= 0 {
			delete(c.tokens, tok)
			delete(c.gaveUp, tok)
		}
	}
}

// applied returns the outcomes of batch, just written at now, whose task
// this node still held with more than the clock skew left on its running
// lease (Config.Written).
func (c *Completer) applied(batch []store.Outcome, now time.Time) []store.Outcome {
	if c.lease <= 0 {
		return nil
	}
	c.heldMu.Lock()
	defer c.heldMu.Unlock()
	out := make([]store.Outcome, 0, len(batch))
	for _, o := range batch {
		if tok, ok := c.held[o.Ref.ID]; ok && tok == o.Ref.Token {
			if h := c.tokens[tok]; h != nil && !h.lapsed && h.until.Sub(now) > c.skew {
				out = append(out, o)
			}
		}
	}
	return out
}

// written ends the hold of outcomes the store has taken or given up (those
// in lost: their leases are left to run out).
func (c *Completer) written(batch []store.Outcome, lost []store.Ref) {
	c.unwritten.Add(-int64(len(batch)))
	c.m.OutcomesPending.Sub(float64(len(batch)))
	if c.lease <= 0 {
		return
	}
	c.heldMu.Lock()
	defer c.heldMu.Unlock()
	for _, o := range batch {
		tok, ok := c.held[o.Ref.ID]
		if !ok || tok != o.Ref.Token {
			continue
		}
		delete(c.held, o.Ref.ID)
		c.release(tok)
	}
	for _, r := range lost {
		if c.tokens[r.Token] != nil {
			c.gaveUp[r.Token] = append(c.gaveUp[r.Token], r.ID)
		}
	}
}

// Finish records the result of delivering t (nil: delivered) as its
// outcome and queues it for the store.
func (c *Completer) Finish(t *task.Task, err error) {
	c.add(c.outcome(t, err))
	c.heldBytes.Add(-int64(len(t.Payload)))
	c.outstanding.Add(-1)
}

// HeldBytes is the payload bytes of the started tasks not delivered yet.
func (c *Completer) HeldBytes() int64 { return c.heldBytes.Load() }

// outcome maps a delivery's result to what becomes of its task:
//
//	nil                              done (with t.Result, the delivery's result)
//	lane full, node stopping         again soon, no attempt used
//	breaker open                     again when the destination may answer, no attempt used (deferral)
//	lane held (ThrottledError)       again when the destination asked, no attempt used
//	Retry-After (429, 503, broker)   again when the destination asked, at most retry_max
//	Snooze(d)                        again in d, no attempt used
//	no Go handler here (ErrNoHandler) handed off to a node that has one, else
//	                                 again when one may be back, no attempt used (unhandled.go)
//	Cancel(err), Drop(reason)        cancelled, final
//	Permanent(err), attempts spent   dead (logged at WARN)
//	any other error                  again after the retry policy's backoff
func (c *Completer) outcome(t *task.Task, err error) store.Outcome {
	o := store.Outcome{Ref: store.Ref{ID: t.ID, Token: t.Token, DueAt: t.DueAt, Topic: t.Topic, Priority: t.Priority}}
	now := time.Now()
	var open *deliver.CircuitOpenError
	var throttled *deliver.ThrottledError
	snooze, snoozed := deliver.SnoozedFor(err)
	switch {
	case err == nil:
		o.Done = true
		o.Result = t.Result // the delivery's answer (deliver.ResultBox)
		c.m.Outcomes.WithLabelValues("done").Inc()
		c.m.Topics.For(t.Topic).Done.Inc()
	case errors.As(err, &open):
		o.NotAttempted = true
		o.RetryAt = now.Add(c.deferral(now, open))
		o.Error = errText(err)
		c.m.Outcomes.WithLabelValues("deferred").Inc()
	case errors.As(err, &throttled):
		// Its lane holds its calls, as the destination asked: back when
		// it asked, without using an attempt.
		o.NotAttempted = true
		o.RetryAt = throttled.Until
		o.Error = errText(err)
		c.m.Outcomes.WithLabelValues("deferred").Inc()
	case errors.Is(err, deliver.ErrLaneFull) || errors.Is(err, deliver.ErrCircuitOpen) ||
		errors.Is(err, deliver.ErrStopped):
		// Never reached the target: try again soon, without using an attempt.
		o.NotAttempted = true
		o.RetryAt = now.Add(c.retry.Next(1, nil))
		o.Error = errText(err)
		c.m.Outcomes.WithLabelValues("deferred").Inc()
	case snoozed:
		o.NotAttempted = true
		o.RetryAt = now.Add(snooze)
		o.Error = errText(err)
		c.m.Outcomes.WithLabelValues("snoozed").Inc()
	case errors.Is(err, deliver.ErrNoHandler):
		c.unhandled(&o, t, err, now)
	case deliver.IsCancel(err):
		o.Cancelled = true
		o.Error = errText(err)
		c.m.Outcomes.WithLabelValues("cancelled").Inc()
		c.m.Topics.For(t.Topic).Cancelled.Inc()
		c.log.Info("task cancelled", "id", t.ID, "topic", t.Topic, "attempt", t.Attempts, "err", err)
	case deliver.IsPermanent(err) || t.Attempts >= t.MaxAttempts:
		o.Dead = true
		o.Error = errText(err)
		c.m.Outcomes.WithLabelValues("dead").Inc()
		c.m.Topics.For(t.Topic).Dead.Inc()
		// An operator must hear of it: nothing will deliver this task
		// again unless someone requeues it.
		c.log.Warn("task dead", "id", t.ID, "topic", t.Topic, "attempts", t.Attempts, "permanent", deliver.IsPermanent(err), "err", o.Error)
	default:
		wait, note := c.retryWait(t, err)
		o.RetryAt = now.Add(wait)
		o.Error = errText(err)
		if note != "" {
			o.Error = store.ErrorText(err.Error() + note)
		}
		c.m.Outcomes.WithLabelValues("retry").Inc()
		c.m.Topics.For(t.Topic).Retry.Inc()
	}
	if err != nil && !o.Dead {
		c.log.Debug("delivery failed", "id", t.ID, "attempt", t.Attempts, "err", err)
	}
	return o
}

// retryWait is how long t waits after its failed attempt: as long as the
// receiver asked (a Retry-After of a 429 or a 503, a broker's
// back-pressure: deliver.RetryAfterOf), at most the node's retry_max —
// note then says it was capped, for last_error —, else by the task's
// retry policy (its own, its topic's, the node's).
func (c *Completer) retryWait(t *task.Task, err error) (wait time.Duration, note string) {
	if after, ok := deliver.RetryAfterOf(err); ok {
		maxd := c.retry.Max
		if maxd <= 0 {
			maxd = time.Hour
		}
		if after > maxd {
			return maxd, fmt.Sprintf(" (waiting %s: delivery.retry_max)", maxd)
		}
		return after, ""
	}
	if c.policy == nil {
		return c.retry.Next(t.Attempts, nil), ""
	}
	return c.policy(t).Wait(t.Attempts, nil), ""
}

// deferral is how long a task refused by an open breaker waits: at least
// until the breaker lets a probe through, and outageGrowth times as long as
// the destination has been failing — so the task's age at each refusal
// grows (outageGrowth+1)-fold — up to the retry policy's Max. Each deferral
// starts and refuses the task once; with a fixed short wait, 2,000 tasks
// parked behind a dead destination were restarted 12,340 times in 30 s
// (issue 13), and with a wait as long as the outage (the age doubling)
// 10,000 parked tasks still cost 167 starts/s a minute into the outage.
// The breaker's own probes find a destination that came back; the tasks
// follow within the wait, which the cap bounds.
//
// The end of the wait is rounded up to a multiple (since the Unix epoch) of
// the breaker's OpenFor, doubled while that stays under a quarter of the
// wait: tasks refused around the same time come back at the same instant,
// so each item's scanner claims them in one statement and the fire stage
// starts them in one batch, instead of each task waking a scanner of its
// own. Rounded up, never down: no task comes back before its breaker may
// let it through.
// outageGrowth is how many times the outage's age a refused task waits.
const outageGrowth = 4

func (c *Completer) deferral(now time.Time, e *deliver.CircuitOpenError) time.Duration {
	maxd := c.retry.Max
	if maxd <= 0 {
		maxd = time.Hour
	}
	d := e.Until.Sub(now)
	if !e.Since.IsZero() {
		d = max(d, outageGrowth*now.Sub(e.Since))
	}
	d = min(max(d, c.retry.Next(1, nil)), maxd)
	return roundUp(now, d, e.OpenFor)
}

// errText is what is kept as last_error.
func errText(err error) string { return store.ErrorText(err.Error()) }

// heartbeat extends, every lease/4, the running leases of held tasks that
// would end within lease/2. When tasks are delivered and their outcomes
// written within their lease there is nothing to extend; when a burst
// outruns the lanes or the store, this is what keeps the backlog from
// expiring into redeliveries (which would add to the backlog).
//
// One ExtendHeld covers every task held, by the claim tokens they were
// started under (a few hundred for a backlog of 100,000): one statement
// per table, and only the rows near the end of their lease are written,
// so the heartbeat never competes with the outcome writes for the store
// the way per-ID updates of the whole backlog did.
func (c *Completer) heartbeat(ctx context.Context) {
	c.extend(ctx, time.Now())
}

// extend moves to now+lease (or further, by the outcomes queued ahead:
// Wait) the running leases held under the tokens whose earliest lease
// ends before now+lease/2. Leases are sized to the backlog when tasks
// start, so this is rarely needed and rarely writes.
func (c *Completer) extend(ctx context.Context, now time.Time) {
	until := now.Add(c.lease + c.Wait(0))
	tokens, except := c.heldTokens(now.Add(c.lease / 2))
	if len(tokens) == 0 {
		return
	}
	// A heartbeat held up behind a busy writer is still worth finishing:
	// it extends whatever has not been claimed away meanwhile (the tokens
	// fence off the rest).
	wctx, cancel := context.WithTimeout(ctx, c.lease)
	defer cancel()
	t0 := time.Now()
	// Every lease of these tokens that ends before until moves to until,
	// so until is then the earliest of them.
	n, err := c.st.ExtendHeld(wctx, task.StatusRunning, tokens, except, until, until)
	c.m.ExtendSeconds.Observe(time.Since(t0).Seconds())
	if err != nil {
		c.log.Warn("extending the leases of tasks this node holds failed", "tokens", len(tokens), "err", err)
		return
	}
	c.m.Extended.Add(float64(n))
	c.heldMu.Lock()
	for _, tok := range tokens {
		h := c.tokens[tok]
		if h == nil {
			continue
		}
		if h.until.Before(now) {
			// The lease had run out before this extend: another node may
			// have claimed some of its tasks (their rows now carry another
			// token and were not extended), so their outcomes are never
			// taken as applied (Config.Written).
			h.lapsed = true
		}
		if h.until.Before(until) {
			h.until = until
		}
	}
	c.heldMu.Unlock()
}

// heldTokens returns the tokens of held tasks whose earliest lease ends
// before soon, and the IDs under them whose outcome was given up.
func (c *Completer) heldTokens(soon time.Time) ([]int64, []string) {
	c.heldMu.Lock()
	defer c.heldMu.Unlock()
	var tokens []int64
	var except []string
	for tok, h := range c.tokens {
		if h.until.Before(soon) {
			tokens = append(tokens, tok)
			except = append(except, c.gaveUp[tok]...)
		}
	}
	return tokens, except
}

// Wait is how long the outcomes of n more started tasks would wait to be
// written behind those not written yet, at the pace the store has been
// writing them (at least minPace a second while it is not known): the
// fire stage adds it to a started task's running lease, the scanner to a
// claim's, so a backlog is covered when it is made instead of by
// heartbeats of every held row while the store is busiest.
func (c *Completer) Wait(n int) time.Duration {
	q := c.unwritten.Load() + int64(n)
	if q <= 0 {
		return 0
	}
	r := max(c.pace.rate(), minPace)
	return min(time.Duration(float64(q)/r*float64(time.Second)), maxWait)
}

const (
	minPace = 200.0 // outcomes a second assumed of a store not measured yet
	maxWait = time.Hour
)

// pace measures how many outcomes the store writes per second of writing:
// its capacity, not the rate outcomes happen to arrive at. (Outcomes per
// wall second would read a quiet node's trickle as a slow store, and the
// scanner, which bounds its claims by Wait, would stop claiming.) It is
// re-read every paceSample of write time, smoothed.
type pace struct {
	mu   sync.Mutex
	busy time.Duration
	n    int
	r    float64
}

const paceSample = 200 * time.Millisecond

func (p *pace) add(took time.Duration, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.busy += took
	p.n += n
	if p.busy >= paceSample {
		r := float64(p.n) / p.busy.Seconds()
		if p.r == 0 {
			p.r = r
		} else {
			p.r = (p.r + r) / 2
		}
		p.busy, p.n = 0, 0
	}
}

func (p *pace) rate() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.r
}

func (c *Completer) reachable(ctx context.Context) bool {
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return c.st.Ping(pctx) == nil
}

func (c *Completer) add(o store.Outcome) {
	c.mu.Lock()
	if len(c.q) == 0 {
		c.since = time.Now()
	}
	if n := len(c.q); n == 0 || len(c.q[n-1]) == batchSize {
		c.q = append(c.q, make([]store.Outcome, 0, batchSize))
	}
	last := &c.q[len(c.q)-1]
	*last = append(*last, o)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *Completer) run(ctx context.Context, quit <-chan struct{}) {
	for {
		select {
		case <-c.wake:
		case <-quit:
			// Write what is queued, then stop.
			c.flushAll(ctx, quit, 3)
			return
		}
		c.hold(quit)
		c.spaced(quit)
		c.flushAll(ctx, quit, -1)
	}
}

// flushAll writes every queued outcome, a batch (chunk) at a time, until
// none is left.
func (c *Completer) flushAll(ctx context.Context, quit <-chan struct{}, tries int) {
	for round := 0; ; round++ {
		c.mu.Lock()
		full := len(c.q) > 0 && len(c.q[0]) == batchSize
		c.mu.Unlock()
		if round > 0 && tries < 0 && !full {
			// What arrived during the last write: unless it fills a batch,
			// let more gather (a backlog is written back to back).
			c.spaced(quit)
		}
		c.mu.Lock()
		q := c.q
		c.q = nil
		c.mu.Unlock()
		if len(q) == 0 {
			return
		}
		for _, batch := range q {
			c.lastFlush = time.Now()
			entries := c.claimRetries(batch)
			var lost []store.Ref
			t0 := time.Now()
			ok := c.flush(ctx, quit, batch, tries, &lost)
			took := time.Since(t0)
			c.m.FinishSeconds.Observe(took.Seconds())
			var applied []store.Outcome
			if ok {
				c.pace.add(took, len(batch))
				if c.onWritten != nil {
					// Before written ends the holds it reads.
					applied = c.applied(batch, time.Now())
				}
			}
			c.written(batch, lost)
			if ok {
				c.handOff(ctx, batch)
				if len(applied) > 0 {
					c.onWritten(applied)
				}
			}
			if ok && len(entries) > 0 {
				// The rows are committed claimed under these tokens; if the
				// Add fails the retries are late, not lost: their claims
				// expire and a scanner finds them.
				if err := c.hot.Tier.Add(ctx, entries...); err != nil && !errors.Is(err, hot.ErrClosed) {
					c.log.Warn("hot tier add of retries failed; they wait for their claims to expire", "count", len(entries), "err", err)
				}
			}
		}
	}
}

// claimRetries gives the retries of batch that are due within the window a
// claim by this node (one token for the batch: the store matches them in
// one predicate) and returns their hot-tier entries, to add once the batch
// is written.
func (c *Completer) claimRetries(batch []store.Outcome) []hot.Entry {
	if c.hot == nil || (c.hot.Open != nil && !c.hot.Open()) {
		return nil
	}
	now := time.Now()
	horizon := now.Add(c.hot.Window)
	var entries []hot.Entry
	var token int64
	for i := range batch {
		o := &batch[i]
		if o.Done || o.Dead || o.Cancelled || o.Claim != nil || o.RetryAt.After(horizon) {
			continue // (a claim already: handed off to another node)
		}
		if token == 0 {
			token = store.NewToken()
			if c.hot.Incarnation != nil {
				token = c.hot.Incarnation.Token()
			}
		}
		o.Claim = &store.Lease{Owner: c.hot.NodeID, Until: o.RetryAt.Add(c.hot.LeaseTTL), Token: token}
		en := c.hot.Planner.Entry(now, o.ID, o.Topic, o.RetryAt, token)
		en.Priority = o.Priority
		entries = append(entries, en)
	}
	return entries
}

// DefaultFlushGap is Config.FlushGap's default.
//
// Under steady traffic outcomes arrive one at a time, and writing each
// wake-up's few at once made many small transactions: at 2,400 deliveries
// a second, 83 writes a second of 28 outcomes, each rewriting the same
// index pages and, on SQLite, holding the one writer the submits' group
// commits wait for. With writes at least 20 ms apart a steady 5,000/s
// makes 50 writes a second of 100 outcomes. An outcome is written at most
// that much later (its task stays running and held meanwhile, which the
// lease and Busy already cover); an idle node still writes at once, since
// the gap counts from the previous write.
const DefaultFlushGap = 20 * time.Millisecond

// spaced waits until gap after the beginning of the last write, or quit,
// so that what arrives meanwhile is written in one batch.
func (c *Completer) spaced(quit <-chan struct{}) {
	if c.gap <= 0 || c.lastFlush.IsZero() {
		return
	}
	wait := c.gap - time.Since(c.lastFlush)
	if wait <= 0 {
		return
	}
	select {
	case <-c.after(wait):
	case <-quit:
	}
}

// hold waits while many started tasks are still to be delivered (a burst
// released at its due time), for at most maxHold from the oldest queued
// outcome, or until quit.
func (c *Completer) hold(quit <-chan struct{}) {
	for c.outstanding.Load() > holdAbove {
		c.mu.Lock()
		wait := maxHold - time.Since(c.since)
		c.mu.Unlock()
		if wait <= 0 {
			return
		}
		select {
		case <-quit:
			return
		case <-time.After(min(wait, 5*time.Millisecond)):
		}
	}
}

// flush writes batch, retrying with backoff while the store cannot be
// reached; tries < 0 means until quit. When the store answers but refuses
// the batch, one of its rows is at fault (one bad outcome must not fail
// the others): the batch is split in halves, each written on its own, down
// to the single outcome, which is given up after refusedTries.
//
// It reports whether every outcome of batch was written; those not
// written are appended to lost.
func (c *Completer) flush(ctx context.Context, quit <-chan struct{}, batch []store.Outcome, tries int, lost *[]store.Ref) bool {
	backoff := 50 * time.Millisecond
	for i := 0; tries < 0 || i < tries; i++ {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := c.st.Finish(wctx, batch)
		cancel()
		if err == nil {
			return true
		}
		if c.reachable(ctx) {
			if len(batch) > 1 {
				c.log.Warn("the store refused a batch of outcomes; writing its halves apart", "count", len(batch), "err", err)
				mid := len(batch) / 2
				a := c.flush(ctx, quit, batch[:mid], tries, lost)
				b := c.flush(ctx, quit, batch[mid:], tries, lost)
				return a && b
			}
			if i+1 >= refusedTries {
				c.log.Error("the store refuses this outcome; its task will be delivered again after its lease",
					"id", batch[0].Ref.ID, "err", err)
				*lost = append(*lost, batch[0].Ref)
				return false
			}
		}
		c.log.Warn("writing delivery outcomes failed; retrying", "count", len(batch), "err", err)
		if tries < 0 {
			select {
			case <-time.After(backoff):
			case <-quit:
				tries = i + 3 // a few more tries while stopping
			}
		} else {
			time.Sleep(backoff)
		}
		backoff = min(backoff*2, 5*time.Second)
	}
	c.log.Error("delivery outcomes not written; tasks will be delivered again after their lease", "count", len(batch))
	for _, o := range batch {
		*lost = append(*lost, o.Ref)
	}
	return false
}
