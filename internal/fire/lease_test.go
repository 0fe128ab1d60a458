package fire_test

import (
	"context"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/fire"
	"github.com/ontimehq/ontime/internal/hot"
	"github.com/ontimehq/ontime/internal/stagetest"
	"github.com/ontimehq/ontime/internal/task"
)

// waitingExpecter is an expecter whose backlog takes wait to work
// through (the completer's Wait, given as Config.Wait).
type waitingExpecter struct {
	expecter
	wait time.Duration
}

func (w *waitingExpecter) Wait(int) time.Duration { return w.wait }

// A started task's running lease covers the wait behind the node's
// backlog of outcomes, on top of the lead and the delivery lease, so a
// burst larger than the store writes within a lease is not redelivered
// while it waits (nor does it need every row rewritten by a heartbeat).
func TestRunningLeaseCoversTheBacklog(t *testing.T) {
	t.Parallel()
	const wait = time.Hour
	x := &fixture{st: stagetest.Store(t), tier: stagetest.Tier(t), planner: hot.NewPlanner(20*time.Millisecond, 0),
		send: &sender{byID: map[string]int{}}, ctx: context.Background()}
	exp := &waitingExpecter{wait: wait}
	f, err := fire.New(fire.Config{Store: x.st, Tier: x.tier, Planner: x.planner, Sender: x.send, Outcomes: exp,
		Wait: exp.Wait, Drain: x.tier.Drain, Workers: 1, MaxLead: 20 * time.Millisecond, DeliveryLease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Stop)
	x.f = f
	before := time.Now()
	tasks := x.hold(t, "lease", before, before)
	x.start(t)
	stagetest.Eventually(t, "every task sent", func() bool { return len(x.send.sent()) >= len(tasks) })
	for _, tk := range tasks {
		got := stagetest.Get(t, x.st, tk.ID)
		if got.Status != task.StatusRunning {
			t.Fatalf("task %s: %s, want running", tk.ID, got.Status)
		}
		if min := before.Add(wait + time.Minute); got.LeaseUntil.Before(min) {
			t.Fatalf("task %s: running lease ends %s, want at least %s (the backlog's wait)", tk.ID, got.LeaseUntil, min)
		}
	}
}
