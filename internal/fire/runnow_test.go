package fire_test

import (
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/fire"
	"github.com/ontimehq/ontime/internal/task"
)

// TestRunNow: a firer admits tasks due at once for insertion running only
// while it runs, is not at its bound and their topic is not paused, with
// a lease that covers the delivery; Run hands them to delivery at once,
// their outcomes expected, and one whose due time is still ahead (a wall
// clock stepped back) no sooner than it.
func TestRunNow(t *testing.T) {
	x := setup(t, 20*time.Millisecond)
	p := &pauser{paused: map[string]bool{"run.paused": true}}
	f, err := fire.New(fire.Config{Store: x.st, Tier: x.tier, Planner: x.planner, Sender: x.send, Outcomes: x.exp,
		MaxOutstanding: 10, MaxLead: 20 * time.Millisecond, DeliveryLease: time.Minute, Paused: p})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.RunNow("run.live"); ok {
		t.Fatal("admitted before Start")
	}
	if err := f.Start(x.ctx); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	lease, ok := f.RunNow("run.live")
	if !ok || lease.Before(before.Add(time.Minute)) {
		t.Fatalf("RunNow = %v, %v: want a lease past the delivery lease", lease, ok)
	}
	if _, ok := f.RunNow("run.paused"); ok {
		t.Fatal("admitted a paused topic's task")
	}
	now := time.Now()
	later := now.Add(60 * time.Millisecond)
	tasks := []*task.Task{
		{ID: "b", Topic: "run.live", DueAt: later, LeaseUntil: lease, Status: task.StatusRunning, Attempts: 1},
		{ID: "a", Topic: "run.live", DueAt: now, LeaseUntil: lease, Status: task.StatusRunning, Attempts: 1},
	}
	f.Run(tasks)
	got := x.send.sent()
	if len(got) != 2 || got[0].task.ID != "a" || got[1].task.ID != "b" {
		t.Fatalf("sent %+v", got)
	}
	if got[1].at.Before(later) {
		t.Fatalf("task due at %v sent early, at %v", later, got[1].at)
	}
	if n := x.exp.n.Load(); n != 2 {
		t.Fatalf("%d outcomes expected, want 2", n)
	}
	f.GiveRoom(1) // the place RunNow's admission held, back once handed to Run
	// An admission holds its place until given back: concurrent submits
	// cannot pass the bound together.
	x.exp.busy.Store(9)
	if _, ok := f.RunNow("run.live"); !ok {
		t.Fatal("refused with one place free")
	}
	if _, ok := f.RunNow("run.live"); ok {
		t.Fatal("admitted past the bound: the first admission's place not held")
	}
	f.GiveRoom(1)
	if _, ok := f.RunNow("run.live"); !ok {
		t.Fatal("refused after the place was given back")
	}
	f.GiveRoom(1)
	// TakeRoom reserves within the bound (10), the reservations count
	// against RunNow and each other until given back.
	x.exp.busy.Store(4)
	n1, lease1 := f.TakeRoom(5)
	n2, _ := f.TakeRoom(5)
	if n1 != 5 || n2 != 1 || lease1.Before(before.Add(time.Minute)) {
		t.Fatalf("TakeRoom: %d then %d (lease %v), want 5 then 1 of the 6 free", n1, n2, lease1)
	}
	if n, _ := f.TakeRoom(5); n != 0 {
		t.Fatalf("TakeRoom past the bound: %d", n)
	}
	if _, ok := f.RunNow("run.live"); ok {
		t.Fatal("RunNow admitted with the room reserved")
	}
	f.GiveRoom(n1 + n2)
	if n, _ := f.TakeRoom(100); n != 6 {
		t.Fatalf("TakeRoom after GiveRoom: %d, want 6", n)
	}
	f.GiveRoom(6)
	// At the bound of started tasks without an outcome: refused.
	x.exp.busy.Store(10)
	if _, ok := f.RunNow("run.live"); ok {
		t.Fatal("admitted at the bound")
	}
	x.exp.busy.Store(0)
	f.Stop()
	if _, ok := f.RunNow("run.live"); ok {
		t.Fatal("admitted after Stop")
	}
	if n, _ := f.TakeRoom(1); n != 0 {
		t.Fatal("room after Stop")
	}
	// Started again: admits again, and the first run's end cannot clear
	// the second's admissions.
	if err := f.Start(x.ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond) // time for a stale clearing to land
	if _, ok := f.RunNow("run.live"); !ok {
		t.Fatal("refused after a restart")
	}
	f.GiveRoom(1)
	f.Stop()
	if _, ok := f.RunNow("run.live"); ok {
		t.Fatal("admitted after the second Stop")
	}
}
