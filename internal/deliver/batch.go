package deliver

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// BatchSink is a Sink that delivers several deliveries of one destination
// at once: a broker publisher writes them back to back on its connection
// and then waits for all their acknowledgements. Its lane's workers take up
// to MaxBatch queued deliveries each, so a burst costs a goroutine wake-up
// per batch, not per task; the lane's limit still bounds the deliveries in
// flight.
type BatchSink interface {
	Sink
	// DeliverBatch delivers ds (all of one destination) and returns one
	// error per delivery, in order; nil is success.
	DeliverBatch(ctx context.Context, ds []Delivery) []error
	// BatchSize is the most deliveries to dest one DeliverBatch takes
	// (MaxBatch for a broker; a webhook destination's configured batch);
	// 1 or less: dest's lane delivers one at a time, by Deliver. Asked
	// when the lane is made.
	BatchSize(dest string) int
}

// MaxBatch is the most deliveries a lane worker hands a broker's BatchSink
// at once.
const MaxBatch = 128

// spawnBatchWorkers starts workers for a lane whose sink takes batches:
// enough that the lane's limit can be in flight, no more than its work
// needs: the calls under way and a call per batch queued. A task queued
// while every worker is in a call gets a worker of its own if the limit
// allows, rather than waiting for a call to end. Called under p.mu.
func (p *Dispatcher) spawnBatchWorkers(l *lane, bs BatchSink) {
	most := (l.limit + l.batch - 1) / l.batch
	need := l.calls + (l.queue.n+l.batch-1)/l.batch
	for l.workers < most && l.workers < need {
		l.workers++
		p.wg.Add(1)
		go p.workBatch(l, bs)
	}
}

// workBatch is work for a BatchSink: it takes up to the lane's batch of
// jobs at a time (one while the breaker is half-open: a single probe),
// within the lane's limit, and exits when the lane's queue is empty. It
// takes what is queued and never waits for more: a task is queued when it
// is due, and a batch must not hold it back to fill up.
func (p *Dispatcher) workBatch(l *lane, bs BatchSink) {
	defer p.wg.Done()
	var last []job
	var lastErrs []error
	for {
		p.mu.Lock()
		// The breaker counts calls, not deliveries: a batch is one answer
		// of the destination (a webhook's 503 for 100 tasks is one failure,
		// not a hundred). Any delivery of it done means the destination
		// works.
		var delivered bool
		var against error
		if len(last) > 0 {
			l.calls--
		}
		for i := range last {
			l.stats.InFlight--
			if err := lastErrs[i]; err == nil {
				l.stats.Successes++
				delivered = true
			} else {
				l.stats.Failures++
				l.hold(time.Now(), err, p.cfg.MaxHold)
				if against == nil && countsAgainst(err) {
					against = err
				}
			}
		}
		switch {
		case delivered:
			l.br.success()
		case against != nil && l.br.failure(time.Now()):
			p.cfg.Logger.Warn("destination circuit opened", "dest", l.dest, "err", against)
		}
		var next []job
		var refused error
		retire := l.queue.n == 0 || l.stats.InFlight >= l.limit
		if retire {
			l.workers--
			if l.workers == 0 && l.stats.InFlight == 0 && l.queue.n == 0 && l.br.state == stateClosed && l.br.failures == 0 && l.held(time.Now()) == nil {
				delete(p.lanes, l.dest)
			}
		} else if h := l.held(time.Now()); h != nil {
			// Held: every queued job goes back at once, due when the
			// destination asked.
			next = l.queue.take(l.queue.n)
			refused = h
		} else if !l.br.allow(time.Now(), true) {
			next = l.queue.take(1)
			refused = fmt.Errorf("%s: %w", l.dest, ErrCircuitOpen)
		} else {
			k := min(l.batch, l.queue.n, l.limit-l.stats.InFlight)
			if l.br.state == stateHalfOpen {
				k = 1
			}
			next = l.queue.take(k)
			l.stats.InFlight += len(next)
			l.calls++
		}
		p.mu.Unlock()
		for i, j := range last {
			j.done(lastErrs[i])
		}
		last, lastErrs = nil, nil
		if retire {
			return
		}
		if refused != nil {
			for _, j := range next {
				j.done(refused)
			}
			continue
		}
		if err := l.pace(next[0].ctx); err != nil {
			last, lastErrs = next, make([]error, len(next))
			for i := range lastErrs {
				lastErrs[i] = err
			}
			continue
		}
		leave, err := p.enter(next[0].ctx, l, next)
		if err != nil {
			last, lastErrs = next, make([]error, len(next))
			for i := range lastErrs {
				lastErrs[i] = err
			}
			continue
		}
		ds := make([]Delivery, len(next))
		for i, j := range next {
			ds[i] = j.d
		}
		errs := bs.DeliverBatch(next[0].ctx, ds)
		leave()
		if len(errs) != len(ds) {
			bad := Permanent(fmt.Errorf("sink answered %d outcomes for %d deliveries", len(errs), len(ds)))
			errs = make([]error, len(ds))
			for i := range errs {
				errs[i] = bad
			}
		}
		last, lastErrs = next, errs
	}
}

// countsAgainst reports whether a failed delivery counts towards opening
// its destination's breaker: not a permanent one (the task, not the
// destination, is at fault) nor one never attempted because the node stops.
// Nor one that asked for a wait (a Retry-After): the destination is alive
// and says when to come back, which the lane's hold honours.
func countsAgainst(err error) bool {
	if _, asked := RetryAfterOf(err); asked {
		return false
	}
	return !IsPermanent(err) && !errors.Is(err, ErrStopped)
}
