package scanjob

import (
	"context"
	"errors"
	"github.com/ontimehq/ontime/internal/store"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/ontimehq/ontime/internal/cronspec"
	"github.com/ontimehq/ontime/internal/metrics"
)

// base is a minute's start; the tests' clocks start at base+5s and their
// jobs fire every 10 seconds ("*/10 * * * * *"), at base+10s, +20s, …
var base = time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC)

func sec(n int) time.Time { return base.Add(time.Duration(n) * time.Second) }

const every10s = "*/10 * * * * *"

// never fires while a test runs.
const never = "0 0 0 1 1 *"

// newService builds a service on st and clk with the tests' defaults.
func newService(t *testing.T, st State, clk Clock, node string, mod func(*Config)) *Service {
	t.Helper()
	cfg := Config{State: st, NodeID: node, Clock: clk, Handover: 5 * time.Second, Poll: time.Second, Retention: 24 * time.Hour}
	if mod != nil {
		mod(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// start starts s until the test ends. Stop waits for the runs, and their
// hand-over grace is on the test's clock: a test that passed ended its
// runs; one that failed may not have, so the clock runs their grace out.
func start(t *testing.T, s *Service) {
	t.Helper()
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stopped := make(chan struct{})
		go func() { s.Stop(); close(stopped) }()
		fc, _ := s.cfg.Clock.(*FakeClock)
		for {
			select {
			case <-stopped:
				return
			case <-time.After(10 * time.Millisecond):
				if fc != nil && t.Failed() {
					fc.Advance(s.cfg.Handover)
				}
			}
		}
	})
}

// waitIdle waits until no item of s runs or looks.
func waitIdle(t *testing.T, s *Service) {
	t.Helper()
	WaitUntil(t, "the service to run nothing", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.running) == 0
	})
}

// runNow runs one item of a service that was not started, and waits.
func runNow(s *Service, job, item, trig string, fireAt time.Time) {
	s.trigger(context.Background(), s.jobs[job], item, trig, fireAt)
	s.wg.Wait()
}

// itemRun is the run of an item in progress.
func itemRun(s *Service, job, item string) *ItemRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running[job+":"+item]
}

// seedRun records that node "old" ran an item for fire time fire.
func seedRun(t *testing.T, st State, job, item string, fire time.Time) {
	t.Helper()
	ctx := context.Background()
	if _, err := st.TakeItem(ctx, job, item, "old", 1, fire); err != nil {
		t.Fatal(err)
	}
	r := &store.JobRun{ID: "seed-" + item, Job: job, Item: item, Node: "old", Trigger: "cron", FireAt: fire, StartedAt: fire, Status: store.RunRunning}
	if held, err := st.StartRun(ctx, r, 1); err != nil || !held {
		t.Fatalf("seed run: %v %v", held, err)
	}
	r.Status, r.EndedAt = store.RunDone, fire
	if held, err := st.SaveRun(ctx, r, 1, true); err != nil || !held {
		t.Fatalf("seed run: %v %v", held, err)
	}
}

// call is what a Go job's store.JobRun saw of its run.
type call struct {
	node, item, param, trigger, cursor string
	total                              int
	fireAt                             time.Time
}

type recorder struct {
	mu    sync.Mutex
	calls []call
}

func (rc *recorder) add(r *ItemRun) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.calls = append(rc.calls, call{node: r.svc.cfg.NodeID, item: r.Item(), param: r.Param(), total: r.Total(),
		trigger: r.run.Trigger, cursor: r.run.Cursor, fireAt: r.run.FireAt})
}

func (rc *recorder) list() []call {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := slices.Clone(rc.calls)
	slices.SortFunc(out, func(a, b call) int {
		if c := a.fireAt.Compare(b.fireAt); c != 0 {
			return c
		}
		return strings.Compare(a.item, b.item)
	})
	return out
}

func mustCron(t *testing.T, expr, tz string) cronspec.Spec {
	t.Helper()
	cs, err := cronspec.Parse(expr, tz)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func addGo(t *testing.T, s *Service, g GoJob) {
	t.Helper()
	if err := s.AddGo(g); err != nil {
		t.Fatal(err)
	}
}

// TestLastMissed: the latest fire time in (last, now] — the one a
// fire_once misfire runs — across cron forms and a DST change.
func TestLastMissed(t *testing.T) {
	t.Parallel()
	berlin := func(s string) time.Time {
		loc, err := time.LoadLocation("Europe/Berlin")
		if err != nil {
			t.Fatal(err)
		}
		v, err := time.ParseInLocation("2006-01-02 15:04:05", s, loc)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct {
		name, cron, tz  string
		last, now, want time.Time
	}{
		{"never fired: nothing known", every10s, "", time.Time{}, sec(47), time.Time{}},
		{"no fire time since", every10s, "", sec(10), sec(19), time.Time{}},
		{"a fire time at now counts", every10s, "", sec(10), sec(20), sec(20)},
		{"the latest of several", every10s, "", sec(10), sec(47), sec(40)},
		{"@every", "@every 1h", "", base.Truncate(time.Hour), base.Add(5 * time.Hour), base.Truncate(time.Hour).Add(5 * time.Hour)},
		{"local 09:00 over the spring DST change", "0 0 9 * * *", "Europe/Berlin",
			berlin("2030-03-30 09:00:00"), berlin("2030-04-01 12:00:00"), berlin("2030-04-01 09:00:00")},
		{"no fire time exists", "0 0 0 30 2 *", "", sec(10), sec(10).AddDate(1, 0, 0), time.Time{}},
	} {
		cs := mustCron(t, c.cron, c.tz)
		got := (&job{cron: cs}).lastMissed(c.last, c.now)
		if !got.Equal(c.want) {
			t.Errorf("%s: lastMissed(%v, %v) = %v, want %v", c.name, c.last, c.now, got, c.want)
		}
	}
	// A missed morning in Berlin is 08:00 UTC in winter, 07:00 in summer.
	if got := berlin("2030-04-01 09:00:00").UTC().Hour(); got != 7 {
		t.Fatalf("09:00 CEST is %d:00 UTC", got)
	}
}

// TestCronFiresOwnedItems: the loop runs the owned items at each fire
// time (trigger cron, fire_at the fire time), leaves the others alone; a
// loop that wakes late fires once, for the time it waited for, and then
// waits for the next fire time after now. Items that never fired are
// only looked at when taken.
func TestCronFiresOwnedItems(t *testing.T) {
	t.Parallel()
	st, clk := newMemState(), NewFakeClock(sec(5))
	s := newService(t, st, clk, "n1", nil)
	var rc recorder
	addGo(t, s, GoJob{Name: "tick", Cron: every10s, Items: 3, ItemParams: []string{"a", "b"},
		Run: func(_ context.Context, r *ItemRun) error { rc.add(r); return nil }})
	// Task items and unknown jobs' items are not the service's.
	s.SetOwned([]string{ItemKey("tick", "0"), ItemKey("tick", "2"), "0.1.2", ItemKey("other", "0")})
	start(t, s)
	waitIdle(t, s)
	if runs := st.allRuns("tick"); len(runs) != 0 {
		t.Fatalf("taking items that never fired ran them: %+v", runs)
	}
	if a, b := st.item("tick", "0"), st.item("tick", "1"); a.Owner != "n1" || b.Owner != "" {
		t.Fatalf("after the looks: item 0 %+v, item 1 %+v", a, b)
	}

	clk.WaitTimer(t, sec(10))
	clk.AdvanceTo(sec(10))
	WaitUntil(t, "the 03:04:10 runs", func() bool { return len(rc.list()) == 2 })
	clk.WaitTimer(t, sec(20))
	waitIdle(t, s)
	want := []call{
		{node: "n1", item: "0", param: "a", trigger: "cron", total: 3, fireAt: sec(10)},
		{node: "n1", item: "2", param: "", trigger: "cron", total: 3, fireAt: sec(10)},
	}
	if got := rc.list(); !slices.Equal(got, want) {
		t.Fatalf("calls\n got %+v\nwant %+v", got, want)
	}
	for _, r := range st.allRuns("tick") {
		if r.Status != store.RunDone || r.Trigger != "cron" || !r.FireAt.Equal(sec(10)) || !r.StartedAt.Equal(sec(10)) ||
			!r.EndedAt.Equal(sec(10)) || r.Node != "n1" || r.Cursor != "" {
			t.Errorf("run %+v", r)
		}
	}
	if it := st.item("tick", "2"); !it.LastFire.Equal(sec(10)) || it.RunID != "" {
		t.Errorf("item 2 after its run: %+v", it)
	}

	// Woken 25 s late: one run per item for 03:04:20, then the timer
	// waits for 03:04:50, the next fire time after now.
	clk.AdvanceTo(sec(45))
	clk.WaitTimer(t, sec(50))
	waitIdle(t, s)
	got := rc.list()
	if len(got) != 4 || got[2].fireAt != sec(20) || got[3].fireAt != sec(20) || got[2].trigger != "cron" {
		t.Fatalf("late wake-up ran %+v", got)
	}
	if runs := st.allRuns("tick"); len(runs) != 4 || !runs[3].StartedAt.Equal(sec(45)) {
		t.Fatalf("runs %+v", runs)
	}
}

// TestMisfirePolicy: a node that takes an item whose fire times went by
// with no node up runs it once for the latest of them (fire_once) or not
// at all (skip); an item that ran at the latest fire time is not run
// again. Either way the next fire time runs as usual.
func TestMisfirePolicy(t *testing.T) {
	t.Parallel()
	for _, policy := range []string{"fire_once", "skip"} {
		t.Run(policy, func(t *testing.T) {
			t.Parallel()
			st, clk := newMemState(), NewFakeClock(sec(47))
			seedRun(t, st, "tick", "0", sec(10)) // missed 20, 30, 40
			seedRun(t, st, "tick", "1", sec(40)) // missed nothing
			s := newService(t, st, clk, "n1", nil)
			var rc recorder
			addGo(t, s, GoJob{Name: "tick", Cron: every10s, Misfire: policy, Items: 2,
				Run: func(_ context.Context, r *ItemRun) error { rc.add(r); return nil }})
			s.OwnAll()
			start(t, s)
			waitIdle(t, s)
			var want []call
			if policy == "fire_once" {
				want = []call{{node: "n1", item: "0", trigger: "misfire", total: 2, fireAt: sec(40)}}
			}
			if got := rc.list(); !slices.Equal(got, want) {
				t.Fatalf("after the take\n got %+v\nwant %+v", got, want)
			}
			wantLast := sec(40)
			if policy == "skip" {
				wantLast = sec(10)
			}
			if it := st.item("tick", "0"); !it.LastFire.Equal(wantLast) || it.Owner != "n1" {
				t.Fatalf("item 0: %+v, want last fire %v", it, wantLast)
			}
			if policy == "fire_once" {
				r := st.allRuns("tick")[2]
				if r.Trigger != "misfire" || !r.FireAt.Equal(sec(40)) || !r.StartedAt.Equal(sec(47)) || r.Status != store.RunDone {
					t.Fatalf("misfire run %+v", r)
				}
			}

			clk.WaitTimer(t, sec(50))
			clk.AdvanceTo(sec(50))
			clk.WaitTimer(t, sec(60))
			waitIdle(t, s)
			n := 0
			for _, c := range rc.list() {
				if c.trigger == "cron" && c.fireAt.Equal(sec(50)) {
					n++
				}
			}
			if n != 2 {
				t.Fatalf("03:04:50 ran %d items, want 2: %+v", n, rc.list())
			}
		})
	}
}

// TestMisfireItemThatNeverFired: issue 25 item 9. Node n1 takes an item
// that never fired and gives it up before its first fire time (the
// coordinator moves it to n2, which gets it after the hand-over delay);
// the fire time between goes by on neither node. n2 runs it once under
// fire_once, and not under skip: the item's first take (its row's
// created_at) bounds the fire times it missed, as its last fire time
// does once it fired. Either way the next fire time runs on n2.
func TestMisfireItemThatNeverFired(t *testing.T) {
	t.Parallel()
	for _, policy := range []string{"fire_once", "skip"} {
		t.Run(policy, func(t *testing.T) {
			t.Parallel()
			st, clk := newMemState(), NewFakeClock(sec(5))
			var rc recorder
			job := GoJob{Name: "tick", Cron: every10s, Misfire: policy, Items: 1, Run: func(_ context.Context, r *ItemRun) error { rc.add(r); return nil }}
			n1 := newService(t, st, clk, "n1", nil)
			addGo(t, n1, job)
			n1.OwnAll()
			start(t, n1)
			waitIdle(t, n1)
			if it := st.item("tick", "0"); !it.Created.Equal(sec(5)) || !it.LastFire.IsZero() {
				t.Fatalf("item after n1's look: %+v", it)
			}
			n1.SetOwned(nil) // the item moves at 03:04:08
			clk.AdvanceTo(sec(8))
			clk.WaitTimer(t, sec(10))
			clk.AdvanceTo(sec(13)) // 03:04:10 fires on n1, which owns nothing
			clk.WaitTimer(t, sec(20))
			n1.Stop() // so that the timer for 03:04:20 waited for below is n2's
			n2 := newService(t, st, clk, "n2", nil)
			addGo(t, n2, job)
			n2.OwnAll()
			start(t, n2)
			waitIdle(t, n2)
			var want []call
			if policy == "fire_once" {
				want = []call{{node: "n2", item: "0", trigger: "misfire", total: 1, fireAt: sec(10)}}
			}
			if got := rc.list(); !slices.Equal(got, want) {
				t.Fatalf("the 03:04:10 fire time: got %+v, want %+v", got, want)
			}
			clk.WaitTimer(t, sec(20))
			clk.AdvanceTo(sec(20))
			WaitUntil(t, "the 03:04:20 run", func() bool { return len(rc.list()) == len(want)+1 })
			waitIdle(t, n2)
			if got := rc.list()[len(want)]; got.node != "n2" || got.trigger != "cron" || !got.fireAt.Equal(sec(20)) {
				t.Fatalf("the 03:04:20 fire time ran %+v", got)
			}
		})
	}
}

// TestNewJobMissesNothingBefore: the items of a job that no node held
// before are first taken at 03:04:47 (the coordinator handed them out
// late); the fire times before (03:04:00 … 03:04:40) are from before the
// job had them, and no misfire runs for them.
func TestNewJobMissesNothingBefore(t *testing.T) {
	t.Parallel()
	st, clk := newMemState(), NewFakeClock(sec(47))
	s := newService(t, st, clk, "n1", nil)
	var rc recorder
	addGo(t, s, GoJob{Name: "tick", Cron: every10s, Items: 2, Run: func(_ context.Context, r *ItemRun) error { rc.add(r); return nil }})
	s.OwnAll()
	start(t, s)
	waitIdle(t, s)
	if got := rc.list(); len(got) != 0 {
		t.Fatalf("a brand-new job ran %+v", got)
	}
	for _, it := range []string{"0", "1"} {
		if st := st.item("tick", it); st.Owner != "n1" || !st.Created.Equal(sec(47)) {
			t.Fatalf("item %s: %+v", it, st)
		}
	}
}

// TestHandoverGrace: a run whose item went to another node is told to
// stop at once and cancelled only after Config.Handover: its page may
// finish meanwhile. Cancelled, it ends "moved" and stays the item's
// unfinished run, for the next holder to resume.
func TestHandoverGrace(t *testing.T) {
	t.Parallel()
	st, clk := newMemState(), NewFakeClock(sec(5))
	s := newService(t, st, clk, "n1", func(c *Config) { c.Handover = 5 * time.Second })
	ctxs := make(chan context.Context, 1)
	addGo(t, s, GoJob{Name: "slow", Cron: never, Run: func(ctx context.Context, r *ItemRun) error {
		ctxs <- ctx
		<-ctx.Done() // a page that ignores Stopping
		if !r.Stopping() {
			return errors.New("cancelled without being told to stop")
		}
		return ctx.Err()
	}})
	s.OwnAll()
	start(t, s)
	waitIdle(t, s)
	if err := st.RequestTrigger(context.Background(), "slow"); err != nil {
		t.Fatal(err)
	}
	s.Kick()
	runCtx := <-ctxs
	ir := itemRun(s, "slow", "0")
	s.SetOwned(nil)
	if !ir.Stopping() {
		t.Fatal("a run whose item moved is not told to stop")
	}
	clk.Advance(5*time.Second - time.Millisecond)
	if runCtx.Err() != nil {
		t.Fatal("the run was cancelled before the hand-over grace ran out")
	}
	clk.Advance(time.Millisecond)
	<-runCtx.Done()
	waitIdle(t, s)
	runs := st.allRuns("slow")
	if len(runs) != 1 {
		t.Fatalf("runs %+v", runs)
	}
	r := runs[0]
	if r.Trigger != "manual" || !r.FireAt.Equal(sec(5)) || r.Status != store.RunMoved || r.Error != context.Canceled.Error() || !r.EndedAt.Equal(sec(10)) {
		t.Fatalf("run %+v", r)
	}
	if it := st.item("slow", "0"); it.RunID != r.ID {
		t.Fatalf("the moved run is not the item's unfinished run: %+v", it)
	}
}

// pager is a Go job over "rows" 1…rows whose cursor is the last row
// done; it pages one row per step sent, and ends its run when told to
// stop after a page, as Dataflow does.
type pager struct {
	rows int
	step chan struct{}
	rc   recorder
}

func (p *pager) run(ctx context.Context, r *ItemRun) error {
	p.rc.add(r)
	n, _ := strconv.Atoi(r.run.Cursor)
	for n < p.rows {
		select {
		case <-p.step:
		case <-ctx.Done():
			return ctx.Err()
		}
		if r.Stopping() {
			return nil
		}
		n++
		if err := r.Page(ctx, strconv.Itoa(n), 1, 1, 0, 0); err != nil {
			return err
		}
	}
	return nil
}

// TestMovedRunResumesOnNextHolder: a run told to stop after its page
// ends "moved" with its cursor; the next holder of the item resumes it
// from that cursor (trigger resume, the original fire time) and finishes.
func TestMovedRunResumesOnNextHolder(t *testing.T) {
	t.Parallel()
	st, clk := newMemState(), NewFakeClock(sec(5))
	p := &pager{rows: 3, step: make(chan struct{})}
	job := GoJob{Name: "walk", Cron: every10s, Run: p.run}
	n1 := newService(t, st, clk, "n1", nil)
	addGo(t, n1, job)
	n1.OwnAll()
	start(t, n1)
	waitIdle(t, n1)
	clk.WaitTimer(t, sec(10))
	clk.AdvanceTo(sec(10))
	p.step <- struct{}{}
	WaitUntil(t, "page 1 saved", func() bool { return st.item("walk", "0").Cursor == "1" })
	n1.SetOwned(nil)
	p.step <- struct{}{} // the run sees it must stop
	waitIdle(t, n1)
	r1 := st.allRuns("walk")[0]
	if r1.Status != store.RunMoved || r1.Cursor != "1" || r1.Processed != 1 || r1.Error != "" {
		t.Fatalf("moved run %+v", r1)
	}

	n2 := newService(t, st, clk, "n2", nil)
	addGo(t, n2, job)
	n2.OwnAll()
	start(t, n2)
	p.step <- struct{}{}
	p.step <- struct{}{}
	waitIdle(t, n2)
	want := []call{
		{node: "n1", item: "0", trigger: "cron", total: 1, fireAt: sec(10)},
		{node: "n2", item: "0", trigger: "resume", cursor: "1", total: 1, fireAt: sec(10)},
	}
	if got := p.rc.list(); !slices.Equal(got, want) {
		t.Fatalf("calls\n got %+v\nwant %+v", got, want)
	}
	runs := st.allRuns("walk")
	if len(runs) != 2 {
		t.Fatalf("runs %+v", runs)
	}
	if runs[0].Node == "n2" {
		runs[0], runs[1] = runs[1], runs[0] // both started at 03:04:10
	}
	if r1, r2 := runs[0], runs[1]; r1.Status != store.RunMoved || r2.Status != store.RunDone || r2.Node != "n2" || r2.Processed != 2 || r2.Cursor != "" {
		t.Fatalf("runs %+v", runs)
	}
	if it := st.item("walk", "0"); it.RunID != "" || it.Cursor != "" || it.Owner != "n2" {
		t.Fatalf("item %+v", it)
	}
}

// TestPauseStopsAfterPageAndResumes: pausing stops a running item after
// its page (status paused, cursor kept); a paused job's fire times and
// :trigger requests run nothing; resumed, the next :trigger carries the
// run on from its cursor.
func TestPauseStopsAfterPageAndResumes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, clk := newMemState(), NewFakeClock(sec(5))
	p := &pager{rows: 3, step: make(chan struct{})}
	s := newService(t, st, clk, "n1", nil)
	addGo(t, s, GoJob{Name: "walk", Cron: every10s, Run: p.run})
	s.OwnAll()
	start(t, s)
	waitIdle(t, s)
	if err := st.RequestTrigger(ctx, "walk"); err != nil {
		t.Fatal(err)
	}
	s.Kick()
	p.step <- struct{}{}
	WaitUntil(t, "page 1 saved", func() bool { return st.item("walk", "0").Cursor == "1" })
	ir := itemRun(s, "walk", "0")
	if err := st.SetPaused(ctx, "walk", true); err != nil {
		t.Fatal(err)
	}
	s.Kick()
	WaitUntil(t, "the pause to reach the run", ir.Stopping)
	p.step <- struct{}{}
	waitIdle(t, s)
	if r := st.allRuns("walk")[0]; r.Status != store.RunPaused || r.Cursor != "1" || r.Trigger != "manual" {
		t.Fatalf("paused run %+v", r)
	}

	// Paused: the fire time and a :trigger run nothing.
	clk.WaitTimer(t, sec(10))
	clk.AdvanceTo(sec(10))
	clk.WaitTimer(t, sec(20))
	reads := st.reads()
	if err := st.RequestTrigger(ctx, "walk"); err != nil {
		t.Fatal(err)
	}
	s.Kick()
	WaitUntil(t, "the flags read", func() bool { return st.reads() > reads })
	// The next poll's read comes after the kick's triggers were judged.
	reads = st.reads()
	clk.Advance(time.Second)
	WaitUntil(t, "a poll", func() bool { return st.reads() > reads })
	waitIdle(t, s)
	if n := len(st.allRuns("walk")); n != 1 {
		t.Fatalf("a paused job ran: %d runs", n)
	}

	if err := st.SetPaused(ctx, "walk", false); err != nil {
		t.Fatal(err)
	}
	if err := st.RequestTrigger(ctx, "walk"); err != nil {
		t.Fatal(err)
	}
	s.Kick()
	p.step <- struct{}{}
	p.step <- struct{}{}
	waitIdle(t, s)
	got := p.rc.list()
	if len(got) != 2 || got[1].trigger != "resume" || got[1].cursor != "1" || !got[1].fireAt.Equal(sec(11)) {
		t.Fatalf("calls %+v", got)
	}
	if it := st.item("walk", "0"); it.RunID != "" || it.Cursor != "" {
		t.Fatalf("item after the resumed run: %+v", it)
	}
}

// TestStaleTokenStopsRun: once another node took the item, the run's
// next page is refused (ErrLost), the run stops, and it writes nothing
// more: the new holder's row and the run marked lost stay as they are.
func TestStaleTokenStopsRun(t *testing.T) {
	t.Parallel()
	st, clk := newMemState(), NewFakeClock(sec(5))
	s := newService(t, st, clk, "n1", nil)
	var second error
	addGo(t, s, GoJob{Name: "fenced", Cron: never, Run: func(ctx context.Context, r *ItemRun) error {
		if err := r.Page(ctx, "1", 1, 1, 0, 0); err != nil {
			return err
		}
		// Node n2 takes the item (n1 was thought dead).
		if _, err := st.TakeItem(ctx, "fenced", "0", "n2", 777, sec(6)); err != nil {
			return err
		}
		second = r.Page(ctx, "2", 1, 1, 0, 0)
		return second
	}})
	runNow(s, "fenced", "0", "manual", sec(5))
	if !errors.Is(second, ErrLost) {
		t.Fatalf("the page after the take: %v, want ErrLost", second)
	}
	runs := st.allRuns("fenced")
	if len(runs) != 1 {
		t.Fatalf("runs %+v", runs)
	}
	if r := runs[0]; r.Status != store.RunLost || !r.EndedAt.Equal(sec(6)) || r.Cursor != "1" || r.Processed != 1 || r.Error != "" {
		t.Fatalf("the stale run was written after the take: %+v", r)
	}
	if it := st.item("fenced", "0"); it.Owner != "n2" || it.Token != 777 || it.RunID != runs[0].ID || it.Cursor != "1" {
		t.Fatalf("item %+v", it)
	}
}

// TestRetentionDeletesOldRuns: on the first poll and then at most once a
// minute, runs that ended more than Retention ago are deleted.
func TestRetentionDeletesOldRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := sec(5)
	st, clk := newMemState(), NewFakeClock(now)
	for i, ended := range []time.Time{now.Add(-25 * time.Hour), now.Add(-23 * time.Hour), {}} {
		id := strconv.Itoa(i)
		if _, err := st.TakeItem(ctx, "old", id, "n0", 1, now); err != nil {
			t.Fatal(err)
		}
		r := &store.JobRun{ID: "r" + id, Job: "old", Item: id, StartedAt: now.Add(-26 * time.Hour), Status: store.RunRunning}
		if _, err := st.StartRun(ctx, r, 1); err != nil {
			t.Fatal(err)
		}
		if !ended.IsZero() {
			r.Status, r.EndedAt = store.RunDone, ended
			if _, err := st.SaveRun(ctx, r, 1, true); err != nil {
				t.Fatal(err)
			}
		}
	}
	s := newService(t, st, clk, "n1", func(c *Config) { c.Retention = 24 * time.Hour })
	addGo(t, s, GoJob{Name: "idle", Cron: never, Run: func(context.Context, *ItemRun) error { return nil }})
	start(t, s)
	clk.WaitTicker(t)

	// poll advances the clock by one poll and waits until the loop has
	// read the flags for it (it then goes on to the retention check).
	poll := func(d time.Duration) {
		reads := st.reads()
		clk.Advance(d)
		WaitUntil(t, "a poll", func() bool { return st.reads() > reads })
	}
	poll(time.Second)
	WaitUntil(t, "the first deletion", func() bool { return len(st.deletes()) == 1 })
	if got := st.deletes()[0]; !got.Equal(sec(6).Add(-24 * time.Hour)) {
		t.Fatalf("cutoff %v", got)
	}
	if st.run("r0").ID != "" || st.run("r1").ID == "" || st.run("r2").ID == "" {
		t.Fatalf("after the deletion: r0 %+v r1 %+v r2 %+v", st.run("r0"), st.run("r1"), st.run("r2"))
	}
	poll(time.Second)
	poll(time.Second) // the loop finished the poll before: no deletion then
	if n := len(st.deletes()); n != 1 {
		t.Fatalf("%d deletions within a minute", n)
	}
	poll(time.Minute)
	WaitUntil(t, "the second deletion", func() bool { return len(st.deletes()) == 2 })
	if got := st.deletes()[1]; !got.Equal(sec(68).Add(-24 * time.Hour)) {
		t.Fatalf("second cutoff %v", got)
	}
}

// TestItemLag: ontime_job_item_lag_seconds is how long ago the owned item
// furthest behind last found nothing left (or was taken).
func TestItemLag(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, clk := newMemState(), NewFakeClock(sec(5))
	m := metrics.NewJobs(nil)
	s := newService(t, st, clk, "n1", func(c *Config) { c.Metrics = m })
	addGo(t, s, GoJob{Name: "lag", Cron: never, Items: 2, Run: func(context.Context, *ItemRun) error { return nil }})
	s.OwnAll() // taken at 03:04:05
	start(t, s)
	waitIdle(t, s)
	lag := func() float64 {
		var d dto.Metric
		if err := m.ItemLag.WithLabelValues("lag").Write(&d); err != nil {
			t.Fatal(err)
		}
		return d.GetGauge().GetValue()
	}
	clk.WaitTicker(t)
	clk.Advance(30 * time.Second)
	WaitUntil(t, "lag 30", func() bool { return lag() == 30 })
	if err := st.RequestTrigger(ctx, "lag"); err != nil { // both items catch up at 03:04:35
		t.Fatal(err)
	}
	s.Kick()
	WaitUntil(t, "two runs", func() bool { return len(st.allRuns("lag")) == 2 })
	waitIdle(t, s)
	clk.Advance(5 * time.Second)
	WaitUntil(t, "lag 5", func() bool { return lag() == 5 })
}

// TestAddGoRejects: every bad field of a Go job is refused, named.
func TestAddGoRejects(t *testing.T) {
	t.Parallel()
	ok := func() GoJob {
		return GoJob{Name: "g", Cron: every10s, Items: 2, Run: func(context.Context, *ItemRun) error { return nil }}
	}
	for want, mod := range map[string]func(*GoJob){
		"name":        func(g *GoJob) { g.Name = "a b" },
		"cron":        func(g *GoJob) { g.Cron = "sometimes" },
		"misfire":     func(g *GoJob) { g.Misfire = "later" },
		"overlap":     func(g *GoJob) { g.Overlap = "allow" },
		"items":       func(g *GoJob) { g.Items = -1 },
		"item_params": func(g *GoJob) { g.ItemParams = []string{"a", "b", "c"} },
		"run":         func(g *GoJob) { g.Run = nil },
		"concurrency": func(g *GoJob) { g.Concurrency = MaxConcurrency + 1 },
	} {
		s := newService(t, newMemState(), NewFakeClock(base), "n1", nil)
		g := ok()
		mod(&g)
		err := s.AddGo(g)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), ": "+want+": ") {
			t.Errorf("%s: %v", want, err)
		}
		if s.Len() != 0 {
			t.Errorf("%s: the job was registered", want)
		}
	}
	s := newService(t, newMemState(), NewFakeClock(base), "n1", nil)
	addGo(t, s, ok())
	if err := s.AddGo(ok()); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "registered twice") {
		t.Errorf("duplicate: %v", err)
	}
	g := ok()
	g.Name, g.Items = "one", 0
	addGo(t, s, g)
	if got := s.ItemKeys(); !slices.Equal(got, []string{"job:g:0", "job:g:1", "job:one:0"}) {
		t.Errorf("item keys %v", got)
	}
}

// TestTriggerRequests: a :trigger raised before the node first read the
// flags is an old request and runs nothing; one raised later runs every
// owned item once; one that comes while an item runs is skipped for it.
func TestTriggerRequests(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, clk := newMemState(), NewFakeClock(sec(5))
	m := metrics.NewJobs(nil)
	s := newService(t, st, clk, "n1", func(c *Config) { c.Metrics = m })
	p := &pager{rows: 1, step: make(chan struct{})}
	addGo(t, s, GoJob{Name: "walk", Cron: never, Items: 2, Run: p.run})
	if err := st.RequestTrigger(ctx, "walk"); err != nil {
		t.Fatal(err)
	}
	s.OwnAll()
	start(t, s)
	waitIdle(t, s)
	clk.WaitTicker(t)
	reads := st.reads()
	clk.Advance(time.Second)
	WaitUntil(t, "a poll", func() bool { return st.reads() > reads })
	waitIdle(t, s)
	if n := len(st.allRuns("walk")); n != 0 {
		t.Fatalf("an old :trigger ran %d items", n)
	}

	if err := st.RequestTrigger(ctx, "walk"); err != nil {
		t.Fatal(err)
	}
	s.Kick()
	WaitUntil(t, "both items running", func() bool { return len(st.allRuns("walk")) == 2 })
	skipped := func() float64 {
		var d dto.Metric
		if err := m.Skipped.WithLabelValues("walk").Write(&d); err != nil {
			t.Fatal(err)
		}
		return d.GetCounter().GetValue()
	}
	if err := st.RequestTrigger(ctx, "walk"); err != nil {
		t.Fatal(err)
	}
	s.Kick()
	WaitUntil(t, "the second :trigger skipped on both items", func() bool { return skipped() == 2 })
	p.step <- struct{}{}
	p.step <- struct{}{}
	waitIdle(t, s)
	runs := st.allRuns("walk")
	if len(runs) != 2 || runs[0].Status != store.RunDone || runs[1].Status != store.RunDone || runs[0].Item == runs[1].Item {
		t.Fatalf("runs %+v", runs)
	}
}

// gatedState holds TakeItem until the test opens the gate.
type gatedState struct {
	*memState
	gate chan struct{}
}

func (g *gatedState) TakeItem(ctx context.Context, job, item, node string, token int64, now time.Time) (store.JobItem, error) {
	<-g.gate
	return g.memState.TakeItem(ctx, job, item, node, token, now)
}

// TestTriggerDuringLookIsKept: a trigger that comes while a newly owned
// item is still being looked at (its state not read yet) is taken over by
// the look, which runs it, instead of being skipped as an overlap.
func TestTriggerDuringLookIsKept(t *testing.T) {
	t.Parallel()
	st := &gatedState{memState: newMemState(), gate: make(chan struct{})}
	clk := NewFakeClock(sec(5))
	s := newService(t, st, clk, "n1", nil)
	var rc recorder
	addGo(t, s, GoJob{Name: "tick", Cron: every10s, Run: func(_ context.Context, r *ItemRun) error { rc.add(r); return nil }})
	s.OwnAll()
	start(t, s) // the look waits in TakeItem
	release := sync.OnceFunc(func() { close(st.gate) })
	t.Cleanup(release)
	clk.WaitTimer(t, sec(10))
	clk.AdvanceTo(sec(10))
	WaitUntil(t, "the fire time handed to the look", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		r := s.running["tick:0"]
		return r != nil && r.upgrade == "cron"
	})
	release()
	waitIdle(t, s)
	want := []call{{node: "n1", item: "0", trigger: "cron", total: 1, fireAt: sec(10)}}
	if got := rc.list(); !slices.Equal(got, want) {
		t.Fatalf("calls %+v, want %+v", got, want)
	}
}

// TestTriggerRightAfterALookIsKept: a trigger that comes just after a look
// at a newly owned item decided to run nothing (no fire time missed) runs
// the item: the look had left it free in the same step (before, the item
// stayed "running" until the look's goroutine ended, and such a trigger
// was skipped as an overlap: e2e TestJobTriggerRightAfterStart lost items
// under CI's load).
func TestTriggerRightAfterALookIsKept(t *testing.T) {
	t.Parallel()
	st := newMemState()
	clk := NewFakeClock(sec(5))
	s := newService(t, st, clk, "n1", nil)
	var rc recorder
	addGo(t, s, GoJob{Name: "tick", Cron: "0 0 0 1 1 *", Items: 3, Run: func(_ context.Context, r *ItemRun) error { rc.add(r); return nil }})
	var triggered atomic.Int32
	s.looked = func(item string) {
		triggered.Add(1)
		s.trigger(s.ctx, s.jobs["tick"], item, "manual", clk.Now())
	}
	s.OwnAll()
	start(t, s)
	WaitUntil(t, "every item looked at", func() bool { return triggered.Load() == 3 })
	waitIdle(t, s)
	got := rc.list()
	if len(got) != 3 {
		t.Fatalf("calls %+v, want a manual run of each of the 3 items", got)
	}
	for _, c := range got {
		if c.trigger != "manual" {
			t.Fatalf("calls %+v, want manual runs only", got)
		}
	}
}

// TestLongRunningTriggerNotSkipped: a trigger while an item of a
// LongRunning job runs (an outbox relay's) is not counted as skipped; one
// of an ordinary job in the same passes is.
func TestLongRunningTriggerNotSkipped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, clk := newMemState(), NewFakeClock(sec(5))
	m := metrics.NewJobs(nil)
	s := newService(t, st, clk, "n1", func(c *Config) { c.Metrics = m })
	p := &pager{rows: 1, step: make(chan struct{})}
	lp := &pager{rows: 1, step: make(chan struct{})}
	addGo(t, s, GoJob{Name: "walk", Cron: never, Items: 1, Run: p.run})
	addGo(t, s, GoJob{Name: "relay", Cron: never, Items: 1, Run: lp.run, LongRunning: true})
	s.OwnAll()
	start(t, s)
	waitIdle(t, s)
	skipped := func(job string) float64 {
		var d dto.Metric
		if err := m.Skipped.WithLabelValues(job).Write(&d); err != nil {
			t.Fatal(err)
		}
		return d.GetCounter().GetValue()
	}
	for _, j := range []string{"walk", "relay"} {
		if err := st.RequestTrigger(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	s.Kick()
	WaitUntil(t, "both running", func() bool { return len(st.allRuns("walk")) == 1 && len(st.allRuns("relay")) == 1 })
	// Two more rounds of triggers while both run: the second round's skip
	// of walk comes after the first round was handled for both jobs.
	for round := 1; round <= 2; round++ {
		for _, j := range []string{"walk", "relay"} {
			if err := st.RequestTrigger(ctx, j); err != nil {
				t.Fatal(err)
			}
		}
		s.Kick()
		WaitUntil(t, "walk's trigger skipped", func() bool { return skipped("walk") == float64(round) })
	}
	if n := skipped("relay"); n != 0 {
		t.Fatalf("a long-running job's triggers counted as skipped: %v", n)
	}
	p.step <- struct{}{}
	lp.step <- struct{}{}
	waitIdle(t, s)
}
