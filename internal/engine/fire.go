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
		// The lease covers the wait until the due time (at most MaxFireLead)
		// and the delivery.
		t0 := time.Now()
		e.lead.startBegin(t0)
		started, err := e.store.Start(e.runCtx, refsOf(entries), t0.Add(max(e.cfg.MaxFireLead, e.cfg.FireLead)+e.cfg.DeliveryLease))
		e.lead.startEnd(time.Now(), len(entries), time.Since(t0))
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
		if len(started) > 0 {
			e.outstanding.Add(int64(len(started)))
			e.inflight.Add(len(started))
			e.waiting.Add(1)
			go e.release(started)
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

// release hands started tasks (sorted by due time) to delivery, each at
// its due time. Tasks are popped and started ahead (FireLead, more in a
// burst: lead.go), so the store write is off the lateness path; the wait
// here is what keeps delivery never early. One goroutine and one timer per
// Start batch, not per task: 50,000 timers due at one instant cost the Go
// runtime 0.3 s before the first of them ran. Tasks due together go to
// their lanes in one DispatchAll per destination.
func (e *Engine) release(tasks []*task.Task) {
	defer e.waiting.Done()
	for len(tasks) > 0 {
		if wait := time.Until(tasks[0].DueAt); wait > 0 {
			time.Sleep(wait)
		}
		now := time.Now()
		n := 1
		for n < len(tasks) && !tasks[n].DueAt.After(now) {
			n++
		}
		e.send(tasks[:n])
		tasks = tasks[n:]
	}
}

// send delivers tasks that are due, grouped by destination; e.inflight
// counts each until its outcome is queued.
func (e *Engine) send(tasks []*task.Task) {
	type lane struct {
		sink deliver.Sink
		jobs []deliver.Job
	}
	var lanes map[string]*lane
	var order []string
	for _, t := range tasks {
		e.m.Lateness.Observe(time.Since(t.DueAt).Seconds())
		var sink deliver.Sink
		var dest string
		if t.Target == "" {
			sink, dest = e.handler(t.Topic), "handler:"+t.Topic
			if sink == nil {
				e.finish(t, fmt.Errorf("%w %q on node %s", errNoHandler, t.Topic, e.cfg.NodeID))
				e.inflight.Done()
				continue
			}
		} else {
			sink, dest = e.cfg.Webhook, destination(t.Target)
			if sink == nil {
				e.finish(t, deliver.Permanent(errors.New("webhook delivery is not configured on this node")))
				e.inflight.Done()
				continue
			}
		}
		if lanes == nil {
			lanes = map[string]*lane{}
		}
		l := lanes[dest]
		if l == nil {
			l = &lane{sink: sink}
			lanes[dest] = l
			order = append(order, dest)
		}
		l.jobs = append(l.jobs, deliver.Job{
			Delivery: deliver.Delivery{ID: t.ID, Topic: t.Topic, Key: t.Key, Target: t.Target, Payload: t.Payload, DueAt: t.DueAt, Attempt: t.Attempts},
			Done: func(err error) {
				defer e.inflight.Done()
				e.finish(t, err)
			},
		})
	}
	for _, dest := range order {
		e.cfg.Dispatcher.DispatchAll(e.runCtx, dest, lanes[dest].sink, lanes[dest].jobs)
	}
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
	defer e.outstanding.Add(-1)
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
