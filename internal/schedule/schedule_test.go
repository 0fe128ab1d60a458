package schedule_test

import (
	"context"
	"errors"
	"fmt"
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

// setup opens a fresh store of engine; the clock starts an hour ahead of
// real time (so the submit path keeps due times as given), on a whole
// second.
func setup(t *testing.T, engine string) *fixture {
	t.Helper()
	st, err := sqlstore.Open(context.Background(), sqlstore.Config{Driver: engine, DSNs: testdb.DSNs(t, engine, 1),
		Tables: stagetest.Tables, Segments: stagetest.Segments})
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

// tasks returns the tasks of topic by key.
func (f *fixture) tasks() map[string]*task.Task {
	f.t.Helper()
	out := map[string]*task.Task{}
	after := ""
	for {
		page, err := f.st.List(f.ctx, store.ListFilter{Topic: topic, Limit: 1000, After: after})
		if err != nil {
			f.t.Fatal(err)
		}
		for _, tk := range page {
			if out[tk.Key] != nil {
				f.t.Fatalf("two tasks with key %s", tk.Key)
			}
			out[tk.Key] = tk
		}
		if len(page) < 1000 {
			return out
		}
		after = page[len(page)-1].ID
	}
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
		if n, err := f.st.WithdrawFires(f.ctx, topic, lo, hi, t0.Add(-time.Hour)); err != nil || n != 5 {
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
		// Fire times up to now stay as made; those ahead follow the new definition.
		keys := append(fireKeys("put", t0, now, time.Second), fireKeys("put", now, now.Add(lookahead), 2*time.Second)...)
		got := f.wantKeys("after replace", keys)
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
		if tk.Key != schedule.Key("trig", now) || tk.Topic != topic || string(tk.Payload) != `{"v":1}` || tk.MaxAttempts != 3 {
			t.Fatalf("triggered task %+v", tk)
		}
		svc.Round(f.ctx)
		f.wantKeys("paused, triggered once", []string{tk.Key})
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
