package deliver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

var (
	// ErrLaneFull: the destination's queue is full; the task is rescheduled.
	ErrLaneFull = errors.New("destination queue full")
	// ErrCircuitOpen: the destination failed repeatedly and is resting.
	ErrCircuitOpen = errors.New("destination circuit open")
	// ErrStopped: the dispatcher is stopping and takes no more work.
	ErrStopped = errors.New("dispatcher stopped")
)

// DispatcherConfig configures lanes. Zero fields take defaults.
type DispatcherConfig struct {
	PerDestConcurrency int // deliveries in flight per destination; default 32
	PerDestQueue       int // queued deliveries per destination; default 100000
	Breaker            BreakerConfig
	Logger             *slog.Logger
}

// BreakerConfig configures each destination's circuit breaker.
type BreakerConfig struct {
	FailureThreshold int           // consecutive failures that open it; default 10
	OpenFor          time.Duration // rest before a probe; default 10s
}

func (c *DispatcherConfig) withDefaults() error {
	if c.PerDestConcurrency == 0 {
		c.PerDestConcurrency = 32
	}
	if c.PerDestQueue == 0 {
		c.PerDestQueue = 100000
	}
	if c.Breaker.FailureThreshold == 0 {
		c.Breaker.FailureThreshold = 10
	}
	if c.Breaker.OpenFor == 0 {
		c.Breaker.OpenFor = 10 * time.Second
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
	}
	return nil
}

// Dispatcher runs deliveries in per-destination lanes. Each lane has its
// own bounded queue, its own workers (at most PerDestConcurrency) and its
// own circuit breaker, so a hanging endpoint fills only its own lane.
type Dispatcher struct {
	cfg     DispatcherConfig
	mu      sync.Mutex
	lanes   map[string]*lane
	stopped bool
	wg      sync.WaitGroup // every worker goroutine
}

type job struct {
	ctx  context.Context
	sink Sink
	d    Delivery
	done func(error)
}

type lane struct {
	dest    string
	queue   []job // FIFO, bounded by PerDestQueue
	workers int   // goroutines running
	br      breaker
	stats   LaneStats
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
	return &Dispatcher{cfg: cfg, lanes: map[string]*lane{}}, nil
}

// Dispatch queues d for dest and returns at once. done is called exactly
// once, from a lane goroutine or before Dispatch returns, with the sink's
// error or an error wrapping ErrLaneFull, ErrCircuitOpen or ErrStopped.
func (p *Dispatcher) Dispatch(ctx context.Context, dest string, sink Sink, d Delivery, done func(error)) {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		done(ErrStopped)
		return
	}
	l := p.lanes[dest]
	if l == nil {
		l = &lane{dest: dest, br: breaker{cfg: p.cfg.Breaker}}
		p.lanes[dest] = l
	}
	if !l.br.allow(time.Now(), false) {
		p.mu.Unlock()
		done(fmt.Errorf("%s: %w", dest, ErrCircuitOpen))
		return
	}
	if len(l.queue) >= p.cfg.PerDestQueue {
		p.mu.Unlock()
		done(fmt.Errorf("%s: %w", dest, ErrLaneFull))
		return
	}
	l.queue = append(l.queue, job{ctx: ctx, sink: sink, d: d, done: done})
	if l.workers < p.cfg.PerDestConcurrency && l.workers < len(l.queue)+l.stats.InFlight {
		l.workers++
		p.wg.Add(1)
		go p.work(l)
	}
	p.mu.Unlock()
}

// work runs jobs of one lane until its queue is empty, then exits: an idle
// destination costs no goroutine.
func (p *Dispatcher) work(l *lane) {
	defer p.wg.Done()
	for {
		p.mu.Lock()
		if len(l.queue) == 0 {
			l.workers--
			if l.workers == 0 && l.stats.InFlight == 0 && l.br.state == stateClosed && l.br.failures == 0 {
				// Retire a healthy idle lane; one with a failure streak stays,
				// so its breaker keeps counting.
				delete(p.lanes, l.dest)
			}
			p.mu.Unlock()
			return
		}
		j := l.queue[0]
		l.queue[0] = job{}
		l.queue = l.queue[1:]
		now := time.Now()
		if !l.br.allow(now, true) {
			p.mu.Unlock()
			j.done(fmt.Errorf("%s: %w", l.dest, ErrCircuitOpen))
			continue
		}
		l.stats.InFlight++
		p.mu.Unlock()

		err := j.sink.Deliver(j.ctx, j.d)

		p.mu.Lock()
		l.stats.InFlight--
		if err == nil {
			l.stats.Successes++
			l.br.success()
		} else {
			l.stats.Failures++
			if !IsPermanent(err) {
				if l.br.failure(time.Now()) {
					p.cfg.Logger.Warn("destination circuit opened", "dest", l.dest, "err", err)
				}
			}
		}
		p.mu.Unlock()
		j.done(err)
	}
}

// Stop refuses new work and waits for queued and in-flight deliveries until
// ctx ends; what is still queued then is failed with ErrStopped.
func (p *Dispatcher) Stop(ctx context.Context) error {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	waited := make(chan struct{})
	go func() { p.wg.Wait(); close(waited) }()
	select {
	case <-waited:
		return nil
	case <-ctx.Done():
	}
	// Give up on queued work; in-flight calls end with their contexts.
	p.mu.Lock()
	var dropped []job
	for _, l := range p.lanes {
		dropped = append(dropped, l.queue...)
		l.queue = nil
	}
	p.mu.Unlock()
	for _, j := range dropped {
		j.done(ErrStopped)
	}
	<-waited
	return nil
}

// Stats returns a snapshot per active destination.
func (p *Dispatcher) Stats() map[string]LaneStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]LaneStats, len(p.lanes))
	for dest, l := range p.lanes {
		s := l.stats
		s.Queued = len(l.queue)
		s.Breaker = l.br.state.String()
		out[dest] = s
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
	b.state, b.failures, b.probing = stateClosed, 0, false
}

// failure records a failure; it reports whether the breaker opened.
func (b *breaker) failure(now time.Time) bool {
	b.failures++
	if b.state == stateHalfOpen || b.failures >= b.cfg.FailureThreshold {
		wasOpen := b.state == stateOpen
		b.state, b.openUntil, b.probing = stateOpen, now.Add(b.cfg.OpenFor), false
		return !wasOpen
	}
	return false
}
