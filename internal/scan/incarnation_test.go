package scan_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/hot"
	"github.com/ontimehq/ontime/internal/scan"
	"github.com/ontimehq/ontime/internal/stagetest"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// TestRestartTakenByIncarnation (issue 25 item 10): a node killed and
// restarted under the same node_id within cluster.lease_ttl never leaves
// the live list. Its new incarnation (the coordinator shows it at once) is
// how the other nodes know its previous process's claims are held by
// nobody: they end them within a poll of Live rather than when their
// leases run out, and keep the claims the new process made. No clock is
// compared: here the coordinator knows no start time at all (as etcd's
// registrations did not), which left the old claims waiting out their
// hour-long leases before incarnations.
func TestRestartTakenByIncarnation(t *testing.T) {
	f := setup(t, 0)
	it := f.st.Items()[0]
	due := time.Now().Add(2 * time.Second)
	before, after := store.NewIncarnation(), store.NewIncarnation()
	var mu sync.Mutex
	live := []scan.Node{{ID: "restarting", Incarnation: before.ID()}}
	sc, err := scan.New(scan.Config{Store: f.st, Tier: f.tier, Planner: hot.NewPlanner(20*time.Millisecond, 0),
		NodeID: node, Incarnation: store.NewIncarnation(), Window: window, LeaseTTL: time.Minute,
		Live: func(context.Context) ([]scan.Node, error) {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(live), nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sc.Stop)
	sc.SetItems([]store.Item{it})
	if err := sc.Start(f.ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // claimed after the item started here
	oldTok := before.Token()
	oldProc := stagetest.Insert(t, f.st, stagetest.Claimed(stagetest.NewTaskIn(t, it, "scan", "of-old-process", due), "restarting", oldTok))[0]
	time.Sleep(1500 * time.Millisecond) // a poll or more of Live that changes nothing
	if tk := stagetest.Get(t, f.st, oldProc.ID); tk.Token != oldTok {
		t.Fatalf("a live node's claim was ended: %+v", tk)
	}
	// The node restarts: its new process claims a task under its own
	// token, and another a task handed to it (an unattributed token).
	newTok := after.Token()
	newProc := stagetest.Insert(t, f.st, stagetest.Claimed(stagetest.NewTaskIn(t, it, "scan", "of-new-process", due), "restarting", newTok))[0]
	handTok := store.NewToken()
	handed := stagetest.Insert(t, f.st, stagetest.Claimed(stagetest.NewTaskIn(t, it, "scan", "handed", due), "restarting", handTok))[0]
	mu.Lock()
	live = []scan.Node{{ID: "restarting", Incarnation: after.ID()}}
	mu.Unlock()
	stagetest.Eventually(t, "the previous process's claim is taken here", func() bool {
		tk := stagetest.Get(t, f.st, oldProc.ID)
		return tk.Status == task.StatusClaimed && tk.Owner == node
	})
	if tk := stagetest.Get(t, f.st, newProc.ID); tk.Owner != "restarting" || tk.Token != newTok {
		t.Fatalf("the restarted node's new claim was ended: %+v", tk)
	}
	if tk := stagetest.Get(t, f.st, handed.ID); tk.Owner != "restarting" || tk.Token != handTok {
		t.Fatalf("a claim handed to the restarted node was ended: %+v", tk)
	}
}

// TestOwnPreviousIncarnation: a restarted node takes back at once what its
// previous process claimed, by the incarnation its tokens carry, even when
// those rows were written after the new process started by the clock (a
// clock stepped back across the restart: the comparison of times the
// scanner made before incarnations kept them for their whole lease), and
// keeps what it claims itself.
func TestOwnPreviousIncarnation(t *testing.T) {
	f := setup(t, 0)
	it := f.st.Items()[0]
	inc := store.NewIncarnation()
	sc, err := scan.New(scan.Config{Store: f.st, Tier: f.tier, Planner: hot.NewPlanner(20*time.Millisecond, 0),
		NodeID: node, Incarnation: inc, Window: window, LeaseTTL: time.Minute,
		Live: func(context.Context) ([]scan.Node, error) { return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sc.Stop)
	if err := sc.Start(f.ctx); err != nil {
		t.Fatal(err)
	}
	// Written after Start by the clock, by a previous process.
	time.Sleep(5 * time.Millisecond)
	prevTok := store.NewIncarnation().Token()
	old := stagetest.Insert(t, f.st, stagetest.Claimed(stagetest.NewTaskIn(t, it, "scan", "previous", time.Now().Add(time.Second)), node, prevTok))[0]
	sc.SetItems([]store.Item{it})
	stagetest.Eventually(t, "the previous incarnation's claim is taken under this one's token", func() bool {
		tk := stagetest.Get(t, f.st, old.ID)
		return tk.Status == task.StatusClaimed && tk.Owner == node && store.TokenIncarnation(tk.Token) == inc.ID()
	})
	tok := stagetest.Get(t, f.st, old.ID).Token
	sc.SetItems(nil)
	sc.SetItems([]store.Item{it})
	time.Sleep(200 * time.Millisecond)
	if tk := stagetest.Get(t, f.st, old.ID); tk.Token != tok {
		t.Fatalf("a claim of this process was ended on re-adoption: token %d -> %d", tok, tk.Token)
	}
}
