package scan_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/hot"
	"github.com/ontimehq/ontime/internal/hot/memory"
	"github.com/ontimehq/ontime/internal/scan"
	"github.com/ontimehq/ontime/internal/stagetest"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/store/sqlstore"
	"github.com/ontimehq/ontime/internal/task"
)

const (
	window = 5 * time.Second
	node   = "node-1"
)

// recStore is the real store, counting the scanner's calls per item. A
// hook may run inside NextDue, after the query, while the scan is under way.
type recStore struct {
	*sqlstore.Store
	mu        sync.Mutex
	claims    map[store.Item]int
	nextDues  map[store.Item]int
	inNextDue func(it store.Item, call int)
}

func (r *recStore) Claim(ctx context.Context, it store.Item, horizon, now time.Time, lease store.Lease, limit int) ([]store.Ref, error) {
	r.mu.Lock()
	r.claims[it]++
	r.mu.Unlock()
	return r.Store.Claim(ctx, it, horizon, now, lease, limit)
}

func (r *recStore) NextDue(ctx context.Context, it store.Item) (time.Time, time.Time, error) {
	due, lease, err := r.Store.NextDue(ctx, it)
	r.mu.Lock()
	r.nextDues[it]++
	call, hook := r.nextDues[it], r.inNextDue
	r.mu.Unlock()
	if hook != nil {
		hook(it, call)
	}
	return due, lease, err
}

func (r *recStore) claimCount(it store.Item) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.claims[it]
}

// scanned reports whether every item has finished a scan (its scanner
// sleeps now).
func (r *recStore) scanned(items []store.Item) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, it := range items {
		if r.nextDues[it] == 0 {
			return false
		}
	}
	return true
}

type fixture struct {
	st   *recStore
	tier *memory.Tier
	sc   *scan.Scanner
	ctx  context.Context
}

// setup builds a scanner over a fresh store; idle 0 takes the default.
func setup(t *testing.T, idle time.Duration) *fixture {
	t.Helper()
	t.Parallel()
	f := &fixture{st: &recStore{Store: stagetest.Store(t), claims: map[store.Item]int{}, nextDues: map[store.Item]int{}},
		tier: stagetest.Tier(t), ctx: context.Background()}
	sc, err := scan.New(scan.Config{Store: f.st, Tier: f.tier, Planner: hot.NewPlanner(20*time.Millisecond, 0),
		NodeID: node, Window: window, LeaseTTL: time.Minute, Idle: idle})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sc.Stop)
	f.sc = sc
	return f
}

func (f *fixture) start(t *testing.T) {
	t.Helper()
	if err := f.sc.Start(f.ctx); err != nil {
		t.Fatal(err)
	}
	stagetest.Done(t, "scanner started", f.sc.Started())
}

// tasks inserts n pending tasks due at due in each item.
func (f *fixture) tasks(t *testing.T, prefix string, n int, due time.Time) []*task.Task {
	t.Helper()
	var out []*task.Task
	for _, it := range f.st.Items() {
		for i := range n {
			nt := stagetest.NewTaskIn(t, it, "scan", fmt.Sprintf("%s-%d.%d.%d-%d", prefix, it.DB, it.Table, it.Segment, i), due)
			out = append(out, stagetest.Insert(t, f.st, nt)...)
		}
	}
	return out
}

func (f *fixture) insertIn(t *testing.T, it store.Item, key string, due time.Time) *task.Task {
	t.Helper()
	return stagetest.Insert(t, f.st, stagetest.NewTaskIn(t, it, "scan", key, due))[0]
}

func (f *fixture) status(t *testing.T, id string) task.Status {
	t.Helper()
	return stagetest.Get(t, f.st, id).Status
}

// Tasks due within the window are claimed by this node and land in the
// tier under their claim tokens; tasks due beyond it stay pending. The
// items, set before Start, are scanned from Start on.
func TestClaimsWithinWindow(t *testing.T) {
	f := setup(t, 0)
	f.sc.SetItems(f.st.Items())
	soon := f.tasks(t, "soon", 5, time.Now().Add(2*time.Second))
	later := f.tasks(t, "later", 5, time.Now().Add(time.Hour))
	// Not started: SetItems alone scans nothing.
	time.Sleep(100 * time.Millisecond)
	if n := stagetest.Count(t, f.st, task.StatusClaimed); n != 0 {
		t.Fatalf("%d tasks claimed before Start", n)
	}
	f.start(t)
	for _, tk := range soon {
		stagetest.StatusIs(t, f.st, tk.ID, task.StatusClaimed)
	}
	f.sc.Stop()
	for _, tk := range later {
		if got := stagetest.Get(t, f.st, tk.ID); got.Status != task.StatusPending || got.Owner != "" {
			t.Fatalf("task due beyond the window is %s (owner %q); want pending", got.Status, got.Owner)
		}
	}
	entries := f.tier.Drain()
	if len(entries) != len(soon) {
		t.Fatalf("tier holds %d entries; want %d", len(entries), len(soon))
	}
	byID := map[string]hot.Entry{}
	for _, e := range entries {
		byID[e.ID] = e
	}
	for _, tk := range soon {
		got := stagetest.Get(t, f.st, tk.ID)
		e, ok := byID[tk.ID]
		if !ok {
			t.Fatalf("claimed task %s is not in the tier", tk.ID)
		}
		if got.Owner != node || e.Token != got.Token || got.Token == 0 {
			t.Fatalf("task %s: owner %q token %d, entry token %d", tk.ID, got.Owner, got.Token, e.Token)
		}
		if e.DueAt.After(got.DueAt) {
			t.Fatalf("task %s leaves the tier at %s, after its due time %s", tk.ID, e.DueAt, got.DueAt)
		}
		if !got.LeaseUntil.After(got.DueAt) {
			t.Fatalf("task %s: lease until %s ends before due %s", tk.ID, got.LeaseUntil, got.DueAt)
		}
	}
}

// SetItems to fewer items stops the scanners of the others: with a long
// Idle, a task of a dropped item is not claimed even when notified, while
// the kept item's is; setting the item again scans it at once.
func TestSetItemsFewerStopsScanners(t *testing.T) {
	f := setup(t, time.Hour)
	items := f.st.Items()
	kept, dropped := items[0], items[len(items)-1]
	f.sc.SetItems(items)
	f.start(t)
	stagetest.Eventually(t, "every item scanned once", func() bool { return f.st.scanned(items) })
	f.sc.SetItems([]store.Item{kept})
	claimsDropped := f.st.claimCount(dropped)

	due := time.Now().Add(time.Second)
	a := f.insertIn(t, kept, "kept", due)
	b := f.insertIn(t, dropped, "dropped", due)
	f.sc.Notify(dropped, due.Add(-window))
	f.sc.Notify(kept, due.Add(-window))
	stagetest.StatusIs(t, f.st, a.ID, task.StatusClaimed)
	if s := f.status(t, b.ID); s != task.StatusPending {
		t.Fatalf("task of a dropped item is %s; want pending", s)
	}
	if n := f.st.claimCount(dropped); n != claimsDropped {
		t.Fatalf("dropped item claimed %d times after SetItems", n-claimsDropped)
	}
	f.sc.SetItems(items)
	stagetest.StatusIs(t, f.st, b.ID, task.StatusClaimed)
}

// A Notify wakes the item's scanner for a task inserted after its last
// scan, long before Idle; an item not notified keeps sleeping.
func TestNotifyWakesScanner(t *testing.T) {
	f := setup(t, time.Hour)
	items := f.st.Items()
	f.sc.SetItems(items)
	f.start(t)
	stagetest.Eventually(t, "every item scanned once", func() bool { return f.st.scanned(items) })

	due := time.Now().Add(time.Second)
	woken := f.insertIn(t, items[0], "woken", due)
	asleep := f.insertIn(t, items[1], "asleep", due)
	f.sc.Notify(items[0], due.Add(-window))
	stagetest.StatusIs(t, f.st, woken.ID, task.StatusClaimed)
	if s := f.status(t, asleep.ID); s != task.StatusPending {
		t.Fatalf("task of an item not notified is %s; its scanner should sleep for Idle", s)
	}
	// Notified in turn, the other item's scanner claims its task too.
	f.sc.Notify(items[1], time.Now())
	stagetest.StatusIs(t, f.st, asleep.ID, task.StatusClaimed)
}

// A Notify that arrives while the item is being scanned, after the scan
// has read the table, is not lost: the scanner looks again rather than
// sleeping for Idle.
func TestNotifyDuringScanIsNotLost(t *testing.T) {
	f := setup(t, time.Hour)
	items := f.st.Items()
	it := items[0]
	lateDue := time.Now().Add(3 * time.Second)
	late := stagetest.NewTaskIn(t, it, "scan", "late", lateDue)
	var once sync.Once
	ready := make(chan struct{})
	// On the item's second scan (the first was woken by a notify, so the
	// scanner's plan is in the past), a task is inserted and notified after
	// NextDue read the table.
	f.st.inNextDue = func(got store.Item, call int) {
		if got != it || call != 2 {
			return
		}
		once.Do(func() {
			defer close(ready)
			if _, err := f.st.Insert(context.Background(), []store.NewTask{late}); err != nil {
				t.Error(err)
				return
			}
			f.sc.Notify(it, lateDue.Add(-window))
		})
	}
	f.sc.SetItems(items)
	f.start(t)
	stagetest.Eventually(t, "every item scanned once", func() bool { return f.st.scanned(items) })
	due := time.Now().Add(time.Second)
	first := f.insertIn(t, it, "first", due)
	f.sc.Notify(it, due.Add(-window))
	stagetest.StatusIs(t, f.st, first.ID, task.StatusClaimed)
	stagetest.Done(t, "second scan", ready)
	stagetest.StatusIs(t, f.st, late.ID, task.StatusClaimed)
}

// Stop from several goroutines at once: each returns once the scanner has
// stopped, and nothing is scanned after.
func TestConcurrentStop(t *testing.T) {
	f := setup(t, time.Hour)
	items := f.st.Items()
	f.sc.SetItems(items)
	f.start(t)
	stagetest.Eventually(t, "every item scanned once", func() bool { return f.st.scanned(items) })

	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.sc.Stop()
			select {
			case <-f.sc.Stopped():
			default:
				errs <- "Stop returned before the scanner stopped"
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	stagetest.Done(t, "concurrent Stops return", done)
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	f.sc.Stop() // and once more

	before := map[store.Item]int{}
	for _, it := range items {
		before[it] = f.st.claimCount(it)
	}
	due := time.Now().Add(time.Second)
	tk := f.insertIn(t, items[0], "after-stop", due)
	f.sc.Notify(items[0], due.Add(-window))
	f.sc.SetItems(items) // stopped: starts nothing
	time.Sleep(100 * time.Millisecond)
	for _, it := range items {
		if n := f.st.claimCount(it); n != before[it] {
			t.Fatalf("item %+v claimed %d times after Stop", it, n-before[it])
		}
	}
	if s := f.status(t, tk.ID); s != task.StatusPending {
		t.Fatalf("task inserted after Stop is %s", s)
	}
}

// hot.max_entries: the scanners claim no more than the tier has room for;
// the rest stay pending in the store (claimable by any node) and are
// claimed as firing makes room.
func TestMaxEntriesLeavesTasksInTheStore(t *testing.T) {
	t.Parallel()
	const max = 5
	st := &recStore{Store: stagetest.Store(t), claims: map[store.Item]int{}, nextDues: map[store.Item]int{}}
	tier := stagetest.Tier(t)
	sc, err := scan.New(scan.Config{Store: st, Tier: tier, Planner: hot.NewPlanner(20*time.Millisecond, 0),
		NodeID: node, Window: window, LeaseTTL: time.Minute, Idle: time.Hour, MaxEntries: max})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sc.Stop)
	ctx := context.Background()
	f := &fixture{st: st, tier: tier, sc: sc, ctx: ctx}
	tasks := f.tasks(t, "max", 3, time.Now().Add(time.Hour+window)) // beyond the window for now
	_ = tasks
	// Due now: all of them enter the window at once.
	var due []*task.Task
	for _, it := range st.Items() {
		for i := range 3 {
			due = append(due, f.insertIn(t, it, fmt.Sprintf("due-%d.%d.%d-%d", it.DB, it.Table, it.Segment, i), time.Now().Add(time.Second)))
		}
	}
	sc.SetItems(st.Items())
	f.start(t)
	claimed := func() int {
		n := 0
		for _, tk := range due {
			if f.status(t, tk.ID) == task.StatusClaimed {
				n++
			}
		}
		return n
	}
	stagetest.Eventually(t, "the tier filled", func() bool { return claimed() == max })
	time.Sleep(300 * time.Millisecond) // several scans later: still no more than max
	if n, _ := tier.Len(ctx); n > max || claimed() != max {
		t.Fatalf("tier holds %d, %d claimed; bound %d", n, claimed(), max)
	}
	// Firing makes room: the rest are claimed, never more than max at once.
	left := len(due)
	for left > 0 {
		entries, err := tier.Pop(ctx, 100, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := tier.Ack(ctx, entries...); err != nil {
			t.Fatal(err)
		}
		left -= len(entries)
		if left > 0 {
			stagetest.Eventually(t, "room refilled", func() bool {
				n, _ := tier.Len(ctx)
				return n == min(max, left)
			})
		}
		if n, _ := tier.Len(ctx); n > max {
			t.Fatalf("tier holds %d, bound %d", n, max)
		}
	}
}
