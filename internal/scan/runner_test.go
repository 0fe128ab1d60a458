package scan_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/hot"
	"github.com/ontimehq/ontime/internal/scan"
	"github.com/ontimehq/ontime/internal/stagetest"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// runner has room for up to room tasks at a time (what it was handed
// and not finished counts against it) and records what it is handed.
type runner struct {
	mu       sync.Mutex
	room     int
	reserved int
	takes    int // TakeRoom calls
	ran      []*task.Task
}

func (r *runner) TakeRoom(max int) (int, time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.takes++
	n := min(max, r.room-len(r.ran)-r.reserved)
	if n <= 0 {
		return 0, time.Time{}
	}
	r.reserved += n
	return n, time.Now().Add(time.Minute)
}

func (r *runner) GiveRoom(n int) {
	r.mu.Lock()
	r.reserved -= n
	r.mu.Unlock()
}

func (r *runner) Run(tasks []*task.Task) {
	r.mu.Lock()
	r.ran = append(r.ran, tasks...)
	r.mu.Unlock()
}

func (r *runner) handed() []*task.Task {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*task.Task(nil), r.ran...)
}

func (r *runner) setRoom(n int) {
	r.mu.Lock()
	r.room = n
	r.mu.Unlock()
}

// TestRunnerTakesOverdue: with a Runner, overdue tasks are claimed
// running, as many as it has room for, and handed to it, never put in the
// tier; those it has no room for wait pending in the store (claimable by
// any node) until it has; tasks due within the window but not yet go to
// the tier claimed, as without a Runner.
func TestRunnerTakesOverdue(t *testing.T) {
	t.Parallel()
	st, tier := stagetest.Store(t), stagetest.Tier(t)
	r := &runner{room: 7}
	sc, err := scan.New(scan.Config{Store: st, Tier: tier, Planner: hot.NewPlanner(20*time.Millisecond, 0),
		NodeID: node, Window: window, LeaseTTL: time.Minute, Runner: r, ClaimBatch: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sc.Stop)
	it := st.Items()[0]
	now := time.Now()
	var overdue []*task.Task
	for i := range 10 {
		overdue = append(overdue, stagetest.Insert(t, st, stagetest.NewTaskIn(t, it, "scan", fmt.Sprintf("od%d", i), now.Add(-time.Duration(10-i)*time.Second)))...)
	}
	soon := stagetest.Insert(t, st, stagetest.NewTaskIn(t, it, "scan", "soon", now.Add(2*time.Second)))[0]
	sc.SetItems([]store.Item{it})
	if err := sc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	stagetest.Eventually(t, "7 overdue tasks handed to the runner", func() bool { return len(r.handed()) == 7 })
	stagetest.Eventually(t, "the task due soon in the tier", func() bool {
		n, err := tier.Len(context.Background())
		return err == nil && n == 1
	})
	time.Sleep(300 * time.Millisecond) // a few more scans: still no room
	handed := r.handed()
	if len(handed) != 7 {
		t.Fatalf("%d handed without room", len(handed))
	}
	for i, tk := range handed {
		if tk.ID != overdue[i].ID {
			t.Fatalf("handed %d: %s, want the overdue tasks in due order", i, tk.ID)
		}
		if tk.Status != task.StatusRunning || tk.Attempts != 1 || tk.Owner != node {
			t.Fatalf("handed as %+v", tk)
		}
		stagetest.StatusIs(t, st, tk.ID, task.StatusRunning)
	}
	for _, tk := range overdue[7:] {
		stagetest.StatusIs(t, st, tk.ID, task.StatusPending)
	}
	stagetest.StatusIs(t, st, soon.ID, task.StatusClaimed)
	// Room again: the rest follow.
	r.setRoom(100)
	stagetest.Eventually(t, "the other overdue tasks handed", func() bool { return len(r.handed()) == 10 })
	if n, err := tier.Len(context.Background()); err != nil || n != 1 {
		t.Fatalf("tier holds %d (%v), want only the task due soon", n, err)
	}
}

func (r *runner) takeCalls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.takes
}

// TestRunnerLooksOnlyWhereOverdue: an item looks for overdue tasks (and
// reserves the Runner's room for them) on its first scan, and afterwards
// only when what its last scan read says some may be there: scans of an
// item whose tasks are all due later take no room (64 items taking it on
// every scan starved the fire stage of a burst). A task that falls
// overdue unannounced (inserted pending by another node, its due time
// already past) is found by the scan after the one that read it.
func TestRunnerLooksOnlyWhereOverdue(t *testing.T) {
	t.Parallel()
	st, tier := stagetest.Store(t), stagetest.Tier(t)
	r := &runner{room: 100}
	sc, err := scan.New(scan.Config{Store: st, Tier: tier, Planner: hot.NewPlanner(20*time.Millisecond, 0),
		NodeID: node, Window: window, LeaseTTL: time.Minute, Runner: r, Idle: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sc.Stop)
	it := st.Items()[0]
	stagetest.Insert(t, st, stagetest.NewTaskIn(t, it, "scan", "later", time.Now().Add(time.Hour)))
	sc.SetItems([]store.Item{it})
	if err := sc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	stagetest.Eventually(t, "the first scan's look", func() bool { return r.takeCalls() >= 1 })
	time.Sleep(300 * time.Millisecond) // about 15 scans at Idle 20ms
	if n := r.takeCalls(); n != 1 {
		t.Fatalf("%d looks for overdue tasks with none due, want the first scan's alone", n)
	}
	od := stagetest.Insert(t, st, stagetest.NewTaskIn(t, it, "scan", "od", time.Now().Add(-time.Second)))[0]
	stagetest.Eventually(t, "the unannounced overdue task handed", func() bool {
		h := r.handed()
		return len(h) == 1 && h[0].ID == od.ID
	})
	stagetest.StatusIs(t, st, od.ID, task.StatusRunning)
}
