package handoff_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/handoff"
	"github.com/ontimehq/ontime/internal/hot"
	"github.com/ontimehq/ontime/internal/stagetest"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

type failingTier struct{}

func (failingTier) Add(context.Context, ...hot.Entry) error { return errors.New("tier away") }

// A task claimed for this node and handed off to it goes into its hot tier
// under the claim's token, once; nothing is taken while the node has no
// handlers (Active); a handoff the tier refuses is released for the
// scanners, not left to wait out its claim.
func TestReceiverTakesHandoffs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := stagetest.Store(t)
	tier := stagetest.Tier(t)
	planner := hot.NewPlanner(20*time.Millisecond, time.Second)
	claimed := func(key string) store.Ref {
		nt := stagetest.NewTask(t, "h", key, time.Now())
		nt.Claim = &store.Lease{Owner: "b", Until: time.Now().Add(time.Minute), Token: store.NewToken()}
		if _, err := st.Insert(ctx, []store.NewTask{nt}); err != nil {
			t.Fatal(err)
		}
		ref := store.Ref{ID: nt.ID, Topic: nt.Topic, DueAt: nt.DueAt, Token: nt.Claim.Token}
		if err := st.HandOff(ctx, "b", []store.Ref{ref}, time.Now()); err != nil {
			t.Fatal(err)
		}
		return ref
	}
	active := false
	r, err := handoff.New(handoff.Config{Store: st, Tier: tier, Planner: planner, NodeID: "b", Active: func() bool { return active }})
	if err != nil {
		t.Fatal(err)
	}
	ref := claimed("one")
	r.Take(ctx)
	if n, _ := tier.Len(ctx); n != 0 {
		t.Fatalf("a node without handlers took %d handoffs", n)
	}
	active = true
	r.Take(ctx)
	r.Take(ctx) // taken once
	pctx, cancel := context.WithTimeout(ctx, stagetest.Deadline)
	defer cancel()
	got, err := tier.Pop(pctx, 10, 0)
	if err != nil || len(got) != 1 || got[0].ID != ref.ID || got[0].Token != ref.Token || got[0].Topic != "h" {
		t.Fatalf("hot tier: %+v %v; want the handoff under its token", got, err)
	}
	if n, _ := tier.Len(ctx); n != 1 { // the popped one, in flight
		t.Fatalf("tier holds %d entries; want the one handoff", n)
	}

	ref = claimed("two")
	r2, err := handoff.New(handoff.Config{Store: st, Tier: failingTier{}, Planner: planner, NodeID: "b"})
	if err != nil {
		t.Fatal(err)
	}
	r2.Take(ctx)
	if row := stagetest.StatusIs(t, st, ref.ID, task.StatusPending); row.Owner != "" {
		t.Fatalf("a handoff the tier refused: owner %q; want it released", row.Owner)
	}
}
