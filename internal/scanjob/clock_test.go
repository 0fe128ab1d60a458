package scanjob

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// FakeClock is a Clock that moves only when a test moves it (Advance):
// the timers, tickers and AfterFuncs whose deadline it passes fire then,
// in deadline order. An AfterFunc's f runs in the goroutine that moved
// the clock (or armed it, when already due), once the clock's lock is
// released: when Advance returns, what fell due has run. Exported for
// this package's external tests.
type FakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	c      *FakeClock
	ch     chan time.Time // nil for an AfterFunc
	f      func()
	period time.Duration // tickers
	at     time.Time
	armed  bool
}

// NewFakeClock starts a clock at t.
func NewFakeClock(t time.Time) *FakeClock { return &FakeClock{now: t} }

// Now implements Clock.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer implements Clock.
func (c *FakeClock) NewTimer(d time.Duration) Timer {
	return c.add(&fakeTimer{ch: make(chan time.Time, 1)}, d)
}

// NewTicker implements Clock.
func (c *FakeClock) NewTicker(d time.Duration) Timer {
	if d <= 0 {
		panic("FakeClock: non-positive ticker period")
	}
	return c.add(&fakeTimer{ch: make(chan time.Time, 1), period: d}, d)
}

// AfterFunc implements Clock.
func (c *FakeClock) AfterFunc(d time.Duration, f func()) { c.add(&fakeTimer{f: f}, d) }

func (c *FakeClock) add(t *fakeTimer, d time.Duration) *fakeTimer {
	c.mu.Lock()
	t.c, t.at, t.armed = c, c.now.Add(d), true
	c.timers = append(c.timers, t)
	fs := c.fireLocked()
	c.mu.Unlock()
	run(fs)
	return t
}

func run(fs []func()) {
	for _, f := range fs {
		f()
	}
}

// Advance moves the clock by d and fires what fell due.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	fs := c.fireLocked()
	c.mu.Unlock()
	run(fs)
}

// AdvanceTo moves the clock to t (not backwards) and fires what fell due.
func (c *FakeClock) AdvanceTo(t time.Time) {
	c.mu.Lock()
	if t.After(c.now) {
		c.now = t
	}
	fs := c.fireLocked()
	c.mu.Unlock()
	run(fs)
}

// fireLocked fires every armed timer due at now, earliest first, and
// returns the AfterFuncs' functions to run. A ticker fires once however
// many periods passed, as a ticker nobody read drops ticks.
func (c *FakeClock) fireLocked() (fs []func()) {
	for {
		var due *fakeTimer
		for _, t := range c.timers {
			if t.armed && !t.at.After(c.now) && (due == nil || t.at.Before(due.at)) {
				due = t
			}
		}
		if due == nil {
			return fs
		}
		switch {
		case due.f != nil:
			due.armed = false
			c.timers = slices.DeleteFunc(c.timers, func(t *fakeTimer) bool { return t == due })
			fs = append(fs, due.f)
		case due.period > 0:
			for !due.at.After(c.now) {
				due.at = due.at.Add(due.period)
			}
			send(due.ch, c.now)
		default:
			due.armed = false
			send(due.ch, c.now)
		}
	}
}

func send(ch chan time.Time, now time.Time) {
	select {
	case ch <- now:
	default:
	}
}

func drain(ch chan time.Time) {
	select {
	case <-ch:
	default:
	}
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

// Reset arms the timer d from now; like time.Timer since Go 1.23, a value
// sent before and not received is dropped.
func (t *fakeTimer) Reset(d time.Duration) {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	drain(t.ch)
	if t.period > 0 {
		t.period = d
	}
	t.at, t.armed = t.c.now.Add(d), true
	// Only AfterFuncs return functions, and they are never Reset.
	_ = t.c.fireLocked()
}

func (t *fakeTimer) Stop() {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	t.armed = false
	drain(t.ch)
}

// hasTimer reports whether a one-shot timer is armed for at: a loop that
// armed it is waiting, so moving the clock to at fires it (moving it
// before the loop computed its wait would arm the timer from the new time).
func (c *FakeClock) hasTimer(at time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.timers {
		if t.armed && t.ch != nil && t.period == 0 && t.at.Equal(at) {
			return true
		}
	}
	return false
}

// hasTicker reports whether a ticker is armed.
func (c *FakeClock) hasTicker() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.timers {
		if t.armed && t.period > 0 {
			return true
		}
	}
	return false
}

// WaitTimer waits until a one-shot timer is armed for at.
func (c *FakeClock) WaitTimer(t testing.TB, at time.Time) {
	t.Helper()
	WaitUntil(t, "a timer armed for "+at.Format(time.RFC3339Nano), func() bool { return c.hasTimer(at) })
}

// WaitTicker waits until a ticker is armed.
func (c *FakeClock) WaitTicker(t testing.TB) {
	t.Helper()
	WaitUntil(t, "a ticker", c.hasTicker)
}

// WaitUntil polls cond until it holds; what names it when it never does.
// It waits for a state, and asserts nothing about how long that took.
func WaitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestFakeClock pins the fake's semantics the service relies on: a timer
// fires once when its deadline passes, Reset drops a value not received,
// a ticker late by several periods sends one tick, AfterFunc runs f.
func TestFakeClock(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	c := NewFakeClock(t0)
	tm := c.NewTimer(time.Second)
	c.Advance(999 * time.Millisecond)
	select {
	case <-tm.C():
		t.Fatal("the timer fired before its deadline")
	default:
	}
	c.Advance(time.Millisecond)
	if got := <-tm.C(); !got.Equal(t0.Add(time.Second)) {
		t.Fatalf("timer sent %v", got)
	}
	c.Advance(time.Hour)
	select {
	case <-tm.C():
		t.Fatal("a one-shot timer fired twice")
	default:
	}
	tm.Reset(time.Second)
	c.Advance(time.Second) // fires, not received
	tm.Reset(time.Minute)  // drops it
	select {
	case <-tm.C():
		t.Fatal("Reset kept a stale value")
	default:
	}
	tm.Reset(0)
	<-tm.C() // a zero wait fires at once

	tk := c.NewTicker(time.Second)
	c.Advance(5 * time.Second)
	<-tk.C()
	select {
	case <-tk.C():
		t.Fatal("a late ticker sent more than one tick")
	default:
	}
	c.Advance(time.Second)
	<-tk.C()
	tk.Stop()
	c.Advance(time.Second)
	select {
	case <-tk.C():
		t.Fatal("a stopped ticker ticked")
	default:
	}

	ran := 0
	c.AfterFunc(time.Second, func() { ran++ })
	c.Advance(time.Second - time.Nanosecond)
	if ran != 0 {
		t.Fatal("AfterFunc ran early")
	}
	c.Advance(time.Nanosecond)
	if ran != 1 {
		t.Fatal("AfterFunc had not run when Advance returned")
	}
	c.AfterFunc(0, func() { ran++ })
	if ran != 2 {
		t.Fatal("a due AfterFunc did not run at once")
	}
}

// TestNewDefaultsToTheRealClock: without Config.Clock the service reads
// the time package's clock.
func TestNewDefaultsToTheRealClock(t *testing.T) {
	t.Parallel()
	s, err := New(Config{State: newMemState()})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.cfg.Clock.(realClock); !ok {
		t.Fatalf("default clock %T", s.cfg.Clock)
	}
	if _, err := New(Config{}); err == nil {
		t.Fatal("New accepted a Config without a State")
	}
}
