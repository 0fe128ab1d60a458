package complete

import "time"

// SetGapTimer replaces the flush gap's timer (before Start): a test holds
// the gap open until it has queued what the next write must hold.
func SetGapTimer(c *Completer, after func(time.Duration) <-chan time.Time) { c.after = after }
