package submit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/hot"
	"github.com/ontimehq/ontime/internal/stagetest"
	"github.com/ontimehq/ontime/internal/submit"
	"github.com/ontimehq/ontime/internal/task"
)

// downTier refuses every Add, as a Redis tier does while Redis restarts.
type downTier struct{ hot.Tier }

func (downTier) Add(context.Context, ...hot.Entry) error {
	return errors.New("redis: connection refused")
}

// TestTierDownReleasesClaims: a task due within the window is inserted
// claimed; when the tier refuses it, the claim is handed back (pending,
// no owner) and the item's scanner is told, so the task does not wait out
// its lease.
func TestTierDownReleasesClaims(t *testing.T) {
	f := setup(t)
	svc, err := submit.New(submit.Config{Store: f.st, Tier: downTier{f.tier}, Planner: hot.NewPlanner(20*time.Millisecond, 0),
		Notifier: f.n, Topology: stagetest.Topology, Segments: stagetest.Segments, NodeID: node,
		Window: window, LeaseTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	svc.SetReady(true)
	d := time.Second
	res, err := svc.Submit(f.ctx, []task.Spec{{Topic: "down", Key: "k", Delay: &d}})
	if err != nil || len(res) != 1 || res[0].Err != nil {
		t.Fatalf("submit: %v %+v", err, res)
	}
	got := stagetest.Get(t, f.st, res[0].Task.ID)
	if got.Status != task.StatusPending || got.Owner != "" {
		t.Fatalf("after the tier refused it: %+v, want pending with no owner", got)
	}
	if len(f.n.notices()) == 0 {
		t.Fatal("the scanner was not told of the released task")
	}
}
