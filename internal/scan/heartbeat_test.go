package scan_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/hot"
	"github.com/ontimehq/ontime/internal/scan"
	"github.com/ontimehq/ontime/internal/stagetest"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// Tasks claimed into the (memory) tier keep their claims while they wait
// there, however long nothing pops them (the fire stage held back by its
// bound): after several claim leases no other node can claim them, and
// each is still claimed under the token of its tier entry, so the scanner
// did not claim it again either. Entries that leave the tier (popped and
// acked) are no longer extended: their claims run out.
func TestClaimsInTheTierAreKept(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := stagetest.Store(t)
	tier := stagetest.Tier(t)
	const ttl = 3 * time.Second
	sc, err := scan.New(scan.Config{Store: st, Tier: tier, Planner: hot.NewPlanner(20*time.Millisecond, 0),
		NodeID: node, Window: 100 * time.Millisecond, LeaseTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	var tasks []*task.Task
	for _, it := range st.Items() {
		for i := range 5 {
			tasks = append(tasks, stagetest.Insert(t, st, stagetest.NewTaskIn(t, it, "scan", fmt.Sprintf("hb-%d.%d.%d-%d", it.DB, it.Table, it.Segment, i), time.Now()))...)
		}
	}
	sc.SetItems(st.Items())
	if err := sc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sc.Stop)
	deadline := time.Now().Add(30 * time.Second)
	for stagetest.Count(t, st, task.StatusClaimed) < int64(len(tasks)) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	tokens := map[string]int64{}
	for _, tk := range tasks {
		got := stagetest.Get(t, st, tk.ID)
		if got.Status != task.StatusClaimed {
			t.Fatalf("task %s: %s, want claimed", tk.ID, got.Status)
		}
		tokens[tk.ID] = got.Token
	}
	time.Sleep(5 * ttl / 2)
	other := store.Lease{Owner: "node-2", Until: time.Now().Add(time.Minute), Token: store.NewToken()}
	for _, it := range st.Items() {
		refs, err := st.Claim(ctx, it, time.Now(), time.Now(), other, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(refs) > 0 {
			t.Fatalf("another node claimed %d tasks waiting in this node's tier", len(refs))
		}
	}
	for _, tk := range tasks {
		if got := stagetest.Get(t, st, tk.ID); got.Status != task.StatusClaimed || got.Token != tokens[tk.ID] {
			t.Fatalf("task %s: %s under token %d, want claimed under %d (claimed again)", tk.ID, got.Status, got.Token, tokens[tk.ID])
		}
	}
	if n, _ := tier.Len(ctx); n != len(tasks) {
		t.Fatalf("tier holds %d entries, want %d", n, len(tasks))
	}
}

// The scanner claims no more than the node can work through within a
// claim's lease (Wait, the completer's estimate, over Window+LeaseTTL):
// the rest of a burst stays pending, unwritten, until there is room.
func TestClaimsBoundedByTheBacklog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := stagetest.Store(t)
	tier := stagetest.Tier(t)
	const fits = 400 // tasks the node works through within a lease
	wait := func(n int) time.Duration {
		if n > fits {
			return time.Hour
		}
		return 0
	}
	sc, err := scan.New(scan.Config{Store: st, Tier: tier, Planner: hot.NewPlanner(20*time.Millisecond, 0),
		NodeID: node, Window: time.Minute, LeaseTTL: time.Minute, ClaimBatch: 100, Wait: wait})
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, it := range st.Items() {
		var news []store.NewTask
		for i := range 300 {
			news = append(news, stagetest.NewTaskIn(t, it, "scan", fmt.Sprintf("b-%d.%d.%d-%d", it.DB, it.Table, it.Segment, i), time.Now()))
		}
		total += len(stagetest.Insert(t, st, news...))
	}
	if total <= 2*fits {
		t.Fatalf("setup: %d tasks, want well over %d", total, fits)
	}
	sc.SetItems(st.Items())
	if err := sc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sc.Stop)
	stagetest.Eventually(t, "claims up to the bound", func() bool { return stagetest.Count(t, st, task.StatusClaimed) >= fits })
	time.Sleep(500 * time.Millisecond) // scanners keep looking meanwhile
	if n := stagetest.Count(t, st, task.StatusClaimed); n > fits {
		t.Fatalf("%d tasks claimed, want at most %d (what the node works through within a lease)", n, fits)
	}
	if n := stagetest.Count(t, st, task.StatusPending); n != int64(total-fits) {
		t.Fatalf("%d tasks pending, want %d", n, total-fits)
	}
}

// A ClaimBatch larger than what fits within a lease is cut down, not
// refused: with a short window and lease even an idle node's whole batch
// may not fit, and refusing it left every due task pending for good.
func TestClaimSmallerThanTheBatchWhenOnlyThatFits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := stagetest.Store(t)
	tier := stagetest.Tier(t)
	const fits = 100
	wait := func(n int) time.Duration {
		if n > fits {
			return time.Hour
		}
		return 0
	}
	sc, err := scan.New(scan.Config{Store: st, Tier: tier, Planner: hot.NewPlanner(20*time.Millisecond, 0),
		NodeID: node, Window: time.Second, LeaseTTL: time.Second, ClaimBatch: 500, Wait: wait})
	if err != nil {
		t.Fatal(err)
	}
	it := st.Items()[0]
	var news []store.NewTask
	for i := range 50 {
		news = append(news, stagetest.NewTaskIn(t, it, "scan", fmt.Sprintf("small-%d", i), time.Now()))
	}
	stagetest.Insert(t, st, news...)
	sc.SetItems([]store.Item{it})
	if err := sc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sc.Stop)
	stagetest.Eventually(t, "every task claimed", func() bool { return stagetest.Count(t, st, task.StatusClaimed) == 50 })
}

// The claims of entries the scanner did not add — the submit path's, of
// tasks due within the window, claimed by their insert — are kept too
// while they wait in the tier: their leases end a lease after their due
// time, and a burst submitted within its window outlived them and was
// claimed again.
func TestClaimsTheScannerDidNotMakeAreKept(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := stagetest.Store(t)
	tier := stagetest.Tier(t)
	const ttl = 6 * time.Second // heartbeats every 1.5 s, under -race on a loaded machine
	planner := hot.NewPlanner(20*time.Millisecond, 0)
	sc, err := scan.New(scan.Config{Store: st, Tier: tier, Planner: planner, NodeID: node, Window: 100 * time.Millisecond, LeaseTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	// Started first: rows this node wrote before are a previous process's,
	// whose leases the scanner ends.
	sc.SetItems(st.Items())
	if err := sc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sc.Stop)
	time.Sleep(100 * time.Millisecond)
	now := time.Now()
	claim := store.Lease{Owner: node, Until: now.Add(ttl), Token: store.NewToken()}
	var news []store.NewTask
	for i, it := range st.Items() {
		nt := stagetest.NewTaskIn(t, it, "scan", fmt.Sprintf("submitted-%d", i), now)
		nt.Claim = &claim
		news = append(news, nt)
	}
	tasks := stagetest.Insert(t, st, news...)
	var entries []hot.Entry
	for _, tk := range tasks {
		entries = append(entries, planner.Entry(now, tk.ID, tk.Topic, tk.DueAt, claim.Token))
	}
	if err := tier.Add(ctx, entries...); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * ttl / 2)
	for _, tk := range tasks {
		if got := stagetest.Get(t, st, tk.ID); got.Status != task.StatusClaimed || got.Token != claim.Token {
			t.Fatalf("task %s: %s under token %d, want claimed under %d (its claim ran out and it was claimed again)", tk.ID, got.Status, got.Token, claim.Token)
		}
	}
}
