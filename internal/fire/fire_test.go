package fire_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/fire"
	"github.com/ontimehq/ontime/internal/hot"
	"github.com/ontimehq/ontime/internal/hot/memory"
	"github.com/ontimehq/ontime/internal/stagetest"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/store/sqlstore"
	"github.com/ontimehq/ontime/internal/task"
)

const node = "node-1"

type sent struct {
	task *task.Task
	at   time.Time
}

// sender records what is released to delivery, and when.
type sender struct {
	mu   sync.Mutex
	got  []sent
	byID map[string]int
}

func (s *sender) Send(tasks []*task.Task) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, tk := range tasks {
		s.got = append(s.got, sent{tk, now})
		s.byID[tk.ID]++
	}
}

func (s *sender) sent() []sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sent(nil), s.got...)
}

func (s *sender) times(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byID[id]
}

// expecter adds up what the firer announces to the completion stage; busy
// is what it answers Busy and bytes what it answers HeldBytes
// (backpressure).
type expecter struct{ n, busy, bytes atomic.Int64 }

func (e *expecter) Expect(tasks []*task.Task, _ time.Time) { e.n.Add(int64(len(tasks))) }
func (e *expecter) Busy() int64                            { return e.busy.Load() }
func (e *expecter) HeldBytes() int64                       { return e.bytes.Load() }

type fixture struct {
	st      *sqlstore.Store
	tier    *memory.Tier
	planner *hot.Planner
	send    *sender
	exp     *expecter
	f       *fire.Firer
	ctx     context.Context
}

// maxOutstanding and maxBytes are the backpressure bounds of the
// fixture's firer.
const (
	maxOutstanding = 1000
	maxBytes       = 1 << 20
)

// setup builds a firer whose tasks leave the tier lead before due, wired
// as the node wires it to a memory tier.
func setup(t *testing.T, lead time.Duration) *fixture { return setupWith(t, lead, nil) }

// setupWith is setup with the config changed by mod.
func setupWith(t *testing.T, lead time.Duration, mod func(*fire.Config)) *fixture {
	t.Helper()
	t.Parallel()
	x := &fixture{st: stagetest.Store(t), tier: stagetest.Tier(t), planner: hot.NewPlanner(lead, 0),
		send: &sender{byID: map[string]int{}}, exp: &expecter{}, ctx: context.Background()}
	cfg := fire.Config{Store: x.st, Tier: x.tier, Planner: x.planner, Sender: x.send, Outcomes: x.exp,
		HeldBytes: x.exp.HeldBytes, Drain: x.tier.Drain,
		Workers: 2, MaxLead: lead, DeliveryLease: time.Minute, MaxOutstanding: maxOutstanding, MaxBytes: maxBytes}
	if mod != nil {
		mod(&cfg)
	}
	f, err := fire.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Stop)
	x.f = f
	return x
}

// hold inserts tasks claimed by this node, due at the given times, and puts
// their entries in the tier as the scanner would.
func (x *fixture) hold(t *testing.T, prefix string, dues ...time.Time) []*task.Task {
	t.Helper()
	token := store.NewToken()
	var news []store.NewTask
	for i, due := range dues {
		news = append(news, stagetest.Claimed(stagetest.NewTask(t, "fire", fmt.Sprintf("%s-%d", prefix, i), due), node, token))
	}
	tasks := stagetest.Insert(t, x.st, news...)
	var entries []hot.Entry
	for _, tk := range tasks {
		entries = append(entries, x.planner.Entry(time.Now(), tk.ID, tk.Topic, tk.DueAt, tk.Token))
	}
	if err := x.tier.Add(x.ctx, entries...); err != nil {
		t.Fatal(err)
	}
	return tasks
}

func (x *fixture) start(t *testing.T) {
	t.Helper()
	if err := x.f.Start(x.ctx); err != nil {
		t.Fatal(err)
	}
	stagetest.Done(t, "firer started", x.f.Started())
}

func (x *fixture) tierEmpty(t *testing.T) bool {
	n, err := x.tier.Len(x.ctx)
	if err != nil {
		t.Error(err)
	}
	return n == 0
}

// Claimed tasks due soon are started (running, one attempt) and sent, each
// once and never before its due time; every started task is expected.
func TestSendsAtDueTimeNeverEarly(t *testing.T) {
	x := setup(t, 20*time.Millisecond)
	now := time.Now()
	var dues []time.Time
	for i := range 6 {
		dues = append(dues, now.Add(100*time.Millisecond+time.Duration(i)*40*time.Millisecond))
	}
	dues = append(dues, dues[2]) // two due at one instant
	tasks := x.hold(t, "t", dues...)
	x.start(t)
	stagetest.Eventually(t, "every task sent", func() bool { return len(x.send.sent()) >= len(tasks) })
	stagetest.Eventually(t, "tier empty (entries acked)", func() bool { return x.tierEmpty(t) })
	x.f.Stop()

	got := x.send.sent()
	if len(got) != len(tasks) {
		t.Fatalf("%d tasks sent; want %d", len(got), len(tasks))
	}
	for _, tk := range tasks {
		if n := x.send.times(tk.ID); n != 1 {
			t.Fatalf("task %s sent %d times", tk.ID, n)
		}
	}
	for _, s := range got {
		if s.at.Before(s.task.DueAt) {
			t.Errorf("task %s sent %s before its due time", s.task.ID, s.task.DueAt.Sub(s.at))
		}
		if s.task.Status != task.StatusRunning || s.task.Attempts != 1 {
			t.Errorf("task %s sent as %s attempt %d; want running, attempt 1", s.task.ID, s.task.Status, s.task.Attempts)
		}
		row := stagetest.Get(t, x.st, s.task.ID)
		if row.Status != task.StatusRunning || row.Attempts != 1 || row.Token != s.task.Token {
			t.Errorf("row %s: %s, attempts %d, token %d; want running, 1, %d", row.ID, row.Status, row.Attempts, row.Token, s.task.Token)
		}
		if !row.LeaseUntil.After(row.DueAt.Add(30 * time.Second)) {
			t.Errorf("row %s: running lease until %s does not cover the delivery", row.ID, row.LeaseUntil)
		}
	}
	if n := x.exp.n.Load(); n != int64(len(tasks)) {
		t.Fatalf("expected %d outcomes; %d tasks started", n, len(tasks))
	}
}

// A task cancelled after it entered the tier loses its Start: it is not
// sent nor expected, and its row is left as it was. An entry under a token
// its row no longer has loses its Start too, and is not sent under it; the
// row's live claim, whose entry it replaced (a late Add), gets its entry
// back and is started once, under the row's token.
func TestLosersOfStartAreNotSent(t *testing.T) {
	x := setup(t, 20*time.Millisecond)
	now := time.Now()
	tasks := x.hold(t, "t", now.Add(150*time.Millisecond), now.Add(200*time.Millisecond), now.Add(300*time.Millisecond))
	cancelled, stale, control := tasks[0], tasks[1], tasks[2]
	if _, err := x.st.Cancel(x.ctx, cancelled.ID); err != nil {
		t.Fatal(err)
	}
	// The stale entry carries a token the row no longer has.
	if err := x.tier.Remove(x.ctx, hot.Entry{ID: stale.ID, Topic: stale.Topic}); err != nil {
		t.Fatal(err)
	}
	if err := x.tier.Add(x.ctx, x.planner.Entry(time.Now(), stale.ID, stale.Topic, stale.DueAt, stale.Token+1)); err != nil {
		t.Fatal(err)
	}
	x.start(t)
	stagetest.Eventually(t, "control task sent", func() bool { return x.send.times(control.ID) == 1 })
	stagetest.Eventually(t, "live claim of the stale entry's task sent", func() bool { return x.send.times(stale.ID) == 1 })
	stagetest.Eventually(t, "tier empty (every entry popped and acked)", func() bool { return x.tierEmpty(t) })
	x.f.Stop()
	if n := x.send.times(cancelled.ID); n != 0 {
		t.Fatalf("cancelled task sent %d times", n)
	}
	if n := x.send.times(stale.ID); n != 1 {
		t.Fatalf("task of the stale entry sent %d times; want once", n)
	}
	for _, s := range x.send.sent() {
		if s.task.ID == stale.ID && s.task.Token != stale.Token {
			t.Fatalf("task of the stale entry sent under token %d; want the row's %d", s.task.Token, stale.Token)
		}
	}
	if row := stagetest.Get(t, x.st, cancelled.ID); row.Status != task.StatusCancelled || row.Attempts != 0 {
		t.Fatalf("cancelled row is %s with %d attempts", row.Status, row.Attempts)
	}
	if row := stagetest.Get(t, x.st, stale.ID); row.Status != task.StatusRunning || row.Token != stale.Token || row.Attempts != 1 {
		t.Fatalf("row of the stale entry is %s, token %d, %d attempts; want running under its claim's token, attempt 1", row.Status, row.Token, row.Attempts)
	}
	if n := x.exp.n.Load(); n != 2 {
		t.Fatalf("expected %d outcomes; want 2 (the control task and the live claim)", n)
	}
}

// Stop waits for a started task to be sent at its due time, then hands the
// entries still waiting in the memory tier back to the store: their rows
// are pending again, unowned, and were never sent.
func TestStopReleasesHeldEntries(t *testing.T) {
	// A long lead, so that the soon task is started well before it is due
	// and Stop comes while it waits.
	const lead = 500 * time.Millisecond
	x := setup(t, lead)
	soon := x.hold(t, "soon", time.Now().Add(time.Second))[0]
	far := x.hold(t, "far", time.Now().Add(time.Hour), time.Now().Add(2*time.Hour), time.Now().Add(3*time.Hour))
	x.start(t)
	stagetest.StatusIs(t, x.st, soon.ID, task.StatusRunning)

	x.f.Stop()
	if n := x.send.times(soon.ID); n != 1 {
		t.Fatalf("started task sent %d times when Stop returned; Stop must wait for it", n)
	}
	if s := x.send.sent()[0]; s.at.Before(s.task.DueAt) {
		t.Fatalf("started task sent %s early on Stop", s.task.DueAt.Sub(s.at))
	}
	if n := len(x.send.sent()); n != 1 {
		t.Fatalf("%d tasks sent; want only the one due", n)
	}
	for _, tk := range far {
		row := stagetest.Get(t, x.st, tk.ID)
		if row.Status != task.StatusPending || row.Owner != "" || row.Token != 0 || row.Attempts != 0 {
			t.Fatalf("held row after Stop: %s, owner %q, token %d, attempts %d; want pending, released", row.Status, row.Owner, row.Token, row.Attempts)
		}
	}
	if !x.tierEmpty(t) {
		t.Fatal("tier still holds entries after Stop")
	}
	if n := x.exp.n.Load(); n != 1 {
		t.Fatalf("expected %d outcomes; want 1", n)
	}
}

// Without Drain (a tier shared with other nodes, Redis), Stop leaves the
// entries waiting in the tier and their rows claimed: they outlive this
// process, and the claims' leases bound how long they wait.
func TestStopWithoutDrainLeavesEntries(t *testing.T) {
	x := setupWith(t, 20*time.Millisecond, func(c *fire.Config) { c.Drain = nil })
	far := x.hold(t, "far", time.Now().Add(time.Hour), time.Now().Add(2*time.Hour))
	x.start(t)
	x.f.Stop()
	for _, tk := range far {
		if row := stagetest.Get(t, x.st, tk.ID); row.Status != task.StatusClaimed || row.Owner != node || row.Token != tk.Token {
			t.Fatalf("row after Stop: %s, owner %q, token %d; want still claimed by %s under token %d", row.Status, row.Owner, row.Token, node, tk.Token)
		}
	}
	if n, err := x.tier.Len(x.ctx); err != nil || n != len(far) {
		t.Fatalf("tier holds %d entries after Stop (err %v); want %d", n, err, len(far))
	}
}

// Backpressure: while as many started tasks as MaxOutstanding await their
// outcome, or their payloads not delivered yet add up to MaxBytes, nothing
// more is started (the due tasks stay claimed in the tier); once outcomes
// come in, they are started and sent.
func TestBackpressureHoldsFiring(t *testing.T) {
	for name, full := range map[string]int64{"tasks": maxOutstanding, "bytes": maxBytes} {
		t.Run(name, func(t *testing.T) {
			x := setup(t, 20*time.Millisecond)
			v := &x.exp.busy // what the expecter answers Busy, or HeldBytes
			if name == "bytes" {
				v = &x.exp.bytes
			}
			v.Store(full)
			tasks := x.hold(t, "bp", time.Now().Add(50*time.Millisecond), time.Now().Add(60*time.Millisecond))
			x.start(t)
			time.Sleep(500 * time.Millisecond) // well past their due times
			if got := len(x.send.sent()); got != 0 {
				t.Fatalf("%d tasks sent while the completion stage was full", got)
			}
			for _, tk := range tasks {
				if got := stagetest.Get(t, x.st, tk.ID).Status; got != task.StatusClaimed {
					t.Fatalf("task %s is %s while firing is held back; want claimed", tk.ID, got)
				}
			}
			v.Store(full - 1)
			stagetest.Eventually(t, "tasks sent once outcomes came in", func() bool { return len(x.send.sent()) == len(tasks) })
		})
	}
}
