package scanjob

import "time"

// Clock is the service's time: cron fire times, misfire detection, the
// hand-over grace of a moved run, next_column push-backs, retention and
// item lag all read it, so tests drive them by moving a clock of their own
// instead of sleeping. Config.Clock defaults to the real one.
type Clock interface {
	Now() time.Time
	// NewTimer fires once on C after d; Reset arms it again.
	NewTimer(d time.Duration) Timer
	// NewTicker fires on C every d, dropping ticks nobody read.
	NewTicker(d time.Duration) Timer
	// AfterFunc calls f in its own goroutine after d.
	AfterFunc(d time.Duration, f func())
}

// Timer is a timer or a ticker of a Clock, with time.Timer's semantics
// since Go 1.23: after Reset or Stop no stale value is received.
type Timer interface {
	C() <-chan time.Time
	Reset(d time.Duration)
	Stop()
}

// realClock is the time package's.
type realClock struct{}

func (realClock) Now() time.Time                      { return time.Now() }
func (realClock) NewTimer(d time.Duration) Timer      { return realTimer{time.NewTimer(d)} }
func (realClock) NewTicker(d time.Duration) Timer     { return realTicker{time.NewTicker(d)} }
func (realClock) AfterFunc(d time.Duration, f func()) { time.AfterFunc(d, f) }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time   { return r.t.C }
func (r realTimer) Reset(d time.Duration) { r.t.Reset(d) }
func (r realTimer) Stop()                 { r.t.Stop() }

type realTicker struct{ t *time.Ticker }

func (r realTicker) C() <-chan time.Time   { return r.t.C }
func (r realTicker) Reset(d time.Duration) { r.t.Reset(d) }
func (r realTicker) Stop()                 { r.t.Stop() }
