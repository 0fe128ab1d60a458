package deliver

import (
	"errors"
	"fmt"
	"time"
)

// Outcome wrappers: what a Go handler returns to change what happens to its
// task beyond "delivered" (nil) and "failed, retry" (any other error), as
// River's JobSnooze and JobCancel do.

type snoozeError struct{ d time.Duration }

func (s *snoozeError) Error() string { return fmt.Sprintf("snoozed for %s", s.d) }

// Snooze asks for the task to be delivered again d from now without using
// an attempt (d < 0 counts as 0).
func Snooze(d time.Duration) error { return &snoozeError{d: max(d, 0)} }

// SnoozedFor reports whether err, or an error it wraps, is a Snooze, and
// for how long.
func SnoozedFor(err error) (time.Duration, bool) {
	var s *snoozeError
	if errors.As(err, &s) {
		return s.d, true
	}
	return 0, false
}

type cancelError struct {
	err    error
	reason string // Drop's: said as it is, not as the handler's
}

func (c *cancelError) Error() string {
	if c.reason != "" {
		return c.reason
	}
	if c.err == nil {
		return "cancelled by its handler"
	}
	return "cancelled by its handler: " + c.err.Error()
}
func (c *cancelError) Unwrap() error { return c.err }

// Cancel stops the task for good: no retry, status cancelled, err (may be
// nil) kept as its last error.
func Cancel(err error) error { return &cancelError{err: err} }

// Drop ends a task without delivering it, for a reason of the node's own
// (a schedule's misfire policy passed its fire time over): cancelled as by
// Cancel, with reason as its last error.
func Drop(reason string) error { return &cancelError{reason: reason} }

// IsCancel reports whether err, or an error it wraps, is a Cancel.
func IsCancel(err error) bool {
	var c *cancelError
	return errors.As(err, &c)
}

// CircuitOpenError refuses a delivery because its destination's breaker
// is open (errors.Is(err, ErrCircuitOpen) matches it). It says when a
// probe may next go (Until) and since when the destination has been
// failing (Since), so the task can be deferred for as long as that
// instead of being started again and refused every few seconds.
type CircuitOpenError struct {
	Dest    string
	Until   time.Time
	Since   time.Time
	OpenFor time.Duration // the breaker's rest between probes (breaker_open_for)
}

// Error names the destination and since when it fails, to the second: the
// same text for every task one outage refuses, so their outcomes are
// written together (Until is in the task's new due time).
func (e *CircuitOpenError) Error() string {
	return fmt.Sprintf("%s: %s (failing since %s)", e.Dest, ErrCircuitOpen, e.Since.UTC().Format(time.RFC3339))
}

// Is makes errors.Is(err, ErrCircuitOpen) true.
func (e *CircuitOpenError) Is(target error) bool { return target == ErrCircuitOpen }
