package deliver

import (
	"errors"
	"fmt"
	"time"
)

// Back-pressure: a destination that says when it will take the next call
// — a webhook answering 429 or 503 with Retry-After, a broker client
// reporting that the broker refuses publishes for now — is called again
// then, not by the task's backoff, and its lane makes no call to it
// meanwhile: the tasks the lane would have sent go back to the store,
// due when the destination asked, without using an attempt.

// RetryAfterer is an error of a delivery attempt that says how long the
// destination asked to be left alone (webhook.StatusError with a
// Retry-After, RetryAfter's wrapper).
type RetryAfterer interface {
	error
	RetryAfter() time.Duration
}

// RetryAfterOf reports whether err, or an error it wraps, carries a wait
// the destination asked for, and how long.
func RetryAfterOf(err error) (time.Duration, bool) {
	var ra RetryAfterer
	if err != nil && errors.As(err, &ra) {
		if d := ra.RetryAfter(); d > 0 {
			return d, true
		}
	}
	return 0, false
}

type retryAfterError struct {
	err error
	d   time.Duration
}

func (e *retryAfterError) Error() string {
	return fmt.Sprintf("%v (destination asks to wait %s)", e.err, e.d)
}
func (e *retryAfterError) Unwrap() error             { return e.err }
func (e *retryAfterError) RetryAfter() time.Duration { return e.d }

// RetryAfter wraps a failed attempt's err with the wait the destination
// asked for (a broker's back-pressure): the task is retried after d (at
// most delivery.retry_max), and the destination's lane holds its calls as
// long.
func RetryAfter(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return &retryAfterError{err: err, d: max(d, 0)}
}

// ErrThrottled: the destination asked to be left alone until a time that
// has not come (ThrottledError).
var ErrThrottled = errors.New("destination asked to wait")

// ThrottledError refuses a delivery while its destination's lane holds
// its calls: the task goes back, due at Until, without using an attempt.
type ThrottledError struct {
	Dest  string
	Until time.Time
	Why   string // the answer that asked for the wait
}

func (e *ThrottledError) Error() string {
	return fmt.Sprintf("%s: %s until %s (%s)", e.Dest, ErrThrottled, e.Until.UTC().Format(time.RFC3339), e.Why)
}

// Is makes errors.Is(err, ErrThrottled) true.
func (e *ThrottledError) Is(target error) bool { return target == ErrThrottled }

// DefaultMaxHold caps how long a lane holds its calls for one answer
// (DispatcherConfig.MaxHold).
const DefaultMaxHold = time.Hour

// hold makes the lane hold its calls for the wait err asks for, when it
// asks for one; called under p.mu.
func (l *lane) hold(now time.Time, err error, maxHold time.Duration) {
	d, ok := RetryAfterOf(err)
	if !ok {
		return
	}
	if until := now.Add(min(d, maxHold)); until.After(l.holdUntil) {
		l.holdUntil, l.holdWhy = until, err.Error()
	}
}

// held is the refusal of a delivery while the lane holds its calls, nil
// when it does not; called under p.mu.
func (l *lane) held(now time.Time) error {
	if !now.Before(l.holdUntil) {
		return nil
	}
	return &ThrottledError{Dest: l.dest, Until: l.holdUntil, Why: l.holdWhy}
}
