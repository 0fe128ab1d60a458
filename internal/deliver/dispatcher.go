package deliver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/ontimehq/ontime/internal/metrics"
	"github.com/ontimehq/ontime/internal/startstop"
)

var (
	// ErrLaneFull: the destination's queue is full; the task is rescheduled.
	ErrLaneFull = errors.New("destination queue full")
	// ErrCircuitOpen: the destination failed repeatedly and is resting.
	ErrCircuitOpen = errors.New("destination circuit open")
	// ErrStopped: the dispatcher is stopping and takes no more work.
	ErrStopped = errors.New("dispatcher stopped")
)

// Defaults of delivery; the config uses these.
const (
	DefaultConcurrency     = 32 // deliveries in flight per destination
	DefaultQueue           = 100000
	DefaultBreakerFailures = 10
	DefaultBreakerOpenFor  = 10 * time.Second
	DefaultShutdownGrace   = 15 * time.Second
	DefaultTimeout         = 10 * time.Second // per webhook call
)

// DispatcherConfig configures lanes. Zero fields take defaults.
type DispatcherConfig struct {
	PerDestConcurrency int // deliveries in flight per destination; default 32
	PerDestQueue       int // queued deliveries per destination; default 100000
	// Lanes, when set, gives destinations their own settings (a zero
	// field keeps the default): broker addresses, whose publishes are
	// pipelined on one connection, run many in flight; a webhook
	// destination of the config's destinations section has its own
	// concurrency and rate (its batch is the sink's: BatchSink.BatchSize).
	// Asked once per lane, when it is made.
	Lanes func(dest string) LaneConfig
	// TopicGate, when set, gives a topic's cluster-wide limits (nil: none)
	// that every call of a delivery of the topic enters as well as its
	// lane's. Asked per delivery: it must be cheap.
	TopicGate func(topic string) Gate
	Breaker   BreakerConfig
	// ShutdownGrace is how long Stop waits for queued and in-flight
	// deliveries before failing the queued ones with ErrStopped; default 15s.
	ShutdownGrace time.Duration
	// MaxHold caps how long a lane holds its calls when its destination
	// asks to be left alone (a Retry-After: backpressure.go); default
	// DefaultMaxHold (the node gives delivery.retry_max).
	MaxHold time.Duration
	Logger  *slog.Logger
}

// LaneConfig is one destination's settings. Zero fields take defaults.
type LaneConfig struct {
	// Limit is the deliveries in flight at most; default PerDestConcurrency.
	Limit int
	// Rate is the calls per second the lane makes at most (a token bucket
	// of Burst; a batch is one call); 0: no limit.
	Rate  float64
	Burst int // default: a tenth of a second of Rate, at least 1
	// Gate, when set, holds the destination's cluster-wide limits
	// (internal/limit): every call enters it after the lane's own rate.
	Gate Gate
}

// Gate admits calls against limits shared with the other nodes of a
// cluster (internal/limit): a destination's or a topic's rate and
// concurrency as cluster-wide totals.
type Gate interface {
	// Enter waits until one call may start and returns the function that
	// ends it; an error means the call must not be made.
	Enter(ctx context.Context) (leave func(), err error)
}

// BreakerConfig configures each destination's circuit breaker.
type BreakerConfig struct {
	FailureThreshold int           // consecutive failures that open it; default 10
	OpenFor          time.Duration // rest before a probe; default 10s
}

func (c *DispatcherConfig) withDefaults() error {
	if c.PerDestConcurrency == 0 {
		c.PerDestConcurrency = DefaultConcurrency
	}
	if c.PerDestQueue == 0 {
		c.PerDestQueue = DefaultQueue
	}
	if c.Breaker.FailureThreshold == 0 {
		c.Breaker.FailureThreshold = DefaultBreakerFailures
	}
	if c.Breaker.OpenFor == 0 {
		c.Breaker.OpenFor = DefaultBreakerOpenFor
	}
	if c.ShutdownGrace == 0 {
		c.ShutdownGrace = DefaultShutdownGrace
	}
	if c.MaxHold <= 0 {
		c.MaxHold = DefaultMaxHold
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case c.PerDestConcurrency < 1:
		return fmt.Errorf("delivery.concurrency: %d; at least 1", c.PerDestConcurrency)
	case c.PerDestQueue < 1:
		return fmt.Errorf("delivery.queue: %d; at least 1", c.PerDestQueue)
	case c.Breaker.FailureThreshold < 1:
		return fmt.Errorf("delivery.breaker_failures: %d; at least 1", c.Breaker.FailureThreshold)
	case c.Breaker.OpenFor < 0:
		return fmt.Errorf("delivery.breaker_open_for: %s is negative", c.Breaker.OpenFor)
	case c.ShutdownGrace < 0:
		return fmt.Errorf("delivery.shutdown_grace: %s is negative", c.ShutdownGrace)
	}
	return nil
}

// Dispatcher runs deliveries in per-destination lanes. Each lane has its
// own bounded queue, its own workers (at most PerDestConcurrency) and its
// own circuit breaker, so a hanging endpoint fills only its own lane.
//
// Lane workers are started on demand and exit when their lane is empty, so
// an idle destination costs no goroutine; the dispatcher owns them all:
// it takes work between Start and Stop, and Stop waits for every worker.
type Dispatcher struct {
	startstop.Base
	cfg     DispatcherConfig
	mu      sync.Mutex
	lanes   map[string]*lane
	stopped bool           // refusing work: before Start and from Stop on
	wg      sync.WaitGroup // every worker goroutine
	// deliveries is the context deliveries run with (Context): it ends
	// when Stop's grace has passed, so a sink that honours its context
	// cannot hold the node's stop forever.
	deliveries context.Context
	abort      context.CancelFunc
	// limiters outlive their lanes (an idle lane is retired and made
	// again), so a destination's rate holds across its busy spells. Only
	// destinations configured with a rate have one: a bounded set.
	limiters map[string]*rate.Limiter
}

type job struct {
	ctx  context.Context
	sink Sink
	d    Delivery
	done func(error)
}

type lane struct {
	dest    string
	limit   int           // deliveries in flight at most
	batch   int           // deliveries per BatchSink call at most; ≤ 1: Deliver, one at a time
	calls   int           // BatchSink calls under way
	rate    *rate.Limiter // nil: no limit on calls per second
	gate    Gate          // nil: no cluster-wide limit of the destination
	queue   queue         // bounded by PerDestQueue; by priority (queue.go)
	workers int           // goroutines running
	br      breaker
	stats   LaneStats
	// holdUntil: the destination asked to be left alone until then (a
	// Retry-After); the lane makes no call before it. holdWhy is the
	// answer that asked.
	holdUntil time.Time
	holdWhy   string
}

// LaneStats describes one lane.
type LaneStats struct {
	Queued    int
	InFlight  int
	Breaker   string // closed | open | half-open
	Successes int64
	Failures  int64
}

// NewDispatcher builds a dispatcher; lanes are created on first use.
func NewDispatcher(cfg DispatcherConfig) (*Dispatcher, error) {
	if err := cfg.withDefaults(); err != nil {
		return nil, err
	}
	deliveries, abort := context.WithCancel(context.Background())
	abort()
	return &Dispatcher{cfg: cfg, lanes: map[string]*lane{}, stopped: true, deliveries: deliveries, abort: abort,
		limiters: map[string]*rate.Limiter{}}, nil
}

// Context is what deliveries should run with: it lives from Start until
// Stop's grace has passed.
func (p *Dispatcher) Context() context.Context {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.deliveries
}

// Start makes the dispatcher take work.
func (p *Dispatcher) Start(ctx context.Context) error {
	ctx, ok, started, stopped := p.StartInit(ctx)
	if !ok {
		return nil
	}
	p.mu.Lock()
	p.stopped = false
	p.deliveries, p.abort = context.WithCancel(context.WithoutCancel(ctx))
	p.mu.Unlock()
	started()
	go func() {
		defer stopped()
		<-ctx.Done()
		p.drain()
	}()
	return nil
}

// drain refuses new work and waits for queued and in-flight deliveries for
// up to ShutdownGrace; what is still queued then is failed with ErrStopped
// (the task is retried without using an attempt), and in-flight calls are
// cancelled through Context.
func (p *Dispatcher) drain() {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	waited := make(chan struct{})
	go func() { p.wg.Wait(); close(waited) }()
	grace := time.NewTimer(p.cfg.ShutdownGrace)
	defer grace.Stop()
	select {
	case <-waited:
		return
	case <-grace.C:
	}
	p.mu.Lock()
	var dropped []job
	for _, l := range p.lanes {
		dropped = append(dropped, l.queue.take(l.queue.n)...)
	}
	abort := p.abort
	p.mu.Unlock()
	for _, j := range dropped {
		j.done(ErrStopped)
	}
	abort() // in-flight deliveries end with their context
	<-waited
}

// Job is one delivery of DispatchAll and the function told its outcome.
type Job struct {
	Delivery Delivery
	Done     func(error)
}

// DispatchAll queues jobs for one destination under one lock: a burst of
// tasks due at one instant reaches its lane without a lock handover per
// task. It returns at once; each job's Done is called exactly once, from a
// lane goroutine or before DispatchAll returns, with the sink's error or an
// error wrapping ErrLaneFull, ErrCircuitOpen or ErrStopped. Deliveries run
// with ctx.
func (p *Dispatcher) DispatchAll(ctx context.Context, dest string, sink Sink, jobs []Job) {
	var refused []Job
	var why error
	// Built before the lock; queued as one chunk, never copied again.
	chunk := make([]job, len(jobs))
	for i, j := range jobs {
		chunk[i] = job{ctx: ctx, sink: sink, d: j.Delivery, done: j.Done}
	}
	p.mu.Lock()
	l := p.lanes[dest]
	if l == nil && !p.stopped {
		l = p.newLane(dest, sink)
		p.lanes[dest] = l
	}
	switch {
	case p.stopped:
		refused, why = jobs, ErrStopped
	case !l.br.allow(time.Now(), false):
		refused, why = jobs, l.br.refusal(dest, time.Now())
	case l.held(time.Now()) != nil:
		refused, why = jobs, l.held(time.Now())
	default:
		room := max(0, p.cfg.PerDestQueue-l.queue.n)
		if len(chunk) > room {
			refused, why = jobs[room:], fmt.Errorf("%s: %w", dest, ErrLaneFull)
			chunk = chunk[:room]
		}
		l.queue.push(chunk)
		if bs, ok := sink.(BatchSink); ok && l.batch > 1 {
			p.spawnBatchWorkers(l, bs)
			break
		}
		for l.workers < l.limit && l.workers < l.queue.n+l.stats.InFlight {
			l.workers++
			p.wg.Add(1)
			go p.work(l)
		}
	}
	p.mu.Unlock()
	for _, j := range refused {
		j.Done(why)
	}
}

// newLane makes dest's lane with its settings; sink's BatchSize is its
// batch. Called under p.mu.
func (p *Dispatcher) newLane(dest string, sink Sink) *lane {
	l := &lane{dest: dest, br: breaker{cfg: p.cfg.Breaker}, limit: p.cfg.PerDestConcurrency, batch: 1}
	if bs, ok := sink.(BatchSink); ok {
		l.batch = bs.BatchSize(dest)
	}
	if p.cfg.Lanes == nil {
		return l
	}
	c := p.cfg.Lanes(dest)
	l.gate = c.Gate
	if c.Limit > 0 {
		l.limit = c.Limit
	}
	if c.Rate > 0 {
		lim := p.limiters[dest]
		if lim == nil {
			burst := c.Burst
			if burst <= 0 {
				burst = max(1, int(math.Ceil(c.Rate/10)))
			}
			lim = rate.NewLimiter(rate.Limit(c.Rate), burst)
			p.limiters[dest] = lim
		}
		l.rate = lim
	}
	return l
}

// pace waits for the lane's rate to allow one more call; an error (the
// deliveries' context ended: the node is stopping) means the call must
// not be made.
func (l *lane) pace(ctx context.Context) error {
	if l.rate == nil {
		return nil
	}
	if err := l.rate.Wait(ctx); err != nil {
		return fmt.Errorf("%s: waiting for the destination's rate: %w (%w)", l.dest, ErrStopped, err)
	}
	return nil
}

// enter passes a call of jobs (one, or a batch) through the cluster-wide
// limits: the destination's gate once per call, each job's topic gate
// once per job. The returned function ends the call; an error (the
// limit's backend failed, the node is stopping) means it must not be made,
// and the jobs are retried without counting an attempt.
func (p *Dispatcher) enter(ctx context.Context, l *lane, jobs []job) (func(), error) {
	if l.gate == nil && p.cfg.TopicGate == nil {
		return noLeave, nil
	}
	var leaves []func()
	leave := func() {
		for _, f := range leaves {
			f()
		}
	}
	fail := func(err error) (func(), error) {
		leave()
		return nil, fmt.Errorf("%s: waiting for a cluster-wide limit: %w (%w)", l.dest, ErrStopped, err)
	}
	if l.gate != nil {
		f, err := l.gate.Enter(ctx)
		if err != nil {
			return fail(err)
		}
		leaves = append(leaves, f)
	}
	if p.cfg.TopicGate != nil {
		for _, j := range jobs {
			if g := p.cfg.TopicGate(j.d.Topic); g != nil {
				f, err := g.Enter(ctx)
				if err != nil {
					return fail(err)
				}
				leaves = append(leaves, f)
			}
		}
	}
	switch len(leaves) {
	case 0:
		return noLeave, nil
	case 1:
		return leaves[0], nil
	}
	return leave, nil
}

func noLeave() {}

// work runs jobs of one lane until its queue is empty, then exits: an idle
// destination costs no goroutine. One lock per job: the outcome of the
// last job is recorded as the next is taken.
func (p *Dispatcher) work(l *lane) {
	defer p.wg.Done()
	var last job
	var lastErr error
	has := false
	for {
		p.mu.Lock()
		if has {
			l.stats.InFlight--
			if lastErr == nil {
				l.stats.Successes++
				l.br.success()
			} else {
				l.stats.Failures++
				l.hold(time.Now(), lastErr, p.cfg.MaxHold)
				if countsAgainst(lastErr) && l.br.failure(time.Now()) {
					p.cfg.Logger.Warn("destination circuit opened", "dest", l.dest, "err", lastErr)
				}
			}
		}
		var next job
		var refused error
		retire := l.queue.n == 0
		if retire {
			l.workers--
			if l.workers == 0 && l.stats.InFlight == 0 && l.br.state == stateClosed && l.br.failures == 0 && l.held(time.Now()) == nil {
				// Retire a healthy idle lane; one with a failure streak stays,
				// so its breaker keeps counting.
				delete(p.lanes, l.dest)
			}
		} else {
			next = l.queue.pop()
			if refused = l.held(time.Now()); refused != nil {
				// Held: the destination asked to be left alone.
			} else if l.br.allow(time.Now(), true) {
				l.stats.InFlight++
			} else {
				refused = l.br.refusal(l.dest, time.Now())
			}
		}
		p.mu.Unlock()
		if has {
			last.done(lastErr)
			has = false
		}
		if retire {
			return
		}
		if refused != nil {
			next.done(refused)
			continue
		}
		if err := l.pace(next.ctx); err != nil {
			last, lastErr, has = next, err, true
			continue
		}
		leave, err := p.enter(next.ctx, l, []job{next})
		if err != nil {
			last, lastErr, has = next, err, true
			continue
		}
		last, lastErr, has = next, next.sink.Deliver(next.ctx, next.d), true
		leave()
	}
}

// Levels is Stats cut to what the level gauges show (metrics.Gauges).
func (p *Dispatcher) Levels() map[string]metrics.LaneLevel {
	out := map[string]metrics.LaneLevel{}
	for dest, s := range p.Stats() {
		out[dest] = metrics.LaneLevel{Queued: s.Queued, InFlight: s.InFlight, Breaker: s.Breaker}
	}
	return out
}

// Stats returns a snapshot per active destination.
func (p *Dispatcher) Stats() map[string]LaneStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]LaneStats, len(p.lanes))
	for dest, l := range p.lanes {
		s := l.stats
		s.Queued = l.queue.n
		s.Breaker = l.br.state.String()
		out[dest] = s
	}
	return out
}

// fifo is one priority level of a lane's queue: the chunks DispatchAll
// queued, in order, so a burst is queued without copying and taken
// without shifting.
type fifo struct {
	chunks [][]job
	n      int // jobs queued
}

func (q *fifo) push(chunk []job) {
	if len(chunk) > 0 {
		q.chunks = append(q.chunks, chunk)
		q.n += len(chunk)
	}
}

// pop removes the first job; the queue must not be empty.
func (q *fifo) pop() job {
	c := q.chunks[0]
	j := c[0]
	c[0] = job{}
	if len(c) == 1 {
		q.chunks[0] = nil
		q.chunks = q.chunks[1:]
	} else {
		q.chunks[0] = c[1:]
	}
	q.n--
	if q.n == 0 {
		q.chunks = nil
	}
	return j
}

// take removes up to n jobs from the front.
func (q *fifo) take(n int) []job {
	out := make([]job, 0, min(n, q.n))
	for len(out) < n && len(q.chunks) > 0 {
		c := q.chunks[0]
		k := min(n-len(out), len(c))
		out = append(out, c[:k]...)
		clear(c[:k]) // the queue no longer holds what it handed out
		if k == len(c) {
			q.chunks[0] = nil
			q.chunks = q.chunks[1:]
		} else {
			q.chunks[0] = c[k:]
		}
	}
	q.n -= len(out)
	if q.n == 0 {
		q.chunks = nil
	}
	return out
}

type breakerState int

const (
	stateClosed breakerState = iota
	stateOpen
	stateHalfOpen
)

func (s breakerState) String() string {
	return [...]string{"closed", "open", "half-open"}[s]
}

// breaker is a consecutive-failure circuit breaker; guarded by the
// dispatcher's mutex.
type breaker struct {
	cfg       BreakerConfig
	state     breakerState
	failures  int
	openUntil time.Time
	probing   bool
	since     time.Time // the first failure of the current streak
}

// refusal is the error of a delivery the breaker does not let through:
// when a probe may go next (a probe in flight answers within the
// delivery timeout; OpenFor stands for it) and since when it fails.
func (b *breaker) refusal(dest string, now time.Time) error {
	until := b.openUntil
	if b.state == stateHalfOpen || until.Before(now) {
		until = now.Add(b.cfg.OpenFor)
	}
	return &CircuitOpenError{Dest: dest, Until: until, Since: b.since, OpenFor: b.cfg.OpenFor}
}

// allow reports whether a delivery may go now; start marks that it does
// (a half-open breaker lets one probe through at a time).
func (b *breaker) allow(now time.Time, start bool) bool {
	switch b.state {
	case stateOpen:
		if now.Before(b.openUntil) {
			return false
		}
		b.state = stateHalfOpen
		b.probing = false
		fallthrough
	case stateHalfOpen:
		if b.probing {
			return false
		}
		if start {
			b.probing = true
		}
		return true
	}
	return true
}

func (b *breaker) success() {
	b.state, b.failures, b.probing, b.since = stateClosed, 0, false, time.Time{}
}

// failure records a failure; it reports whether the breaker opened.
func (b *breaker) failure(now time.Time) bool {
	if b.failures == 0 {
		b.since = now
	}
	b.failures++
	if b.state == stateHalfOpen || b.failures >= b.cfg.FailureThreshold {
		wasOpen := b.state == stateOpen
		b.state, b.openUntil, b.probing = stateOpen, now.Add(b.cfg.OpenFor), false
		return !wasOpen
	}
	return false
}
