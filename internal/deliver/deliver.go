// Package deliver hands fired tasks to their targets: a Sink per kind of
// target (webhook, Go handler), a Dispatcher with one lane per destination
// so one slow or failing endpoint never delays the others (seed 003's
// head-of-line problem), and the retry policy.
package deliver

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"time"
)

// Delivery is one attempt to deliver one task.
type Delivery struct {
	// Dest is the lane key of Target (Destination), set by the Router so
	// sinks need not parse the target again; "" when not known.
	Dest    string
	ID      string
	Topic   string
	Key     string
	Target  string
	Payload []byte
	DueAt   time.Time
	Attempt int // 1 for the first
	// Timeout, when positive, bounds this attempt (the topic's timeout
	// setting) instead of the sink's own (the destination's, the node's).
	Timeout time.Duration
	// Priority orders the delivery in its lane among those queued
	// (task.Rank); 0 to task.MaxPriority.
	Priority int
	// Traceparent is the W3C trace context the sink sends on (header
	// traceparent) when tracing is on; "" otherwise.
	Traceparent string
	// Result, when not nil, takes the delivery's result: a sink that
	// succeeds with an answer worth keeping (a webhook's JSON body, a Go
	// handler's SetResult) puts it there, and the task keeps it once done.
	// nil: the caller keeps no result (batch calls, tests).
	Result *ResultBox
}

// ResultBox holds one delivery's result: a JSON value of at most the
// node's delivery.max_result_bytes, checked by whoever sets it.
type ResultBox struct {
	Data []byte
}

// DefaultMaxResultBytes is delivery.max_result_bytes' default: the largest
// result a task keeps.
const DefaultMaxResultBytes = 4 << 10

// MaxMaxResultBytes bounds delivery.max_result_bytes: results live in the
// task row, read with it.
const MaxMaxResultBytes = 1 << 20

// Sink delivers to one kind of target. A nil error is success.
type Sink interface {
	Deliver(ctx context.Context, d Delivery) error
}

// HandlerFunc is a Go handler used as a Sink.
type HandlerFunc func(ctx context.Context, d Delivery) error

// Deliver calls f, turning a panic into an error so one bad handler cannot
// take the node down.
func (f HandlerFunc) Deliver(ctx context.Context, d Delivery) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &panicError{value: r}
		}
	}()
	return f(ctx, d)
}

type panicError struct{ value any }

func (p *panicError) Error() string { return "handler panicked: " + errorString(p.value) }

func errorString(v any) string {
	switch x := v.(type) {
	case error:
		return x.Error()
	case string:
		return x
	default:
		return "non-error value"
	}
}

type permanentError struct{ err error }

func (p *permanentError) Error() string { return "permanent: " + p.err.Error() }
func (p *permanentError) Unwrap() error { return p.err }

// Permanent wraps err so the task goes dead at once instead of retrying.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether err, or any error it wraps, is Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

// RetryPolicy spaces retries: Base·2^(attempt−1), capped at Max, spread by
// ±Jitter so tasks that failed together do not retry together.
type RetryPolicy struct {
	Base   time.Duration // default 1s
	Max    time.Duration // default 1h
	Jitter float64       // 0..1, default 0.2
}

// Next returns the delay before the retry that follows attempt (≥ 1).
// rnd returns a value in [0, 1); nil uses math/rand/v2.
func (p RetryPolicy) Next(attempt int, rnd func() float64) time.Duration {
	base, maxd, jit := p.Base, p.Max, p.Jitter
	if base <= 0 {
		base = time.Second
	}
	if maxd <= 0 {
		maxd = time.Hour
	}
	if maxd < base {
		maxd = base
	}
	if jit <= 0 || jit > 1 {
		jit = 0.2
	}
	if rnd == nil {
		rnd = rand.Float64
	}
	attempt = max(attempt, 1)
	d := float64(maxd)
	if attempt-1 < 62 {
		d = math.Min(float64(base)*math.Pow(2, float64(attempt-1)), float64(maxd))
	}
	d *= 1 + jit*(2*rnd()-1)
	return time.Duration(math.Max(d, 0))
}
