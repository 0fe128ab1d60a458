package engine

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/ontimehq/ontime/internal/deliver"
	"github.com/ontimehq/ontime/internal/hot"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// errNoHandler: a task without target reached a node with no Go handler for
// its topic. It is retried, so a node that has the handler can take it.
var errNoHandler = errors.New("no handler registered for topic")

// fireLoop pops due entries, marks them running in the store (which also
// settles races with cancel and with other claimers: only rows still
// claimed under the entry's token start) and hands them to delivery.
func (e *Engine) fireLoop() {
	defer e.fireWG.Done()
	for {
		entries, err := e.tier.Pop(e.fireCtx, e.cfg.FireBatch)
		if err != nil {
			if e.fireCtx.Err() != nil || errors.Is(err, hot.ErrClosed) {
				return
			}
			e.log.Warn("hot tier pop failed", "err", err)
			sleepCtx(e.fireCtx, 100*time.Millisecond)
			continue
		}
		started, err := e.store.Start(e.runCtx, refsOf(entries), time.Now().Add(e.cfg.DeliveryLease))
		if err != nil {
			e.log.Warn("start failed; entries retried in 1s", "count", len(entries), "err", err)
			if err := e.tier.Nack(e.runCtx, time.Now().Add(time.Second), entries...); err != nil {
				e.log.Warn("hot tier nack failed; tasks wait for lease expiry", "err", err)
			}
			continue
		}
		// The store now tracks them as running: the hot entries are spent,
		// including those whose Start lost (cancelled or claimed elsewhere).
		if err := e.tier.Ack(e.runCtx, entries...); err != nil {
			e.log.Warn("hot tier ack failed", "err", err)
		}
		e.m.Started.Add(float64(len(started)))
		for _, t := range started {
			e.dispatch(t)
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// dispatch hands a started task to delivery at its due time. Tasks are
// popped and started FireLead ahead, so the store write is off the
// lateness path; the wait here is what keeps delivery never early.
func (e *Engine) dispatch(t *task.Task) {
	e.inflight.Add(1)
	if wait := time.Until(t.DueAt); wait > 0 {
		e.waiting.Add(1)
		time.AfterFunc(wait, func() {
			defer e.waiting.Done()
			e.send(t)
		})
		return
	}
	e.send(t)
}

func (e *Engine) send(t *task.Task) {
	if wait := time.Until(t.DueAt); wait > 0 {
		time.Sleep(wait) // a timer may fire a hair early by the wall clock
	}
	e.m.Lateness.Observe(time.Since(t.DueAt).Seconds())
	d := deliver.Delivery{ID: t.ID, Topic: t.Topic, Key: t.Key, Target: t.Target, Payload: t.Payload, DueAt: t.DueAt, Attempt: t.Attempts}
	var sink deliver.Sink
	var dest string
	if t.Target == "" {
		sink, dest = e.handler(t.Topic), "handler:"+t.Topic
		if sink == nil {
			e.finish(t, fmt.Errorf("%w %q on node %s", errNoHandler, t.Topic, e.cfg.NodeID))
			e.inflight.Done()
			return
		}
	} else {
		sink, dest = e.cfg.Webhook, destination(t.Target)
		if sink == nil {
			e.finish(t, deliver.Permanent(errors.New("webhook delivery is not configured on this node")))
			e.inflight.Done()
			return
		}
	}
	e.cfg.Dispatcher.Dispatch(e.runCtx, dest, sink, d, func(err error) {
		defer e.inflight.Done()
		e.finish(t, err)
	})
}

// destination is the lane key of a webhook: scheme and host, so every path
// of one endpoint shares one concurrency limit and one breaker.
func destination(target string) string {
	u, err := url.Parse(target)
	if err != nil {
		return target
	}
	return u.Scheme + "://" + u.Host
}

func (e *Engine) finish(t *task.Task, err error) {
	o := store.Outcome{Ref: store.Ref{ID: t.ID, Token: t.Token, DueAt: t.DueAt, Topic: t.Topic}}
	switch {
	case err == nil:
		o.Done = true
		e.m.Outcomes.WithLabelValues("done").Inc()
	case errors.Is(err, deliver.ErrLaneFull) || errors.Is(err, deliver.ErrCircuitOpen) ||
		errors.Is(err, deliver.ErrStopped):
		// Never reached the target: try again soon, without using an attempt.
		o.NotAttempted = true
		o.RetryAt = time.Now().Add(e.cfg.Retry.Next(1, nil))
		o.Error = errText(err)
		e.m.Outcomes.WithLabelValues("deferred").Inc()
	case deliver.IsPermanent(err) || t.Attempts >= t.MaxAttempts:
		o.Dead = true
		o.Error = errText(err)
		e.m.Outcomes.WithLabelValues("dead").Inc()
	default:
		o.RetryAt = time.Now().Add(e.cfg.Retry.Next(t.Attempts, nil))
		o.Error = errText(err)
		e.m.Outcomes.WithLabelValues("retry").Inc()
	}
	if err != nil {
		e.log.Debug("delivery failed", "id", t.ID, "attempt", t.Attempts, "dead", o.Dead, "err", err)
	}
	e.comp.add(o)
}

// errText bounds what is kept as last_error.
func errText(err error) string {
	s := err.Error()
	if len(s) > 1024 {
		s = s[:1024]
	}
	return s
}
