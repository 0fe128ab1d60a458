package hot

import (
	"math"
	"time"
)

// The tier's part of the lead. A task leaves the tier at its fire time
// (due − lead) and must be popped and started by its due time: the lead
// covers the Start (Planner.StartEnd) and the Pop's own delay, which with
// the memory tier is a wake-up and with Redis a round trip, whose tail on
// a loaded machine (tens of milliseconds, now and then a hundred) is
// longer than the 20 ms base. PopEnd measures that delay, so the lead
// follows the tier as it follows the store. Delivery still waits for the
// due time: a longer lead only starts a task earlier, never delivers it
// early; its price is the cancel window (409 once a task has left the
// tier), which leadPopMax bounds.

const (
	// leadPopMax bounds the Pop delay the lead takes in: a Pop is late
	// by a round trip, or by a backlog (a burst, backpressure), which is
	// the calendar's business (FireAt's spreading), not the lead's.
	leadPopMax = 100 * time.Millisecond
	// leadPopHalfLife is longer than a slow Start's: a tier's tail is a
	// property of where it runs (a shared Redis, a loaded host) that
	// comes back, and a lead that forgets it between two spikes is short
	// at the next one. A Start's slowness follows the work, which changes.
	leadPopHalfLife = time.Minute
)

// PopEnd records the tier's delay in a Pop that returned at now: from
// the later of the call and its entries' latest fire time to now, a
// wake-up and a round trip (fire's notePop). The lead takes in the
// largest recent one (at most leadPopMax), halving every leadPopHalfLife.
func (p *Planner) PopEnd(now time.Time, late time.Duration) {
	late = min(max(late, 0), leadPopMax)
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.popAt.IsZero() {
		p.popSlow = time.Duration(float64(p.popSlow) * math.Exp2(-now.Sub(p.popAt).Seconds()/leadPopHalfLife.Seconds()))
	}
	p.popSlow, p.popAt = max(p.popSlow, late), now
}

// Lead is the lead a task that needs no room gets now: base, or more when
// recent Starts or Pops were slow; never more than max.
func (p *Planner) Lead() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.leadLocked()
}
