package schedule_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ontimehq/ontime/internal/hot"
	"github.com/ontimehq/ontime/internal/hot/memory"
	"github.com/ontimehq/ontime/internal/router"
	"github.com/ontimehq/ontime/internal/schedule"
	"github.com/ontimehq/ontime/internal/stagetest"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/store/sqlstore"
	"github.com/ontimehq/ontime/internal/submit"
	"github.com/ontimehq/ontime/internal/task"
	"github.com/ontimehq/ontime/internal/testdb"
)

// The tests move a clock of their own and call Round, so every answer is
// exact; the store, the submit path and the hot tier are the real ones.

// The SQL store keeps schedules; it cannot say so itself (storage does not
// import the stages it serves).
var _ schedule.Store = (*sqlstore.Store)(nil)

const (
	lookahead = 10 * time.Second
	misfire   = 20 * time.Second
	topic     = "sched.test"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// noNotify: the tests look at rows, not at scanners.
type noNotify struct{}

func (noNotify) Notify(store.Item, time.Time) {}

type fixture struct {
	t     *testing.T
	st    *sqlstore.Store
	clock *clock
	ctx   context.Context
}

// setup opens a fresh store of engine, with the default key hold (a final
// task keeps its key from a new one for 10 minutes); the clock starts an
// hour ahead of real time (so the submit path keeps due times as given),
// on a whole second.
func setup(t *testing.T, engine string) *fixture {
	t.Helper()
	st, err := sqlstore.Open(context.Background(), sqlstore.Config{Driver: engine, DSNs: testdb.DSNs(t, engine, 1),
		Tables: stagetest.Tables, Segments: stagetest.Segments, KeyHold: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &fixture{t: t, st: st, clock: &clock{t: time.Now().Add(time.Hour).Truncate(time.Second).UTC()}, ctx: context.Background()}
}

// service builds a schedule service on f's store with a submit path of
// its own (as one node has); mod adjusts its config.
func (f *fixture) service(node string, mod func(*schedule.Config)) *schedule.Service {
	f.t.Helper()
	tier, err := memory.New(memory.Config{Visibility: time.Minute})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { tier.Close() })
	sub, err := submit.New(submit.Config{Store: f.st, Tier: tier, Planner: hot.NewPlanner(20*time.Millisecond, 0), Notifier: noNotify{},
		Topology: stagetest.Topology, Segments: stagetest.Segments, NodeID: node, Window: time.Second, LeaseTTL: time.Minute})
	if err != nil {
		f.t.Fatal(err)
	}
	sub.SetReady(true)
	cfg := schedule.Config{Store: f.st, Submitter: sub, Lookahead: lookahead, MisfireAfter: misfire, Now: f.clock.Now}
	if mod != nil {
		mod(&cfg)
	}
	svc, err := schedule.New(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	return svc
}

func every(name, d string) store.ScheduleDef {
	return store.ScheduleDef{Name: name, Cron: "@every " + d,
		Task: store.ScheduleTask{Topic: topic, Payload: []byte(`{"v":1}`), Target: "http://127.0.0.1:9/hook", MaxAttempts: 3}}
}

// all returns every task of topic.
func (f *fixture) all() []*task.Task {
	f.t.Helper()
	var out []*task.Task
	after := ""
	for {
		page, err := f.st.List(f.ctx, store.ListFilter{Topic: topic, Limit: 1000, After: after})
		if err != nil {
			f.t.Fatal(err)
		}
		out = append(out, page...)
		if len(page) < 1000 {
			return out
		}
		after = page[len(page)-1].ID
	}
}

// tasks returns the keyed tasks of topic by key: withdrawn ones gave up
// their keys (withdrawn lists them).
func (f *fixture) tasks() map[string]*task.Task {
	f.t.Helper()
	out := map[string]*task.Task{}
	for _, tk := range f.all() {
		if tk.Key == "" {
			continue
		}
		if out[tk.Key] != nil {
			f.t.Fatalf("two tasks with key %s", tk.Key)
		}
		out[tk.Key] = tk
	}
	return out
}

// wantWithdrawn fails unless the tasks of topic without a key (withdrawn
// tasks give theirs up) are exactly one per due time in dues, each
// cancelled with reason and found by its id.
func (f *fixture) wantWithdrawn(what, reason string, dues []time.Time) {
	f.t.Helper()
	var got []time.Time
	for _, tk := range f.all() {
		if tk.Key != "" {
			continue
		}
		if tk.Status != task.StatusCancelled || tk.LastError != reason {
			f.t.Fatalf("%s: task %s without a key: %s, %q; want cancelled, %q", what, tk.ID, tk.Status, tk.LastError, reason)
		}
		if byID, err := f.st.Get(f.ctx, tk.ID); err != nil || byID.Status != task.StatusCancelled {
			f.t.Fatalf("%s: withdrawn task %s by its id: %+v, %v", what, tk.ID, byID, err)
		}
		got = append(got, tk.DueAt)
	}
	slices.SortFunc(got, time.Time.Compare)
	if !slices.EqualFunc(got, dues, time.Time.Equal) {
		f.t.Fatalf("%s: withdrawn tasks due %v\nwant %v", what, got, dues)
	}
}

// dues are the fire times of @every step in (from, to].
func dues(from, to time.Time, step time.Duration) []time.Time {
	var out []time.Time
	for t := from.Truncate(step).Add(step); !t.After(to); t = t.Add(step) {
		out = append(out, t)
	}
	return out
}

// fireKeys are the keys of name's fire times in (from, to] for @every
// step (multiples of step since the epoch).
func fireKeys(name string, from, to time.Time, step time.Duration) []string {
	var keys []string
	for t := from.Truncate(step).Add(step); !t.After(to); t = t.Add(step) {
		keys = append(keys, schedule.Key(name, t))
	}
	return keys
}

func sortedKeys(m map[string]*task.Task) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// wantKeys fails unless the tasks are exactly those keyed keys.
func (f *fixture) wantKeys(what string, keys []string) map[string]*task.Task {
	f.t.Helper()
	got := f.tasks()
	want := slices.Clone(keys)
	slices.Sort(want)
	if g := sortedKeys(got); !slices.Equal(g, want) {
		f.t.Fatalf("%s: tasks %v\nwant %v", what, g, want)
	}
	return got
}

// counter sums the samples of the counter family name in reg.
func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range fams {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

func forEngines(t *testing.T, test func(t *testing.T, engine string)) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			test(t, engine)
		})
	}
}

// TestFireTimesMadeAheadOnce: each fire time within the lookahead becomes
// one task keyed NAME@<fire time>, due at it, carrying the template; a
// round with nothing new writes nothing; the loop is asked back when the
// next fire time comes within the lookahead.
func TestFireTimesMadeAheadOnce(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		f := setup(t, engine)
		svc := f.service("n1", func(c *schedule.Config) { c.Poll = time.Hour }) // Round answers the planned look, not the poll
		t0 := f.clock.Now()
		r, err := svc.Create(f.ctx, every("tick", "1s"))
		if err != nil {
			t.Fatal(err)
		}
		if r.TimeZone != "UTC" || r.Misfire != store.MisfireSkip || !r.Cursor.Equal(t0) {
			t.Fatalf("created %+v", r)
		}
		// The next round: when fire time T0+11s is half a lookahead away, off the whole second.
		if next := svc.Round(f.ctx); !next.Equal(t0.Add(6500 * time.Millisecond)) {
			t.Fatalf("next look at %s, want %s", next, t0.Add(6500*time.Millisecond))
		}
		got := f.wantKeys("first round", fireKeys("tick", t0, t0.Add(lookahead), time.Second))
		for k, tk := range got {
			at, _ := time.Parse(time.RFC3339Nano, strings.TrimPrefix(k, "tick@"))
			if !tk.DueAt.Equal(at) || string(tk.Payload) != `{"v":1}` || tk.Target != "http://127.0.0.1:9/hook" || tk.MaxAttempts != 3 ||
				tk.Status != task.StatusPending {
				t.Fatalf("task %s: %+v", k, tk)
			}
		}
		svc.Round(f.ctx)
		f.wantKeys("second round, same time", fireKeys("tick", t0, t0.Add(lookahead), time.Second))
		f.clock.Add(3 * time.Second)
		if next := svc.Round(f.ctx); !next.Equal(t0.Add(9500 * time.Millisecond)) {
			t.Fatalf("next look at %s, want %s", next, t0.Add(9500*time.Millisecond))
		}
		f.wantKeys("three seconds later", fireKeys("tick", t0, t0.Add(3*time.Second+lookahead), time.Second))
		r, err = svc.Get(f.ctx, "tick")
		if err != nil || !r.Cursor.Equal(t0.Add(13*time.Second)) {
			t.Fatalf("cursor %s (%v), want T0+13s", r.Cursor, err)
		}
	})
}

// TestMisfire: after an hour with no node up, skip makes only the fire
// times younger than the misfire threshold; fire_once also makes one task,
// due at once, keyed by the last missed fire time.
func TestMisfire(t *testing.T) {
	for _, policy := range []store.Misfire{store.MisfireSkip, store.MisfireFireOnce} {
		t.Run(string(policy), func(t *testing.T) {
			forEngines(t, func(t *testing.T, engine string) {
				f := setup(t, engine)
				reg := prometheus.NewRegistry()
				svc := f.service("n1", func(c *schedule.Config) { c.Registerer = reg })
				t0 := f.clock.Now()
				d := every("m", "1s")
				d.Misfire = policy
				if _, err := svc.Create(f.ctx, d); err != nil {
					t.Fatal(err)
				}
				f.clock.Add(time.Hour)
				now := f.clock.Now()
				before := time.Now()
				svc.Round(f.ctx)
				keys := fireKeys("m", now.Add(-misfire), now.Add(lookahead), time.Second)
				lastMissed := schedule.Key("m", now.Add(-misfire))
				if policy == store.MisfireFireOnce {
					keys = append(keys, lastMissed)
				}
				got := f.wantKeys("after an hour down", keys)
				if policy == store.MisfireFireOnce {
					// Due at once: the submit path's now, before the (future) test clock.
					if tk := got[lastMissed]; tk.DueAt.Before(before.Truncate(time.Microsecond)) || !tk.DueAt.Before(t0) {
						t.Fatalf("catch-up task due %s, want now (%s)", tk.DueAt, before)
					}
				}
				if n := counter(t, reg, "ontime_schedule_misfires_total"); n != 1 {
					t.Fatalf("misfires counted %v, want 1", n)
				}
				if n := counter(t, reg, "ontime_schedule_tasks_made_total"); n != float64(len(keys)) {
					t.Fatalf("tasks made counted %v, want %d", n, len(keys))
				}
				r, _ := svc.Get(f.ctx, "m")
				if !r.Cursor.Equal(now.Add(lookahead)) {
					t.Fatalf("cursor %s, want %s", r.Cursor, now.Add(lookahead))
				}
				// Fire times just late (younger than the threshold) are made, not missed.
				f.clock.Add(lookahead + misfire/2)
				now2 := f.clock.Now()
				svc.Round(f.ctx)
				more := fireKeys("m", now.Add(lookahead), now2.Add(lookahead), time.Second)
				f.wantKeys("late but within the threshold", append(keys, more...))
			})
		})
	}
}

// TestPassedFireTimesNotMadeAgain: once a fire time's task is gone (its key
// free again after retention), no node makes it again: the cursor, not the
// key, says it was made.
func TestPassedFireTimesNotMadeAgain(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		f := setup(t, engine)
		a := f.service("n1", nil)
		t0 := f.clock.Now()
		if _, err := a.Create(f.ctx, every("once", "2s")); err != nil {
			t.Fatal(err)
		}
		a.Round(f.ctx)
		f.wantKeys("made", fireKeys("once", t0, t0.Add(lookahead), 2*time.Second))
		lo, hi := schedule.KeyRange("once")
		if n, err := f.st.WithdrawFires(f.ctx, topic, lo, hi, t0.Add(-time.Hour), "gone"); err != nil || n != 5 {
			t.Fatalf("deleting the rows: %d, %v", n, err)
		}
		a.Round(f.ctx)
		f.service("n2", nil).Round(f.ctx)
		f.wantKeys("rows gone, same time, two nodes", nil)
	})
}

// TestTwoNodesRacing: two nodes that both believe they own the schedule
// run their rounds at the same moments; every fire time has exactly one
// task, none is missing, and the cursor only moves forward.
func TestTwoNodesRacing(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		f := setup(t, engine)
		a, b := f.service("n1", nil), f.service("n2", nil)
		t0 := f.clock.Now()
		if _, err := a.Create(f.ctx, every("race", "1s")); err != nil {
			t.Fatal(err)
		}
		last := t0
		for range 30 {
			var wg sync.WaitGroup
			for _, s := range []*schedule.Service{a, b} {
				wg.Go(func() { s.Round(f.ctx) })
			}
			wg.Wait()
			r, err := a.Get(f.ctx, "race")
			if err != nil {
				t.Fatal(err)
			}
			if r.Cursor.Before(last) {
				t.Fatalf("cursor went back from %s to %s", last, r.Cursor)
			}
			last = r.Cursor
			f.clock.Add(time.Second)
		}
		a.Round(f.ctx) // whichever lost the last race catches up
		now := f.clock.Now()
		f.wantKeys("after 30 racing rounds", fireKeys("race", t0, now.Add(lookahead), time.Second))
	})
}

// TestPauseResume: pausing withdraws the tasks made ahead; nothing is made
// while paused; resuming goes on from the next fire time after now, the
// paused period owed nothing. Pause and resume twice change nothing.
func TestPauseResume(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		f := setup(t, engine)
		svc := f.service("n1", nil)
		t0 := f.clock.Now()
		if _, err := svc.Create(f.ctx, every("p", "1s")); err != nil {
			t.Fatal(err)
		}
		svc.Round(f.ctx)
		f.wantKeys("before pause", fireKeys("p", t0, t0.Add(lookahead), time.Second))
		r, err := svc.Pause(f.ctx, "p")
		if err != nil || !r.Paused {
			t.Fatalf("pause: %+v, %v", r, err)
		}
		if again, err := svc.Pause(f.ctx, "p"); err != nil || again.Version != r.Version {
			t.Fatalf("second pause: %+v, %v (want no change)", again, err)
		}
		if !svc.NextFire(r).IsZero() {
			t.Fatal("a paused schedule has a next fire time")
		}
		svc.Round(f.ctx)
		f.wantKeys("paused: tasks ahead withdrawn", nil)
		// Withdrawn, not deleted: cancelled with the reason.
		f.wantWithdrawn("paused", "withdrawn: schedule p paused", dues(t0, t0.Add(lookahead), time.Second))
		f.clock.Add(30 * time.Second)
		svc.Round(f.ctx)
		f.wantKeys("paused for 30s", nil)
		r, err = svc.Resume(f.ctx, "p")
		if err != nil || r.Paused || !r.Cursor.Equal(t0.Add(30*time.Second)) {
			t.Fatalf("resume: %+v, %v", r, err)
		}
		if again, err := svc.Resume(f.ctx, "p"); err != nil || again.Version != r.Version {
			t.Fatalf("second resume: %+v, %v (want no change)", again, err)
		}
		svc.Round(f.ctx)
		now := f.clock.Now()
		f.wantKeys("resumed", fireKeys("p", now, now.Add(lookahead), time.Second))
		f.wantWithdrawn("resumed", "withdrawn: schedule p paused", dues(t0, t0.Add(lookahead), time.Second))
	})
}

// TestPutReplacesTasksNotYetDue: a new definition withdraws the tasks made
// under the old one and makes its own; an identical Put writes nothing.
func TestPutReplacesTasksNotYetDue(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		f := setup(t, engine)
		svc := f.service("n1", nil)
		t0 := f.clock.Now()
		r, created, err := svc.Put(f.ctx, every("put", "1s"))
		if err != nil || !created {
			t.Fatalf("put: %v, created %v", err, created)
		}
		if same, created, err := svc.Put(f.ctx, every("put", "1s")); err != nil || created || same.Version != r.Version {
			t.Fatalf("identical put: %+v, %v, %v", same, created, err)
		}
		svc.Round(f.ctx)
		f.clock.Add(2 * time.Second)
		d := every("put", "2s")
		d.Task.Payload = []byte(`{"v":2}`)
		d.Task.Topic = topic
		if r2, created, err := svc.Put(f.ctx, d); err != nil || created || r2.Version == r.Version || !r2.Cursor.Equal(t0.Add(lookahead)) {
			t.Fatalf("replace: %+v, %v, %v", r2, created, err)
		}
		svc.Round(f.ctx)
		now := f.clock.Now()
		// Fire times up to now stay as made; those ahead follow the new
		// definition, under their keys again for the fire times both have
		// (the withdrawn tasks gave them up, the key hold
		// notwithstanding); the withdrawn ones are cancelled with the
		// reason.
		keys := append(fireKeys("put", t0, now, time.Second), fireKeys("put", now, now.Add(lookahead), 2*time.Second)...)
		got := f.wantKeys("after replace", keys)
		f.wantWithdrawn("after replace", "withdrawn: schedule put updated", dues(now, t0.Add(lookahead), time.Second))
		for k, tk := range got {
			want := `{"v":1}`
			if tk.DueAt.After(now) {
				want = `{"v":2}`
			}
			if string(tk.Payload) != want {
				t.Fatalf("%s: payload %s, want %s", k, tk.Payload, want)
			}
		}
	})
}

// TestDeleteWithdraws: deleting a schedule withdraws its tasks not yet
// started and makes no more.
func TestDeleteWithdraws(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		f := setup(t, engine)
		svc := f.service("n1", nil)
		t0 := f.clock.Now()
		if _, err := svc.Create(f.ctx, every("del", "1s")); err != nil {
			t.Fatal(err)
		}
		// A task of another schedule whose name extends this one's stays.
		if _, err := svc.Create(f.ctx, every("del.x", "5s")); err != nil {
			t.Fatal(err)
		}
		svc.Round(f.ctx)
		if len(f.tasks()) != 12 {
			t.Fatalf("%d tasks before delete, want 10 + 2", len(f.tasks()))
		}
		r, err := svc.Delete(f.ctx, "del")
		if err != nil || r.Name != "del" {
			t.Fatalf("delete: %+v, %v", r, err)
		}
		f.clock.Add(time.Second)
		svc.Round(f.ctx)
		for k := range f.tasks() {
			if !strings.HasPrefix(k, "del.x@") {
				t.Fatalf("task %s left after delete", k)
			}
		}
		// Withdrawn, not deleted: each still answers by its id.
		f.wantWithdrawn("after delete", "withdrawn: schedule del deleted", dues(t0, t0.Add(lookahead), time.Second))
		if _, err := svc.Get(f.ctx, "del"); !errors.Is(err, store.ErrScheduleNotFound) {
			t.Fatalf("get after delete: %v", err)
		}
		if _, err := svc.Delete(f.ctx, "del"); !errors.Is(err, store.ErrScheduleNotFound) {
			t.Fatalf("second delete: %v", err)
		}
	})
}

// TestOwnership: a node makes the tasks only of the schedules whose name
// hashes to an item it owns; when it owns nothing it makes nothing.
func TestOwnership(t *testing.T) {
	f := setup(t, "sqlite")
	items := []string{"0.0.0", "0.0.1", "0.1.0", "0.1.1"}
	svc := f.service("n1", func(c *schedule.Config) { c.Items = items })
	var names []string
	for i := range 12 {
		name := fmt.Sprintf("own-%d", i)
		names = append(names, name)
		if _, err := svc.Create(f.ctx, every(name, "10s")); err != nil {
			t.Fatal(err)
		}
	}
	svc.Round(f.ctx)
	f.wantKeys("owning nothing", nil)
	svc.SetOwned([]string{"0.0.1"})
	svc.Round(f.ctx)
	var want []string
	t0 := f.clock.Now()
	for _, n := range names {
		if items[router.HashKey(n)%uint32(len(items))] == "0.0.1" {
			want = append(want, fireKeys(n, t0, t0.Add(lookahead), 10*time.Second)...)
			if !svc.Owns(n) {
				t.Fatalf("%s: not owned", n)
			}
		} else if svc.Owns(n) {
			t.Fatalf("%s: owned", n)
		}
	}
	if len(want) == 0 {
		t.Fatal("no schedule hashes to the owned item; pick other names")
	}
	f.wantKeys("owning one item of four", want)
}

// TestDaylightSaving: in New York, 02:30 does not exist on 2027-03-14 (no
// task that day) and 01:30 happens twice on 2027-11-07 (one task).
func TestDaylightSaving(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		f := setup(t, engine)
		svc := f.service("n1", func(c *schedule.Config) { c.Lookahead = 72 * time.Hour })
		spring := store.ScheduleDef{Name: "spring", Cron: "30 2 * * *", TimeZone: "America/New_York", Task: store.ScheduleTask{Topic: topic}}
		fall := store.ScheduleDef{Name: "fall", Cron: "30 1 * * *", TimeZone: "America/New_York", Task: store.ScheduleTask{Topic: topic}}
		f.clock.t = time.Date(2027, 3, 13, 0, 0, 0, 0, time.UTC)
		if _, err := svc.Create(f.ctx, spring); err != nil {
			t.Fatal(err)
		}
		svc.Round(f.ctx)
		f.wantKeys("across spring forward", []string{"spring@2027-03-13T07:30:00Z", "spring@2027-03-15T06:30:00Z"})
		if _, err := svc.Delete(f.ctx, "spring"); err != nil {
			t.Fatal(err)
		}
		f.clock.t = time.Date(2027, 11, 6, 12, 0, 0, 0, time.UTC)
		if _, err := svc.Create(f.ctx, fall); err != nil {
			t.Fatal(err)
		}
		svc.Round(f.ctx)
		f.wantKeys("across fall back", []string{"fall@2027-11-07T05:30:00Z", "fall@2027-11-08T06:30:00Z", "fall@2027-11-09T06:30:00Z"})
	})
}

// TestValidation: every field is checked, and the error names it; nothing
// is written.
func TestValidation(t *testing.T) {
	f := setup(t, "sqlite")
	svc := f.service("n1", func(c *schedule.Config) { c.Limits = task.Limits{MaxPayloadBytes: 64} })
	ok := every("ok", "1s")
	for _, c := range []struct {
		field string
		mod   func(d *store.ScheduleDef)
	}{
		{"name", func(d *store.ScheduleDef) { d.Name = "" }},
		{"name", func(d *store.ScheduleDef) { d.Name = "a@b" }},
		{"name", func(d *store.ScheduleDef) { d.Name = "a:pause" }},
		{"name", func(d *store.ScheduleDef) { d.Name = strings.Repeat("n", 65) }},
		{"cron", func(d *store.ScheduleDef) { d.Cron = "" }},
		{"cron", func(d *store.ScheduleDef) { d.Cron = "* * *" }},
		{"cron", func(d *store.ScheduleDef) { d.Cron = "@every 500ms" }},
		{"cron", func(d *store.ScheduleDef) { d.Cron = "0 0 30 2 *" }},
		{"cron", func(d *store.ScheduleDef) { d.Cron = strings.Repeat("*", 300) }},
		{"time_zone", func(d *store.ScheduleDef) { d.TimeZone = "Mars/Olympus" }},
		{"time_zone", func(d *store.ScheduleDef) { d.TimeZone = "Local" }},
		{"misfire", func(d *store.ScheduleDef) { d.Misfire = "twice" }},
		{"task.topic", func(d *store.ScheduleDef) { d.Task.Topic = "" }},
		{"task.topic", func(d *store.ScheduleDef) { d.Task.Topic = "a b" }},
		{"task.payload", func(d *store.ScheduleDef) { d.Task.Payload = []byte(`{`) }},
		{"task.payload", func(d *store.ScheduleDef) { d.Task.Payload = []byte(`"` + strings.Repeat("x", 100) + `"`) }},
		{"task.target", func(d *store.ScheduleDef) { d.Task.Target = "ftp://x" }},
		{"task.max_attempts", func(d *store.ScheduleDef) { d.Task.MaxAttempts = -1 }},
		{"task.max_attempts", func(d *store.ScheduleDef) { d.Task.MaxAttempts = 1001 }},
	} {
		d := ok
		c.mod(&d)
		_, err := svc.Create(f.ctx, d)
		var fe *task.FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%+v: error %v, want one naming %s", d, err, c.field)
		}
		if _, _, err := svc.Put(f.ctx, d); !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("put %+v: error %v, want one naming %s", d, err, c.field)
		}
	}
	if all, err := svc.List(f.ctx); err != nil || len(all) != 0 {
		t.Fatalf("bad input wrote %d schedules (%v)", len(all), err)
	}
	if _, err := svc.Create(f.ctx, ok); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Create(f.ctx, ok); !errors.Is(err, store.ErrScheduleExists) {
		t.Fatalf("second create: %v", err)
	}
	for _, op := range []func(context.Context, string) (store.Schedule, error){svc.Get, svc.Pause, svc.Resume, svc.Delete} {
		if _, err := op(f.ctx, "missing"); !errors.Is(err, store.ErrScheduleNotFound) {
			t.Fatalf("op on a missing schedule: %v", err)
		}
	}
	if _, _, err := svc.Trigger(f.ctx, "missing"); !errors.Is(err, store.ErrScheduleNotFound) {
		t.Fatalf("trigger of a missing schedule: %v", err)
	}
}

// TestTrigger: a trigger makes one task now, keyed by now, also while
// paused; the schedule's own fire times are not disturbed.
func TestTrigger(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		f := setup(t, engine)
		svc := f.service("n1", nil)
		d := every("trig", "1h")
		d.Paused = true
		if _, err := svc.Create(f.ctx, d); err != nil {
			t.Fatal(err)
		}
		tk, created, err := svc.Trigger(f.ctx, "trig")
		if err != nil || !created {
			t.Fatalf("trigger: %v, created %v", err, created)
		}
		now := f.clock.Now()
		if tk.Key != schedule.TriggerKey("trig", now) || tk.Topic != topic || string(tk.Payload) != `{"v":1}` || tk.MaxAttempts != 3 {
			t.Fatalf("triggered task %+v", tk)
		}
		svc.Round(f.ctx)
		f.wantKeys("paused, triggered once", []string{tk.Key})
	})
}

// TestTriggeredTaskNotWithdrawn: a triggered task is not the schedule's
// fire time: neither a change nor the delete of the schedule withdraws
// it, even while it waits for a retry (due later than the change).
func TestTriggeredTaskNotWithdrawn(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		f := setup(t, engine)
		svc := f.service("n1", nil)
		if _, err := svc.Create(f.ctx, every("nightly", "1h")); err != nil {
			t.Fatal(err)
		}
		tk, _, err := svc.Trigger(f.ctx, "nightly")
		if err != nil {
			t.Fatal(err)
		}
		if lo, hi := schedule.KeyRange("nightly"); tk.Key >= lo && tk.Key < hi {
			t.Fatalf("trigger key %s in the schedule's range [%s, %s)", tk.Key, lo, hi)
		}
		if _, _, ok := schedule.ParseKey(tk.Key); ok {
			t.Fatalf("trigger key %s parses as a fire time's", tk.Key)
		}
		// Its delivery failed: the retry is due in a minute.
		retry := f.clock.Now().Add(time.Minute)
		if _, err := f.st.Update(f.ctx, tk.ID, store.Patch{DueAt: &retry}); err != nil {
			t.Fatal(err)
		}
		d := every("nightly", "1h")
		d.Task.Payload = []byte(`{"v":2}`)
		if _, _, err := svc.Put(f.ctx, d); err != nil {
			t.Fatal(err)
		}
		svc.Round(f.ctx)
		if _, err := svc.Delete(f.ctx, "nightly"); err != nil {
			t.Fatal(err)
		}
		svc.Round(f.ctx)
		got, err := f.st.Get(f.ctx, tk.ID)
		if err != nil || got.Status != task.StatusPending || got.Key != tk.Key || !got.DueAt.Equal(retry) {
			t.Fatalf("triggered task after the schedule's change and delete: %+v, %v", got, err)
		}
	})
}

// TestStoreCompareAndSet: the store's writes match only the row as given.
func TestStoreCompareAndSet(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		f := setup(t, engine)
		svc := f.service("n1", nil)
		r, err := svc.Create(f.ctx, every("cas", "1s"))
		if err != nil {
			t.Fatal(err)
		}
		to := r.ScheduleProgress
		to.Cursor = r.Cursor.Add(time.Second)
		if ok, err := f.st.AdvanceSchedule(f.ctx, "cas", r.Version+1, r.ScheduleProgress, to); err != nil || ok {
			t.Fatalf("advance under a wrong version: %v, %v", ok, err)
		}
		if ok, err := f.st.AdvanceSchedule(f.ctx, "cas", r.Version, to, to); err != nil || ok {
			t.Fatalf("advance from a wrong cursor: %v, %v", ok, err)
		}
		if ok, err := f.st.AdvanceSchedule(f.ctx, "cas", r.Version, r.ScheduleProgress, to); err != nil || !ok {
			t.Fatalf("advance: %v, %v", ok, err)
		}
		if ok, err := f.st.AdvanceSchedule(f.ctx, "cas", r.Version, r.ScheduleProgress, to); err != nil || ok {
			t.Fatalf("the same advance twice: %v, %v", ok, err)
		}
		next := r
		next.Version = r.Version + 7
		next.Cursor = r.Cursor.Add(-time.Hour) // never lowers the cursor
		if ok, err := f.st.UpdateSchedule(f.ctx, next, r.Version+1); err != nil || ok {
			t.Fatalf("update under a wrong version: %v, %v", ok, err)
		}
		if ok, err := f.st.UpdateSchedule(f.ctx, next, r.Version); err != nil || !ok {
			t.Fatalf("update: %v, %v", ok, err)
		}
		got, err := f.st.Schedule(f.ctx, "cas")
		if err != nil || got.Version != next.Version || !got.Cursor.Equal(to.Cursor) {
			t.Fatalf("after update: %+v, %v", got, err)
		}
	})
}

// TestLoop: started, the service makes tasks by itself on the real clock
// and stops when asked.
func TestLoop(t *testing.T) {
	f := setup(t, "sqlite")
	svc := f.service("n1", func(c *schedule.Config) { c.Now = nil; c.Poll = 50 * time.Millisecond })
	if err := svc.Start(f.ctx); err != nil {
		t.Fatal(err)
	}
	stagetest.Done(t, "service started", svc.Started())
	if _, err := svc.Create(f.ctx, every("loop", "1s")); err != nil {
		t.Fatal(err)
	}
	stagetest.Eventually(t, "tasks made by the loop", func() bool { return len(f.tasks()) >= int(lookahead/time.Second)-1 })
	svc.Stop()
	svc.Stop()
}

// started returns copies of the keyed tasks of topic as their first start
// returns them (attempt 1), by key.
func (f *fixture) started() map[string]*task.Task {
	f.t.Helper()
	out := map[string]*task.Task{}
	for k, tk := range f.tasks() {
		c := *tk
		c.Attempts = 1
		out[k] = &c
	}
	return out
}

// screen runs svc.Screen over tasks and returns the keys it delivers and
// the reasons of those it passes over, by key.
func screen(t *testing.T, svc *schedule.Service, tasks map[string]*task.Task) (deliver []string, missed map[string]string) {
	t.Helper()
	var in []*task.Task
	for _, k := range sortedKeys(tasks) {
		in = append(in, tasks[k])
	}
	keep, out := svc.Screen(context.Background(), in)
	for _, tk := range keep {
		deliver = append(deliver, tk.Key)
	}
	missed = map[string]string{}
	for _, m := range out {
		missed[m.Task.Key] = m.Reason
	}
	if len(deliver)+len(missed) != len(in) {
		t.Fatalf("screen: %d delivered + %d missed of %d", len(deliver), len(missed), len(in))
	}
	return deliver, missed
}

// TestMadeAheadMissed: every node down after tasks were made ahead, then
// one back. The tasks made ahead now late beyond the misfire threshold
// follow the misfire policy where they are delivered (Screen): skip
// delivers none of them; fire_once delivers one for every missed fire time
// together — the last one made ahead when the owner had made it, else the
// owner's catch-up task. Younger fire times are delivered, late. The
// overdue tasks may start before the owner's round or after it: the
// outcome is the same.
func TestMadeAheadMissed(t *testing.T) {
	for _, policy := range []store.Misfire{store.MisfireSkip, store.MisfireFireOnce} {
		t.Run(string(policy), func(t *testing.T) {
			forEngines(t, func(t *testing.T, engine string) {
				for _, c := range []struct {
					name string
					down time.Duration
				}{
					// The tasks made ahead reach past the threshold: the
					// last missed fire time was made ahead.
					{"made_ahead_past_the_threshold", misfire + lookahead/2},
					// An hour: the owner finds fire times missed too.
					{"an_hour", time.Hour},
				} {
					for _, roundFirst := range []bool{false, true} {
						t.Run(fmt.Sprintf("%s/round_first_%v", c.name, roundFirst), func(t *testing.T) {
							testMadeAheadMissed(t, engine, policy, c.down, roundFirst)
						})
					}
				}
			})
		})
	}
}

func testMadeAheadMissed(t *testing.T, engine string, policy store.Misfire, down time.Duration, roundFirst bool) {
	f := setup(t, engine)
	reg := prometheus.NewRegistry()
	svc := f.service("n1", func(cf *schedule.Config) { cf.Registerer = reg })
	t0 := f.clock.Now()
	d := every("ahead", "1s")
	d.Misfire = policy
	if _, err := svc.Create(f.ctx, d); err != nil {
		t.Fatal(err)
	}
	svc.Round(f.ctx) // tasks made through T0+lookahead, then every node down
	f.clock.Add(down)
	now := f.clock.Now()
	limit := now.Add(-misfire)
	// Each task is judged once, at its first start: those there before the
	// round, then those the round made.
	var deliver []string
	missed := map[string]string{}
	judged := map[string]bool{}
	judge := func() {
		todo := map[string]*task.Task{}
		for k, tk := range f.started() {
			if !judged[k] {
				todo[k], judged[k] = tk, true
			}
		}
		dl, ms := screen(t, svc, todo)
		deliver = append(deliver, dl...)
		maps.Copy(missed, ms)
	}
	if !roundFirst {
		judge()
	}
	svc.Round(f.ctx)
	judge()

	var late []string // delivered, for a fire time the threshold old or older
	for _, k := range deliver {
		if _, at, ok := schedule.ParseKey(k); ok && !at.After(limit) {
			late = append(late, k)
		}
	}
	want := []string(nil)
	if policy == store.MisfireFireOnce {
		want = []string{schedule.Key("ahead", limit)} // the last missed: made ahead, or the catch-up task
	}
	if !slices.Equal(late, want) {
		t.Fatalf("delivered %v for missed fire times, want %v", late, want)
	}
	end := t0.Add(lookahead)
	if limit.Before(end) {
		end = limit
	}
	for _, k := range fireKeys("ahead", t0, end, time.Second) {
		if slices.Contains(want, k) {
			continue
		}
		if why := missed[k]; !strings.HasPrefix(why, "missed: fire time") || !strings.Contains(why, "(misfire "+string(policy)+")") {
			t.Fatalf("%s made ahead, missed: %q", k, why)
		}
	}
	for k := range missed {
		if _, at, _ := schedule.ParseKey(k); at.After(limit) {
			t.Fatalf("%s, within the threshold, not delivered", k)
		}
	}
	if n := counter(t, reg, "ontime_schedule_fires_missed_total"); n != float64(len(missed)) {
		t.Fatalf("missed fires counted %v, want %d", n, len(missed))
	}
}

// TestScreenLeavesOthers: Screen judges only the first start of a task
// made for a fire time, due at it, of a schedule that makes its topic;
// everything else late is delivered.
func TestScreenLeavesOthers(t *testing.T) {
	f := setup(t, "sqlite")
	svc := f.service("n1", nil)
	d := every("other", "1s")
	if _, err := svc.Create(f.ctx, d); err != nil {
		t.Fatal(err)
	}
	svc.Round(f.ctx)
	f.clock.Add(time.Hour)
	now := f.clock.Now()
	var fire *task.Task
	for _, tk := range f.started() {
		fire = tk
		break
	}
	mod := func(m func(*task.Task)) *task.Task {
		c := *fire
		m(&c)
		return &c
	}
	tasks := map[string]*task.Task{
		"retried":      mod(func(c *task.Task) { c.Attempts = 2; c.Key = "retried" }),
		"rescheduled":  mod(func(c *task.Task) { c.DueAt = c.DueAt.Add(time.Millisecond); c.Key = "rescheduled" }),
		"trigger":      mod(func(c *task.Task) { c.Key = schedule.TriggerKey("other", c.DueAt) }),
		"no key":       mod(func(c *task.Task) { c.Key = "" }),
		"user key":     mod(func(c *task.Task) { c.Key = "other@yesterday" }),
		"other topic":  mod(func(c *task.Task) { c.Topic = "sched.elsewhere" }),
		"no schedule":  mod(func(c *task.Task) { c.Key = schedule.Key("gone", c.DueAt) }),
		"not that old": mod(func(c *task.Task) { c.DueAt = now.Add(-misfire + time.Second); c.Key = schedule.Key("other", c.DueAt) }),
	}
	in := make([]*task.Task, 0, len(tasks))
	for _, tk := range tasks {
		in = append(in, tk)
	}
	keep, missed := svc.Screen(f.ctx, in)
	if len(missed) != 0 || len(keep) != len(in) {
		t.Fatalf("passed over %+v", missed)
	}
	// The fire time itself, as made, is passed over (skip).
	if keep, missed := svc.Screen(f.ctx, []*task.Task{fire}); len(keep) != 0 || len(missed) != 1 {
		t.Fatalf("the fire time's own task: delivered %d, passed over %d", len(keep), len(missed))
	}
}
