package fire

import "time"

// SetGapTimer replaces the start gap's timer (before Start): a test holds
// the gap open until it has set up what the next pop must find.
func SetGapTimer(f *Firer, after func(time.Duration) <-chan time.Time) { f.gate.after = after }
