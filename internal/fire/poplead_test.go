package fire_test

import (
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/fire"
	"github.com/ontimehq/ontime/internal/hot"
	"github.com/ontimehq/ontime/internal/stagetest"
	"github.com/ontimehq/ontime/internal/task"
)

// A tier slow to pop lengthens the planner's lead: the tasks leave the
// tier earlier, within the planner's max, and are still sent at their due
// time, never before, each once.
func TestSlowPopsLengthenLeadNeverEarly(t *testing.T) {
	const base, maxLead = 20 * time.Millisecond, 200 * time.Millisecond
	p := hot.NewPlanner(base, maxLead)
	x := setupWith(t, base, func(c *fire.Config) { c.Planner, c.MaxLead = p, maxLead })
	x.planner = p
	p.PopEnd(time.Now(), 70*time.Millisecond) // a Redis round trip's tail
	if l := p.Lead(); l <= base || l > maxLead {
		t.Fatalf("lead %s after a slow Pop, want within (%s, %s]", l, base, maxLead)
	}
	now := time.Now()
	var dues []time.Time
	for i := range 8 {
		dues = append(dues, now.Add(300*time.Millisecond+time.Duration(i)*25*time.Millisecond))
	}
	tasks := x.hold(t, "slowpop", dues...)
	x.start(t)
	stagetest.Eventually(t, "every task sent", func() bool { return len(x.send.sent()) >= len(tasks) })
	x.f.Stop()
	for _, s := range x.send.sent() {
		if s.at.Before(s.task.DueAt) {
			t.Errorf("task %s sent %s before its due time", s.task.ID, s.task.DueAt.Sub(s.at))
		}
	}
	for _, tk := range tasks {
		if n := x.send.times(tk.ID); n != 1 {
			t.Errorf("task %s sent %d times", tk.ID, n)
		}
	}
	if l := p.Lead(); l < base || l > maxLead {
		t.Fatalf("lead %s after the run, want within [%s, %s]", l, base, maxLead)
	}
}

// Entries booked while the lead was short leave the tier sooner once the
// store's Starts have slowed (PopAhead): started well before their due
// time, not at base before it, and still sent at it, never before.
func TestGrownLeadTakesEntriesBookedBeforeAhead(t *testing.T) {
	const base, maxLead = 20 * time.Millisecond, 2 * time.Second
	p := hot.NewPlanner(base, maxLead)
	x := setupWith(t, base, func(c *fire.Config) { c.Planner, c.MaxLead = p, maxLead })
	x.planner = p
	due := time.Now().Add(2 * time.Second)
	tasks := x.hold(t, "grown", due, due.Add(10*time.Millisecond))
	// Booked at base; then a Start takes 500 ms (a store under load): the
	// lead is 1 s now, so they leave the tier about 1 s before due.
	p.StartBegin(time.Now())
	p.StartEnd(time.Now(), 1, 500*time.Millisecond)
	if a := p.PopAhead(); a != time.Second-base {
		t.Fatalf("PopAhead %s, want the lead's growth %s", a, time.Second-base)
	}
	x.start(t)
	stagetest.Eventually(t, "every task sent", func() bool { return len(x.send.sent()) >= len(tasks) })
	for _, s := range x.send.sent() {
		if s.at.Before(s.task.DueAt) {
			t.Errorf("task %s sent %s before its due time", s.task.ID, s.task.DueAt.Sub(s.at))
		}
	}
	// The Start stamps the row when it is called: about 1 s before due,
	// not base (20 ms) before it. Half a second of slack for a loaded
	// machine.
	for _, tk := range tasks {
		got, err := x.st.Get(x.ctx, tk.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != task.StatusRunning {
			t.Fatalf("task %s is %v after it was sent, want running", tk.ID, got.Status)
		}
		if ahead := tk.DueAt.Sub(got.UpdatedAt); ahead < 500*time.Millisecond {
			t.Fatalf("task %s started %s before due, want about 1 s (the grown lead)", tk.ID, ahead)
		}
	}
}
