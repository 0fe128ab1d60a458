package scan_test

import (
	"context"
	"errors"
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

// newScanner is setup's scanner with a Live function.
func newScanner(t *testing.T, f *fixture, live func(context.Context) ([]scan.Node, error)) *scan.Scanner {
	t.Helper()
	sc, err := scan.New(scan.Config{Store: f.st, Tier: f.tier, Planner: hot.NewPlanner(20*time.Millisecond, 0),
		NodeID: node, Window: window, LeaseTTL: time.Minute, Live: live})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sc.Stop)
	return sc
}

// TestAdoptTakesDeadNodesTasks: when an item comes to this node, the tasks
// in it claimed or running under nodes that are not alive are claimed here
// at once, though their hour-long leases have not run out; those of a live
// node stay with it.
func TestAdoptTakesDeadNodesTasks(t *testing.T) {
	f := setup(t, 0)
	it := f.st.Items()[0]
	due := time.Now().Add(time.Second)
	deadClaimed := stagetest.Insert(t, f.st, stagetest.Claimed(stagetest.NewTaskIn(t, it, "scan", "dead-claimed", due), "dead", 11))[0]
	liveClaimed := stagetest.Insert(t, f.st, stagetest.Claimed(stagetest.NewTaskIn(t, it, "scan", "live-claimed", due), "alive", 12))[0]
	running := stagetest.NewTaskIn(t, it, "scan", "dead-running", due)
	running.Claim = &store.Lease{Owner: "dead", Until: time.Now().Add(time.Hour), Token: 13}
	stagetest.Insert(t, f.st, running)
	if st, err := f.st.Start(f.ctx, []store.Ref{{ID: running.ID, Token: 13}}, time.Now().Add(time.Hour)); err != nil || len(st) != 1 {
		t.Fatalf("start: %v", err)
	}
	asked := make(chan struct{}, 100)
	sc := newScanner(t, f, func(context.Context) ([]scan.Node, error) {
		select {
		case asked <- struct{}{}:
		default:
		}
		return []scan.Node{{ID: "alive"}}, nil // this node is added by the scanner
	})
	sc.SetItems([]store.Item{it})
	if err := sc.Start(f.ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{deadClaimed.ID, running.ID} {
		stagetest.Eventually(t, "the dead node's task is claimed here", func() bool {
			tk := stagetest.Get(t, f.st, id)
			return tk.Status == task.StatusClaimed && tk.Owner == node
		})
	}
	if tk := stagetest.Get(t, f.st, liveClaimed.ID); tk.Owner != "alive" || tk.Status != task.StatusClaimed {
		t.Fatalf("a live node's claim was taken: %+v", tk)
	}
	if len(asked) == 0 {
		t.Fatal("Live was never asked")
	}
}

// TestAdoptReadsLiveAfterItemGiven: an item given to this node after a
// node died (its items move here) is adopted by the live nodes as read
// since, not by an answer cached from before the death, which still lists
// the dead node: its tasks are taken at once rather than at the next poll
// or when their leases end. The scanner's own poll never sees the node
// leave here (its first answer already lacks it), so only the item's
// start can take them.
func TestAdoptReadsLiveAfterItemGiven(t *testing.T) {
	f := setup(t, 0)
	first, moved := f.st.Items()[0], f.st.Items()[1]
	var mu sync.Mutex
	live := []scan.Node{{ID: "alive"}, {ID: "dead"}}
	asked := make(chan struct{}, 100)
	sc := newScanner(t, f, func(context.Context) ([]scan.Node, error) {
		select {
		case asked <- struct{}{}:
		default:
		}
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(live), nil
	})
	sc.SetItems([]store.Item{first})
	if err := sc.Start(f.ctx); err != nil {
		t.Fatal(err)
	}
	<-asked // the first item's adopt: "dead" is alive, the answer cached
	held := stagetest.Insert(t, f.st, stagetest.Claimed(stagetest.NewTaskIn(t, moved, "scan", "dead-claimed", time.Now().Add(time.Second)), "dead", 41))[0]
	mu.Lock()
	live = live[:1] // "dead" dies; its item comes here
	mu.Unlock()
	sc.SetItems([]store.Item{first, moved})
	stagetest.Eventually(t, "the dead node's task in the item given is claimed here", func() bool {
		return stagetest.Get(t, f.st, held.ID).Owner == node
	})
}

// TestAdoptWithoutLive: a node alone (no Live) takes every lease in its
// items that is not its own — those of its previous process.
func TestAdoptWithoutLive(t *testing.T) {
	f := setup(t, 0)
	it := f.st.Items()[0]
	old := stagetest.Insert(t, f.st, stagetest.Claimed(stagetest.NewTaskIn(t, it, "scan", "previous-life", time.Now().Add(time.Second)), "host-1234", 21))[0]
	f.sc.SetItems([]store.Item{it})
	f.start(t)
	stagetest.Eventually(t, "the previous process's claim is taken", func() bool {
		return stagetest.Get(t, f.st, old.ID).Owner == node
	})
}

// TestAdoptLiveFails: when the live nodes cannot be read, no lease is
// ended (the node cannot tell dead from alive) and scanning goes on.
func TestAdoptLiveFails(t *testing.T) {
	f := setup(t, 0)
	it := f.st.Items()[0]
	held := stagetest.Insert(t, f.st, stagetest.Claimed(stagetest.NewTaskIn(t, it, "scan", "held", time.Now().Add(time.Second)), "other", 31))[0]
	pending := f.insertIn(t, it, "pending", time.Now().Add(time.Second))
	sc := newScanner(t, f, func(context.Context) ([]scan.Node, error) { return nil, context.DeadlineExceeded })
	sc.SetItems([]store.Item{it})
	if err := sc.Start(f.ctx); err != nil {
		t.Fatal(err)
	}
	stagetest.Eventually(t, "the pending task is claimed", func() bool { return f.status(t, pending.ID) == task.StatusClaimed })
	if tk := stagetest.Get(t, f.st, held.ID); tk.Owner != "other" {
		t.Fatalf("a lease was ended without knowing who is alive: %+v", tk)
	}
}

// TestAdoptRetriedAfterAFailure: an adoption that failed (the membership
// did not answer) is tried again at the item's next round, and takes the
// dead node's tasks then: no membership change comes later to do it, and
// they would otherwise wait for their hour-long leases.
func TestAdoptRetriedAfterAFailure(t *testing.T) {
	f := setup(t, 0)
	it := f.st.Items()[0]
	held := stagetest.Insert(t, f.st, stagetest.Claimed(stagetest.NewTaskIn(t, it, "scan", "dead-claimed", time.Now().Add(time.Hour)), "dead", 51))[0]
	var mu sync.Mutex
	failures := 3
	sc := newScanner(t, f, func(context.Context) ([]scan.Node, error) {
		mu.Lock()
		defer mu.Unlock()
		if failures > 0 {
			failures--
			return nil, errors.New("membership unreachable")
		}
		return []scan.Node{{ID: "alive"}}, nil
	})
	sc.SetItems([]store.Item{it})
	if err := sc.Start(f.ctx); err != nil {
		t.Fatal(err)
	}
	stagetest.Eventually(t, "the dead node's task is claimed here after the failures", func() bool {
		return stagetest.Get(t, f.st, held.ID).Owner == node
	})
	mu.Lock()
	defer mu.Unlock()
	if failures != 0 {
		t.Fatalf("%d failures left: the task was taken without asking", failures)
	}
}

// TestTierLost: after the tier lost its entries, TierLost makes the item
// scanners claim this node's tasks again, under new tokens, back into the
// tier; running tasks are left alone.
func TestTierLost(t *testing.T) {
	f := setup(t, 0)
	f.sc.SetItems(f.st.Items())
	tasks := f.tasks(t, "lost", 3, time.Now().Add(3*time.Second))
	f.start(t)
	stagetest.Eventually(t, "all claimed into the tier", func() bool {
		n, _ := f.tier.Len(f.ctx)
		return n == len(tasks)
	})
	tokens := map[string]int64{}
	for _, tk := range tasks {
		tokens[tk.ID] = stagetest.Get(t, f.st, tk.ID).Token
	}
	// Another node's claim in this node's item (its submit path claimed a
	// task due soon into the shared tier): lost with the rest, and only
	// this item's scanner can end it.
	other := stagetest.Insert(t, f.st, stagetest.Claimed(stagetest.NewTaskIn(t, f.st.Items()[0], "scan", "other-claimed", time.Now().Add(3*time.Second)), "other", 21))[0]
	tasks = append(tasks, other)
	tokens[other.ID] = 21
	if lost := f.tier.Drain(); len(lost) != len(tasks)-1 {
		t.Fatalf("drained %d entries, want %d", len(lost), len(tasks)-1)
	}
	f.sc.TierLost()
	stagetest.Eventually(t, "entries back in the tier", func() bool {
		n, _ := f.tier.Len(f.ctx)
		return n == len(tasks)
	})
	for _, tk := range tasks {
		got := stagetest.Get(t, f.st, tk.ID)
		if got.Status != task.StatusClaimed || got.Owner != node || got.Token == tokens[tk.ID] {
			t.Fatalf("task %s after TierLost: %+v (old token %d)", tk.ID, got, tokens[tk.ID])
		}
	}
}

// TestAdoptOwnPreviousProcess: a node restarted under the same ID (so
// alive in the coordinator's eyes) takes back at once what its previous
// process claimed, but not what it claimed itself since it started.
func TestAdoptOwnPreviousProcess(t *testing.T) {
	f := setup(t, 0)
	it := f.st.Items()[0]
	old := stagetest.Insert(t, f.st, stagetest.Claimed(stagetest.NewTaskIn(t, it, "scan", "before-restart", time.Now().Add(time.Second)), node, 41))[0]
	time.Sleep(2 * time.Millisecond) // the row is written strictly before the scanner starts
	sc := newScanner(t, f, func(context.Context) ([]scan.Node, error) { return []scan.Node{{ID: node}}, nil })
	sc.SetItems([]store.Item{it})
	if err := sc.Start(f.ctx); err != nil {
		t.Fatal(err)
	}
	stagetest.Eventually(t, "the previous process's claim is taken under a new token", func() bool {
		tk := stagetest.Get(t, f.st, old.ID)
		return tk.Status == task.StatusClaimed && tk.Owner == node && tk.Token != 41
	})
	// A claim made by this process survives a second adoption of the item.
	tok := stagetest.Get(t, f.st, old.ID).Token
	sc.SetItems(nil)
	sc.SetItems([]store.Item{it})
	time.Sleep(200 * time.Millisecond)
	if tk := stagetest.Get(t, f.st, old.ID); tk.Token != tok {
		t.Fatalf("a claim of this process was ended on re-adoption: token %d -> %d", tok, tk.Token)
	}
}

// TestAdoptWhenANodeLeavesOrRestarts: items that stay with this node hold
// claims of other nodes too (their submit paths claim tasks due soon into
// any item). When one of them leaves the live list, or restarts (its
// Started changes), this node ends, within a poll of Live, the leases it
// held — of the restarted node, only those its previous process wrote —
// without waiting for them to run out.
func TestAdoptWhenANodeLeavesOrRestarts(t *testing.T) {
	f := setup(t, 0)
	it := f.st.Items()[0]
	due := time.Now().Add(2 * time.Second)
	boot := time.Now().Add(-time.Minute)
	var mu sync.Mutex
	live := []scan.Node{{ID: "leaving", Started: boot}, {ID: "restarting", Started: boot}}
	sc := newScanner(t, f, func(context.Context) ([]scan.Node, error) {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(live), nil
	})
	sc.SetItems([]store.Item{it})
	if err := sc.Start(f.ctx); err != nil {
		t.Fatal(err)
	}
	// Claimed after the item started here: the start's adoption saw none.
	time.Sleep(100 * time.Millisecond)
	leaving := stagetest.Insert(t, f.st, stagetest.Claimed(stagetest.NewTaskIn(t, it, "scan", "of-leaving", due), "leaving", 51))[0]
	oldProc := stagetest.Insert(t, f.st, stagetest.Claimed(stagetest.NewTaskIn(t, it, "scan", "of-old-process", due), "restarting", 52))[0]
	time.Sleep(1500 * time.Millisecond) // a poll or more of Live that changes nothing
	for _, id := range []string{leaving.ID, oldProc.ID} {
		if tk := stagetest.Get(t, f.st, id); tk.Token != 51 && tk.Token != 52 {
			t.Fatalf("a live node's claim was ended: %+v", tk)
		}
	}
	// "restarting" restarts: its new process claims a task, then the
	// coordinator shows its new start; "leaving" leaves.
	time.Sleep(2 * time.Millisecond)
	restart := time.Now()
	time.Sleep(2 * time.Millisecond)
	newProc := stagetest.Insert(t, f.st, stagetest.Claimed(stagetest.NewTaskIn(t, it, "scan", "of-new-process", due), "restarting", 53))[0]
	mu.Lock()
	live = []scan.Node{{ID: "restarting", Started: restart}}
	mu.Unlock()
	for _, id := range []string{leaving.ID, oldProc.ID} {
		stagetest.Eventually(t, "the lease is taken here", func() bool {
			tk := stagetest.Get(t, f.st, id)
			return tk.Status == task.StatusClaimed && tk.Owner == node
		})
	}
	if tk := stagetest.Get(t, f.st, newProc.ID); tk.Owner != "restarting" || tk.Token != 53 {
		t.Fatalf("the restarted node's new claim was ended: %+v", tk)
	}
}

// flakyTier refuses Adds while down is set.
type flakyTier struct {
	scan.Tier
	mu   sync.Mutex
	down bool
}

func (ft *flakyTier) Add(ctx context.Context, e ...hot.Entry) error {
	ft.mu.Lock()
	down := ft.down
	ft.mu.Unlock()
	if down {
		return errors.New("redis: connection refused")
	}
	return ft.Tier.Add(ctx, e...)
}

// TestTierDownReleasesClaims: claims the tier refused are handed back at
// once (pending) and claimed again when the tier returns, not after their
// leases.
func TestTierDownReleasesClaims(t *testing.T) {
	f := setup(t, 100*time.Millisecond)
	it := f.st.Items()[0]
	tk := f.insertIn(t, it, "refused", time.Now().Add(2*time.Second))
	ft := &flakyTier{Tier: f.tier, down: true}
	sc, err := scan.New(scan.Config{Store: f.st, Tier: ft, Planner: hot.NewPlanner(20*time.Millisecond, 0),
		NodeID: node, Window: window, LeaseTTL: time.Hour, Idle: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sc.Stop)
	sc.SetItems([]store.Item{it})
	if err := sc.Start(f.ctx); err != nil {
		t.Fatal(err)
	}
	// Refused, handed back, claimed again and refused again: the task is
	// pending between the claims, not held for its hour-long lease.
	stagetest.Eventually(t, "claims refused by the tier handed back", func() bool {
		return f.st.claimCount(it) >= 3 && f.status(t, tk.ID) == task.StatusPending
	})
	ft.mu.Lock()
	ft.down = false
	ft.mu.Unlock()
	stagetest.Eventually(t, "claimed into the tier once it is back", func() bool {
		n, _ := f.tier.Len(f.ctx)
		return n == 1 && f.status(t, tk.ID) == task.StatusClaimed
	})
}
