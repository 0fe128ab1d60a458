package submit_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/hot"
	"github.com/ontimehq/ontime/internal/hot/memory"
	"github.com/ontimehq/ontime/internal/stagetest"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/store/sqlstore"
	"github.com/ontimehq/ontime/internal/submit"
	"github.com/ontimehq/ontime/internal/task"
)

const (
	window = 10 * time.Second
	node   = "node-1"
)

type notice struct {
	item store.Item
	at   time.Time
}

// notifier records the scanner wake-ups the submit path asks for.
type notifier struct {
	mu  sync.Mutex
	got []notice
}

func (n *notifier) Notify(it store.Item, at time.Time) {
	n.mu.Lock()
	n.got = append(n.got, notice{it, at})
	n.mu.Unlock()
}

func (n *notifier) notices() []notice {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]notice(nil), n.got...)
}

type fixture struct {
	st   *sqlstore.Store
	tier *memory.Tier
	n    *notifier
	svc  *submit.Service
	ctx  context.Context
}

func setup(t *testing.T) *fixture {
	t.Helper()
	t.Parallel()
	f := &fixture{st: stagetest.Store(t), tier: stagetest.Tier(t), n: &notifier{}, ctx: context.Background()}
	svc, err := submit.New(submit.Config{Store: f.st, Tier: f.tier, Planner: hot.NewPlanner(20*time.Millisecond, 0),
		Notifier: f.n, Topology: stagetest.Topology, Segments: stagetest.Segments, NodeID: node,
		Window: window, LeaseTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	svc.SetReady(true)
	f.svc = svc
	return f
}

func (f *fixture) submit(t *testing.T, specs ...task.Spec) []submit.Result {
	t.Helper()
	res, err := f.svc.Submit(f.ctx, specs)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(specs) {
		t.Fatalf("%d results for %d specs", len(res), len(specs))
	}
	return res
}

func (f *fixture) tierLen(t *testing.T) int {
	t.Helper()
	n, err := f.tier.Len(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func delay(d time.Duration) *time.Duration { return &d }

func TestNotReady(t *testing.T) {
	f := setup(t)
	f.svc.SetReady(false)
	res, err := f.svc.Submit(f.ctx, []task.Spec{{Topic: "t", Key: "k"}})
	if !errors.Is(err, submit.ErrNotReady) || res != nil {
		t.Fatalf("Submit while not ready = %v, %v; want ErrNotReady", res, err)
	}
	if err := f.svc.Ready(f.ctx); !errors.Is(err, submit.ErrNotReady) {
		t.Fatalf("Ready = %v; want ErrNotReady", err)
	}
	if n := stagetest.Total(t, f.st); n != 0 {
		t.Fatalf("%d tasks stored by a refused submit", n)
	}
	f.svc.SetReady(true)
	if err := f.svc.Ready(f.ctx); err != nil {
		t.Fatalf("Ready after SetReady(true) = %v", err)
	}
	f.submit(t, task.Spec{Topic: "t", Key: "k"})
	if n := stagetest.Total(t, f.st); n != 1 {
		t.Fatalf("%d tasks stored after a ready submit; want 1", n)
	}
}

// A task due within the window is stored claimed by this node and its hot
// entry (same ID and claim token, leaving before its due time) is in the
// tier; the scanner is not bothered.
func TestDueSoonIsClaimedAndInTier(t *testing.T) {
	f := setup(t)
	r := f.submit(t, task.Spec{Topic: "soon", Key: "k1", Delay: delay(time.Second)})[0]
	if r.Err != nil || r.Existing {
		t.Fatalf("result %+v", r)
	}
	got := stagetest.Get(t, f.st, r.Task.ID)
	if got.Status != task.StatusClaimed || got.Owner != node || got.Token == 0 {
		t.Fatalf("stored as %s owner %q token %d; want claimed by %s", got.Status, got.Owner, got.Token, node)
	}
	if !got.LeaseUntil.After(got.DueAt) {
		t.Fatalf("lease until %s ends before due %s", got.LeaseUntil, got.DueAt)
	}
	entries := f.tier.Drain()
	if len(entries) != 1 {
		t.Fatalf("tier holds %d entries; want 1", len(entries))
	}
	e := entries[0]
	if e.ID != got.ID || e.Token != got.Token || e.Topic != "soon" {
		t.Fatalf("tier entry %+v does not match the claimed row (token %d)", e, got.Token)
	}
	if e.DueAt.After(got.DueAt) || e.DueAt.Before(got.DueAt.Add(-time.Second)) {
		t.Fatalf("entry leaves the tier at %s, task due %s: want a little before", e.DueAt, got.DueAt)
	}
	if n := f.n.notices(); len(n) != 0 {
		t.Fatalf("scanner notified for a task already in the tier: %+v", n)
	}
}

// A task due beyond the window is stored pending, not in the tier, and the
// scanner of its item is told when it enters the window.
func TestDueLaterIsPendingAndNotifies(t *testing.T) {
	f := setup(t)
	r := f.submit(t, task.Spec{Topic: "later", Key: "k1", Delay: delay(time.Hour)})[0]
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	got := stagetest.Get(t, f.st, r.Task.ID)
	if got.Status != task.StatusPending || got.Owner != "" {
		t.Fatalf("stored as %s owner %q; want pending, unowned", got.Status, got.Owner)
	}
	if n := f.tierLen(t); n != 0 {
		t.Fatalf("tier holds %d entries; want none", n)
	}
	n := f.n.notices()
	if len(n) != 1 {
		t.Fatalf("%d notifies; want 1", len(n))
	}
	want := stagetest.ItemOf(got.ShardHash, got.Seg)
	if n[0].item != want {
		t.Fatalf("notified item %+v; the task is in %+v", n[0].item, want)
	}
	if !n[0].at.Equal(got.DueAt.Add(-window)) {
		t.Fatalf("notified at %s; want due − window = %s", n[0].at, got.DueAt.Add(-window))
	}
	found := false
	for _, it := range f.st.Items() {
		found = found || it == want
	}
	if !found {
		t.Fatalf("notified item %+v is not one of the store's items", want)
	}
}

// An invalid spec gets its own error and writes nothing; the valid specs
// of the batch are stored.
func TestInvalidSpecWritesNothing(t *testing.T) {
	f := setup(t)
	res := f.submit(t,
		task.Spec{Topic: "bad topic!", Key: "a"},
		task.Spec{Topic: "ok", Key: "b", Delay: delay(time.Hour)},
		task.Spec{Topic: "ok", Key: "c", Payload: []byte("{not json")},
		task.Spec{Topic: "ok", Key: "d", Delay: delay(-time.Second)},
	)
	for _, i := range []int{0, 2, 3} {
		var fe *task.FieldError
		if !errors.Is(res[i].Err, task.ErrInvalid) || !errors.As(res[i].Err, &fe) || res[i].Task != nil {
			t.Errorf("spec %d: result %+v; want a *FieldError and no task", i, res[i])
		}
	}
	if res[1].Err != nil || res[1].Task == nil {
		t.Fatalf("valid spec in the batch: %+v", res[1])
	}
	if n := stagetest.Total(t, f.st); n != 1 {
		t.Fatalf("%d tasks stored; want only the valid one", n)
	}
	// A batch of only invalid specs writes nothing at all.
	res = f.submit(t, task.Spec{Topic: ""}, task.Spec{Topic: "ok", Target: "ftp://x"})
	if res[0].Err == nil || res[1].Err == nil {
		t.Fatalf("invalid specs accepted: %+v", res)
	}
	if n := stagetest.Total(t, f.st); n != 1 {
		t.Fatalf("%d tasks stored; an all-invalid batch wrote", n)
	}
	if n := f.tierLen(t); n != 0 {
		t.Fatalf("tier holds %d entries", n)
	}
}

// The same topic and key twice is one task: the second submit answers
// Existing with it and adds nothing to the tier.
func TestSameKeyIsExisting(t *testing.T) {
	f := setup(t)
	spec := task.Spec{Topic: "dup", Key: "same", Delay: delay(time.Second)}
	first := f.submit(t, spec)[0]
	second := f.submit(t, spec)[0]
	if first.Existing || first.Err != nil {
		t.Fatalf("first submit: %+v", first)
	}
	if !second.Existing || second.Task == nil || second.Task.ID != first.Task.ID {
		t.Fatalf("second submit: %+v; want Existing with task %s", second, first.Task.ID)
	}
	// Within one batch too.
	both := f.submit(t, spec, task.Spec{Topic: "dup", Key: "other", Delay: delay(time.Hour)})
	if !both[0].Existing || both[0].Task.ID != first.Task.ID || both[1].Existing {
		t.Fatalf("batch: %+v %+v", both[0], both[1])
	}
	if n := stagetest.Total(t, f.st); n != 2 {
		t.Fatalf("%d tasks stored; want 2", n)
	}
	if n := f.tierLen(t); n != 1 {
		t.Fatalf("tier holds %d entries; want 1 (a resubmit must not add one)", n)
	}
	if n := f.n.notices(); len(n) != 1 {
		t.Fatalf("%d notifies; want 1 (for the later task only)", len(n))
	}
}

// Cancel cancels the row and drops its hot entry.
func TestCancelRemovesTierEntry(t *testing.T) {
	f := setup(t)
	res := f.submit(t, task.Spec{Topic: "c", Key: "gone", Delay: delay(2 * time.Second)},
		task.Spec{Topic: "c", Key: "stays", Delay: delay(2 * time.Second)})
	if n := f.tierLen(t); n != 2 {
		t.Fatalf("tier holds %d entries; want 2", n)
	}
	got, err := f.svc.Cancel(f.ctx, res[0].Task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != task.StatusCancelled || stagetest.Get(t, f.st, res[0].Task.ID).Status != task.StatusCancelled {
		t.Fatalf("cancelled task is %s", got.Status)
	}
	entries := f.tier.Drain()
	if len(entries) != 1 || entries[0].ID != res[1].Task.ID {
		t.Fatalf("tier holds %+v; want only %s", entries, res[1].Task.ID)
	}
}

// Requeue returns a dead task to pending, due now, and wakes the scanner
// of its item.
func TestRequeueNotifies(t *testing.T) {
	f := setup(t)
	tk := stagetest.Running(t, f.st, stagetest.NewTask(t, "rq", "dead-one", time.Now()))[0]
	if err := f.st.Finish(f.ctx, []store.Outcome{{Ref: store.Ref{ID: tk.ID, Token: tk.Token, Topic: tk.Topic}, Dead: true, Error: "x"}}); err != nil {
		t.Fatal(err)
	}
	if s := stagetest.Get(t, f.st, tk.ID).Status; s != task.StatusDead {
		t.Fatalf("setup: task is %s, not dead", s)
	}
	before := time.Now()
	got, err := f.svc.Requeue(f.ctx, tk.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != task.StatusPending || got.Attempts != 0 || got.DueAt.Before(before.Truncate(time.Millisecond)) {
		t.Fatalf("requeued task: %s, attempts %d, due %s; want pending, 0, now", got.Status, got.Attempts, got.DueAt)
	}
	n := f.n.notices()
	if len(n) != 1 {
		t.Fatalf("%d notifies; want 1", len(n))
	}
	if want := stagetest.ItemOf(tk.ShardHash, tk.Seg); n[0].item != want || !n[0].at.Equal(got.DueAt.Add(-window)) {
		t.Fatalf("notified %+v; want item %+v at %s", n[0], want, got.DueAt.Add(-window))
	}
	// Requeue of a task that is not dead is a conflict and notifies nothing.
	if _, err := f.svc.Requeue(f.ctx, tk.ID); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("requeue of a pending task: %v; want ErrConflict", err)
	}
	if n := f.n.notices(); len(n) != 1 {
		t.Fatalf("%d notifies after a refused requeue; want still 1", len(n))
	}
}

// A task this node inserted claimed, submitted again by key, goes back to
// the tier under its row's token: the first submit's commit may have
// succeeded while its answer, and its tier Add, were lost, and without
// this the claim would wait out its lease.
func TestResubmitPutsALostClaimBackInTheTier(t *testing.T) {
	f := setup(t)
	spec := task.Spec{Topic: "t", Key: "lost-reply", Delay: delay(time.Second)}
	first := f.submit(t, spec)[0]
	if first.Err != nil || first.Task.Status != task.StatusClaimed {
		t.Fatalf("first submit: %+v", first)
	}
	// The tier lost the entry (as if the Add never happened).
	if lost := f.tier.Drain(); len(lost) != 1 {
		t.Fatalf("tier held %d entries, want 1", len(lost))
	}
	again := f.submit(t, spec)[0]
	if again.Err != nil || !again.Existing || again.Task.ID != first.Task.ID {
		t.Fatalf("resubmit: %+v", again)
	}
	if n, err := f.tier.Len(f.ctx); err != nil || n != 1 {
		t.Fatalf("tier holds %d entries (%v) after the resubmit; want the lost claim back", n, err)
	}
	got := f.tier.Drain()
	if len(got) != 1 || got[0].ID != first.Task.ID || got[0].Token != first.Task.Token {
		t.Fatalf("entry %+v; want task %s under token %d", got, first.Task.ID, first.Task.Token)
	}
	// A resubmit of a task the tier still holds keeps one entry.
	third := f.submit(t, spec)[0]
	fourth := f.submit(t, spec)[0]
	if third.Err != nil || fourth.Err != nil {
		t.Fatal(third.Err, fourth.Err)
	}
	if n, _ := f.tier.Len(f.ctx); n != 1 {
		t.Fatalf("tier holds %d entries after two resubmits; want 1", n)
	}
}
