package hot

import (
	"testing"
	"time"
)

func TestLeadPlannerQuietTrafficFiresAtBase(t *testing.T) {
	p := NewPlanner(20*time.Millisecond, 5*time.Second)
	now := time.Unix(1_000_000, 0)
	// 1,000 tasks/s for 10 s: far below capacity, every task fires at base.
	for i := range 10000 {
		due := now.Add(time.Second + time.Duration(i)*time.Millisecond)
		if got, want := p.FireAt(now, due), due.Add(-20*time.Millisecond); !got.Equal(want) {
			t.Fatalf("task %d: fires at %s, want %s (due − base)", i, got.Sub(due), want.Sub(due))
		}
	}
}

func TestLeadPlannerSpreadsBurstWithinBounds(t *testing.T) {
	const base, maxLead = 20 * time.Millisecond, 5 * time.Second
	p := NewPlanner(base, maxLead)
	now := time.Unix(1_000_000, 0)
	due := now.Add(30 * time.Second)
	capacity := int(p.Estimate() * leadBucket.Seconds())
	const n = 50000
	perBucket := map[int64]int{}
	prev := due
	for i := range n {
		at := p.FireAt(now, due)
		if at.After(due.Add(-base)) {
			t.Fatalf("task %d fires %s before due, less than base %s", i, due.Sub(at), base)
		}
		if at.Before(due.Add(-maxLead)) {
			t.Fatalf("task %d fires %s before due, more than max %s", i, due.Sub(at), maxLead)
		}
		if at.After(prev) {
			t.Fatalf("task %d fires at %s after an earlier-booked task (%s): bookings must move backwards", i, at, prev)
		}
		prev = at
		perBucket[at.UnixNano()/int64(leadBucket)]++
	}
	for b, c := range perBucket {
		if c > capacity {
			t.Errorf("bucket %d booked %d, capacity %d", b, c, capacity)
		}
	}
	// 50,000 at 20,000/s need 2.5 s of start time before the due instant.
	if span := due.Sub(prev); span < 2400*time.Millisecond || span > 2600*time.Millisecond {
		t.Errorf("earliest fire %s before due; want about 2.5 s (n / rate)", span)
	}
	// A task due just after the burst still gets its own slot at base.
	later := due.Add(leadBucket)
	if got := p.FireAt(now, later); !got.Equal(later.Add(-base)) {
		t.Errorf("task after the burst fires %s before due, want %s", later.Sub(got), base)
	}
}

func TestLeadPlannerNeverBeforeNowOrBeyondMax(t *testing.T) {
	p := NewPlanner(20*time.Millisecond, time.Second)
	now := time.Unix(1_000_000, 0)
	due := now.Add(300 * time.Millisecond)
	for i := range 100000 { // far more than fits in 300 ms
		at := p.FireAt(now, due)
		if at.Before(now.Truncate(leadBucket)) {
			t.Fatalf("task %d fires at %s, before now", i, now.Sub(at))
		}
	}
	// Overdue tasks are not planned at all.
	if got, due := p.FireAt(now, now.Add(-time.Second)), now.Add(-time.Second); !got.Equal(due.Add(-20 * time.Millisecond)) {
		t.Errorf("overdue task fires at %s, want due − base", got)
	}
}

func TestLeadPlannerOffWhenMaxNotAboveBase(t *testing.T) {
	p := NewPlanner(20*time.Millisecond, 20*time.Millisecond)
	now := time.Unix(1_000_000, 0)
	due := now.Add(10 * time.Second)
	for range 100000 {
		if got := p.FireAt(now, due); !got.Equal(due.Add(-20 * time.Millisecond)) {
			t.Fatalf("spreading is off but a task fires %s ahead", due.Sub(got))
		}
	}
}

func TestLeadPlannerLearnsStoreRate(t *testing.T) {
	p := NewPlanner(20*time.Millisecond, 5*time.Second)
	t0 := time.Unix(1_000_000, 0)
	// Two overlapping Starts of 2,048 each over 100 ms of busy time: the
	// store did 40,960 tasks/s, not 2 × 2,048 / 100 ms each.
	for i := range 20 {
		at := t0.Add(time.Duration(i) * 100 * time.Millisecond)
		p.StartBegin(at)
		p.StartBegin(at.Add(10 * time.Millisecond))
		p.StartEnd(at.Add(90*time.Millisecond), 2048, 80*time.Millisecond)
		p.StartEnd(at.Add(100*time.Millisecond), 2048, 90*time.Millisecond)
	}
	if r := p.Estimate(); r < 38000 || r > 41500 {
		t.Errorf("rate estimate %.0f/s, want about 40,960/s", r)
	}
	// Idle gaps between Starts do not count as store time.
	p2 := NewPlanner(20*time.Millisecond, 5*time.Second)
	for i := range 20 {
		at := t0.Add(time.Duration(i) * time.Second)
		p2.StartBegin(at)
		p2.StartEnd(at.Add(200*time.Millisecond), 2048, 200*time.Millisecond)
	}
	if r := p2.Estimate(); r < 9500 || r > 10500 {
		t.Errorf("rate estimate with idle gaps %.0f/s, want about 10,240/s", r)
	}
}

func TestLeadPlannerLeadFollowsSlowStarts(t *testing.T) {
	p := NewPlanner(20*time.Millisecond, 5*time.Second)
	t0 := time.Unix(1_000_000, 0)
	due := t0.Add(time.Minute)
	if got := due.Sub(p.FireAt(t0, due)); got != 20*time.Millisecond {
		t.Fatalf("before any Start: lead %s, want base 20ms", got)
	}
	// A store whose Starts take up to 30 ms (fsync on commit): lead 60 ms.
	p.StartBegin(t0)
	p.StartEnd(t0.Add(30*time.Millisecond), 10, 30*time.Millisecond)
	due = due.Add(time.Second)
	if got := due.Sub(p.FireAt(t0, due)); got != 60*time.Millisecond {
		t.Fatalf("after a 30 ms Start: lead %s, want 60ms", got)
	}
	// The memory of a slow Start halves every 10 s.
	later := t0.Add(20 * time.Second)
	p.StartBegin(later)
	p.StartEnd(later, 10, time.Millisecond)
	due = due.Add(time.Second)
	if got := due.Sub(p.FireAt(later, due)); got != 20*time.Millisecond {
		t.Fatalf("20 s after the slow Start: lead %s, want back at about 20ms (base)", got)
	}
}

// A node that has not finished a Start yet books as if one took the
// assumed time; the first measured Start replaces the assumption, fast or
// slow, and a planner told nothing books at base.
func TestLeadPlannerAssumesAStartUntilOneEnds(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	due := t0.Add(time.Minute)
	p := NewPlanner(20*time.Millisecond, 5*time.Second).AssumeStart(100 * time.Millisecond)
	if got := due.Sub(p.FireAt(t0, due)); got != 200*time.Millisecond {
		t.Fatalf("before any Start: lead %s, want 200ms (twice the assumed Start)", got)
	}
	p.StartBegin(t0)
	p.StartEnd(t0.Add(2*time.Millisecond), 10, 2*time.Millisecond)
	due = due.Add(time.Second)
	if got := due.Sub(p.FireAt(t0, due)); got != 20*time.Millisecond {
		t.Fatalf("after a 2 ms Start: lead %s, want base 20ms", got)
	}

	slow := NewPlanner(20*time.Millisecond, 5*time.Second).AssumeStart(100 * time.Millisecond)
	slow.StartBegin(t0)
	slow.StartEnd(t0.Add(300*time.Millisecond), 10, 300*time.Millisecond)
	if got := slow.Lead(); got != 600*time.Millisecond {
		t.Fatalf("after a 300 ms first Start: lead %s, want 600ms", got)
	}

	capped := NewPlanner(20*time.Millisecond, 150*time.Millisecond).AssumeStart(100 * time.Millisecond)
	if got := capped.Lead(); got != 150*time.Millisecond {
		t.Fatalf("assumed Start beyond max: lead %s, want max 150ms", got)
	}
}

// PopAhead is the lead's growth over base: 0 while Starts are fast, the
// growth once one was slow, 0 for a planner that does not plan.
func TestLeadPlannerPopAhead(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	p := NewPlanner(20*time.Millisecond, 5*time.Second)
	if a := p.PopAhead(); a != 0 {
		t.Fatalf("fresh planner: PopAhead %s, want 0", a)
	}
	p.StartBegin(t0)
	p.StartEnd(t0, 10, 70*time.Millisecond)
	if a := p.PopAhead(); a != 120*time.Millisecond {
		t.Fatalf("after a 70 ms Start: PopAhead %s, want 120ms (lead 140ms less base)", a)
	}
	off := NewPlanner(20*time.Millisecond, 0)
	off.StartBegin(t0)
	off.StartEnd(t0, 10, 70*time.Millisecond)
	if a := off.PopAhead(); a != 0 {
		t.Fatalf("planner off: PopAhead %s, want 0", a)
	}
}
