package hot

import (
	"testing"
	"time"
)

// The lead takes in the tier's Pop delay as it does slow Starts: twice
// the delay, the delay bounded by leadPopMax, the lead by max, never
// below base, and it decays back to base.
func TestLeadPlannerLeadFollowsSlowPops(t *testing.T) {
	p := NewPlanner(20*time.Millisecond, 5*time.Second)
	t0 := time.Unix(1_000_000, 0)
	lead := func(now time.Time) time.Duration {
		due := now.Add(time.Minute)
		got := due.Sub(p.FireAt(now, due))
		if l := p.Lead(); l != got {
			t.Fatalf("Lead() %s, FireAt's lead %s", l, got)
		}
		return got
	}
	if got := lead(t0); got != 20*time.Millisecond {
		t.Fatalf("before any Pop: lead %s, want base 20ms", got)
	}
	p.PopEnd(t0, -time.Second) // a clock step: nothing
	p.PopEnd(t0, 3*time.Millisecond)
	if got := lead(t0); got != 20*time.Millisecond {
		t.Fatalf("after a 3 ms Pop: lead %s, want base 20ms", got)
	}
	// A Redis round trip of 40 ms on a loaded machine: lead 80 ms.
	p.PopEnd(t0, 40*time.Millisecond)
	if got := lead(t0); got != 80*time.Millisecond {
		t.Fatalf("after a 40 ms Pop: lead %s, want 80ms", got)
	}
	// A Start of 10 ms beside it: the lead covers both.
	p.StartBegin(t0)
	p.StartEnd(t0, 10, 10*time.Millisecond)
	if got := lead(t0); got != 100*time.Millisecond {
		t.Fatalf("40 ms Pop and 10 ms Start: lead %s, want 100ms", got)
	}
	// A delay of minutes (a backlog) counts as leadPopMax.
	p.PopEnd(t0, 3*time.Minute)
	if got, want := lead(t0), 2*(leadPopMax+10*time.Millisecond); got != want {
		t.Fatalf("after a 3 min Pop: lead %s, want %s", got, want)
	}
	// Halving every leadPopHalfLife: ten of them later it is back at base.
	later := t0.Add(10 * leadPopHalfLife)
	p.StartBegin(later)
	p.StartEnd(later, 10, time.Millisecond)
	p.PopEnd(later, time.Millisecond)
	if got := lead(later); got != 20*time.Millisecond {
		t.Fatalf("%s after the slow Pop: lead %s, want base 20ms", later.Sub(t0), got)
	}
}

// The lead never passes max, however slow the tier.
func TestLeadPlannerPopLeadWithinMax(t *testing.T) {
	p := NewPlanner(20*time.Millisecond, 50*time.Millisecond)
	now := time.Unix(1_000_000, 0)
	for range 100 {
		p.PopEnd(now, time.Hour)
	}
	due := now.Add(time.Minute)
	if got := due.Sub(p.FireAt(now, due)); got != 50*time.Millisecond || p.Lead() != got {
		t.Fatalf("lead %s (Lead %s), want max 50ms", got, p.Lead())
	}
}
