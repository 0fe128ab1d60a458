package submit_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/hot"
	"github.com/ontimehq/ontime/internal/router"
	"github.com/ontimehq/ontime/internal/stagetest"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/store/sqlstore"
	"github.com/ontimehq/ontime/internal/submit"
	"github.com/ontimehq/ontime/internal/task"
	"github.com/ontimehq/ontime/internal/testdb"
)

var gcTopo = router.Topology{Databases: 1, Tables: 2}

// gatedStore is the real store with a gate on the first Insert: that call
// commits, then waits for the test to open the gate, so that the submits
// arriving meanwhile queue up for the next group. It counts Inserts.
type gatedStore struct {
	submit.Store
	calls     atomic.Int32
	committed chan struct{} // closed once the first Insert has committed
	gate      chan struct{} // closed by the test: the first Insert returns
}

func (g *gatedStore) Insert(ctx context.Context, tasks []store.NewTask) ([]store.Inserted, error) {
	n := g.calls.Add(1)
	ins, err := g.Store.Insert(ctx, tasks)
	if n == 1 {
		close(g.committed)
		<-g.gate
	}
	return ins, err
}

type gcFixture struct {
	st   *sqlstore.Store
	g    *gatedStore
	svc  *submit.Service
	tier interface {
		Len(context.Context) (int, error)
	}
	db *sql.DB // a connection of the test's own to the store's database
}

func gcSetup(t *testing.T, engine string) *gcFixture {
	t.Helper()
	return gcSetupHold(t, engine, 0)
}

// gcSetupHold is gcSetup with a key hold (sqlstore.Config.KeyHold).
func gcSetupHold(t *testing.T, engine string, keyHold time.Duration) *gcFixture {
	t.Helper()
	dsns := testdb.DSNs(t, engine, 1)
	st, err := sqlstore.Open(context.Background(), sqlstore.Config{Driver: engine, DSNs: dsns, Tables: gcTopo.Tables, Segments: stagetest.Segments, KeyHold: keyHold})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	driver := map[string]string{"sqlite": "sqlite", "mysql": "mysql", "postgres": "pgx"}[engine]
	db, err := sql.Open(driver, dsns[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	g := &gatedStore{Store: st, committed: make(chan struct{}), gate: make(chan struct{})}
	tier := stagetest.Tier(t)
	svc, err := submit.New(submit.Config{Store: g, Tier: tier, Planner: hot.NewPlanner(20*time.Millisecond, 0),
		Notifier: &notifier{}, Topology: gcTopo, Segments: stagetest.Segments, NodeID: node,
		Window: window, LeaseTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	svc.SetReady(true)
	return &gcFixture{st: st, g: g, svc: svc, tier: tier, db: db}
}

// lead submits spec alone and returns once its commit is done and the
// committer holds on, so that what is submitted next queues up.
func (f *gcFixture) lead(t *testing.T, spec task.Spec) <-chan submit.Result {
	t.Helper()
	out := make(chan submit.Result, 1)
	go func() {
		res, err := f.svc.Submit(context.Background(), []task.Spec{spec})
		if err != nil {
			res = []submit.Result{{Err: err}}
		}
		out <- res[0]
	}()
	<-f.g.committed
	return out
}

// waitQueued waits until n submits wait for the next group.
func (f *gcFixture) waitQueued(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(stagetest.Deadline)
	for submit.Queued(f.svc, 0) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d submits queued; want %d", submit.Queued(f.svc, 0), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// submitAll submits each spec alone from a goroutine of its own, one
// after the other once the previous one queued, and returns their results
// once the gate opened and all answered.
func (f *gcFixture) submitAll(t *testing.T, specs []task.Spec) ([]submit.Result, []error) {
	t.Helper()
	res := make([]submit.Result, len(specs))
	errs := make([]error, len(specs))
	var wg sync.WaitGroup
	for i, sp := range specs {
		wg.Go(func() {
			r, err := f.svc.Submit(context.Background(), []task.Spec{sp})
			if err != nil {
				errs[i] = err
				return
			}
			res[i] = r[0]
		})
		if i == 0 {
			f.waitQueued(t, 1) // the first decides which table is written first
		}
	}
	f.waitQueued(t, len(specs))
	close(f.g.gate)
	wg.Wait()
	return res, errs
}

// Many concurrent single submits: each gets its own task, every row is
// stored, and they went in one group (two Inserts: the leader's, then the
// group of all that queued behind it).
func TestGroupCommitConcurrentSubmits(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			f := gcSetup(t, engine)
			first := f.lead(t, task.Spec{Topic: "gc", Delay: delay(time.Hour)})
			const n = 200
			specs := make([]task.Spec, n)
			for i := range specs {
				specs[i] = task.Spec{Topic: "gc", Payload: []byte(fmt.Sprintf(`{"i":%d}`, i)), Delay: delay(time.Hour)}
				switch i % 4 {
				case 1:
					specs[i].Key = fmt.Sprintf("k-%d", i)
				case 2:
					specs[i].Delay = delay(time.Second) // claimed, into the hot tier
				}
			}
			valid := specs
			res, errs := f.submitAll(t, valid)
			if r := <-first; r.Err != nil {
				t.Fatalf("leader: %v", r.Err)
			}
			ids := map[string]bool{}
			for i, r := range res {
				if errs[i] != nil || r.Err != nil || r.Existing || r.Task == nil {
					t.Fatalf("submit %d: %+v, %v", i, r, errs[i])
				}
				if string(r.Task.Payload) != string(valid[i].Payload) || r.Task.Key != valid[i].Key {
					t.Fatalf("submit %d answered with another task: %+v", i, r.Task)
				}
				if ids[r.Task.ID] {
					t.Fatalf("ID %s answered twice", r.Task.ID)
				}
				ids[r.Task.ID] = true
				got, err := f.st.Get(context.Background(), r.Task.ID)
				if err != nil {
					t.Fatalf("submit %d acknowledged but not stored: %v", i, err)
				}
				if string(got.Payload) != string(valid[i].Payload) {
					t.Fatalf("row %s holds %s; want %s", got.ID, got.Payload, valid[i].Payload)
				}
			}
			if c := f.g.calls.Load(); c != 2 {
				t.Fatalf("%d Inserts for %d submits; want 2 (the leader, then one group)", c, len(valid)+1)
			}
			// The group's keyless tasks went to one table (its first's); keyed
			// ones kept their key's route; segments stayed spread.
			tables, segs := map[int]bool{}, map[int]bool{}
			for _, r := range res {
				id, err := router.ParseID(r.Task.ID)
				if err != nil {
					t.Fatal(err)
				}
				if r.Task.Key != "" {
					if id.ShardHash != router.HashKey(r.Task.Key) {
						t.Fatalf("keyed task %s routed by %d; want its key's %d", r.Task.ID, id.ShardHash, router.HashKey(r.Task.Key))
					}
					continue
				}
				_, table := gcTopo.Locate(id.ShardHash)
				tables[table] = true
				segs[id.Segment(stagetest.Segments)] = true
			}
			if len(tables) != 1 || len(segs) < 2 {
				t.Fatalf("a group's keyless tasks went to tables %v, segments %v; want one table, segments spread", tables, segs)
			}
			// The claimed ones are in the hot tier, like any submit's.
			claimed := 0
			for _, sp := range valid {
				if *sp.Delay == time.Second {
					claimed++
				}
			}
			if n, err := f.tier.Len(context.Background()); err != nil || n != claimed {
				t.Fatalf("tier holds %d entries (%v); want %d", n, err, claimed)
			}
		})
	}
}

// Submits of one key in one group behave as if sequential: one creates the
// task, the others find it; with if_exists: replace each then updates it.
func TestGroupCommitSameKey(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			f := gcSetup(t, engine)
			first := f.lead(t, task.Spec{Topic: "gc", Key: "other", Delay: delay(time.Hour)})
			const n = 30
			specs := make([]task.Spec, n)
			for i := range specs {
				specs[i] = task.Spec{Topic: "gc", Key: "same", Payload: []byte(fmt.Sprintf(`{"i":%d}`, i)), Delay: delay(time.Hour)}
				if i >= n/2 {
					specs[i].Key, specs[i].Replace = "replaced", true
				}
			}
			res, errs := f.submitAll(t, specs)
			<-first
			for _, key := range []string{"same", "replaced"} {
				created, id := 0, ""
				for i, r := range res {
					if specs[i].Key != key {
						continue
					}
					if errs[i] != nil || r.Err != nil {
						t.Fatalf("submit %d: %v %v", i, errs[i], r.Err)
					}
					if !r.Existing {
						created++
					}
					if id != "" && r.Task.ID != id {
						t.Fatalf("key %s: answered tasks %s and %s", key, id, r.Task.ID)
					}
					id = r.Task.ID
				}
				if created != 1 {
					t.Fatalf("key %s: %d submits created a task; want 1", key, created)
				}
				got, err := f.st.GetByKey(context.Background(), "gc", key)
				if err != nil || got.ID != id {
					t.Fatalf("key %s names %v (%v); want %s", key, got, err, id)
				}
				var live int
				if err := f.db.QueryRow(`SELECT (SELECT COUNT(*) FROM ontime_tasks_0000 WHERE task_key = '` + key + `') + (SELECT COUNT(*) FROM ontime_tasks_0001 WHERE task_key = '` + key + `')`).Scan(&live); err != nil {
					t.Fatal(err)
				}
				if live != 1 {
					t.Fatalf("key %s: %d rows; want 1", key, live)
				}
			}
		})
	}
}

// A group whose commit fails answers the error to every submit in it and
// writes nothing of theirs, though its first rows went to a table that
// still exists.
func TestGroupCommitFailure(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			f := gcSetup(t, engine)
			first := f.lead(t, task.Spec{Topic: "gc", Key: keyIn(t, 0, 0), Delay: delay(time.Hour)})
			// Table 1 goes away while the group queues: the group writes
			// table 0 first (its first submit's table), then fails.
			if _, err := f.db.Exec(`DROP TABLE ontime_tasks_0001`); err != nil {
				t.Fatal(err)
			}
			const n = 20
			specs := make([]task.Spec, n)
			for i := range specs {
				specs[i] = task.Spec{Topic: "gc", Key: keyIn(t, i%2, i), Delay: delay(time.Hour)}
			}
			res, errs := f.submitAll(t, specs)
			r0 := <-first
			if r0.Err != nil {
				t.Fatalf("leader: %v", r0.Err)
			}
			for i := range specs {
				if errs[i] == nil {
					t.Fatalf("submit %d of the failed group answered %+v; want an error", i, res[i])
				}
			}
			var rows int
			if err := f.db.QueryRow(`SELECT COUNT(*) FROM ontime_tasks_0000`).Scan(&rows); err != nil {
				t.Fatal(err)
			}
			if rows != 1 {
				t.Fatalf("table 0 holds %d rows; want only the leader's", rows)
			}
		})
	}
}

// keyIn returns a key (numbered n) that lands in table of gcTopo.
func keyIn(t *testing.T, table, n int) string {
	t.Helper()
	for i := range 10000 {
		k := fmt.Sprintf("k-%d-%d", n, i)
		if _, tb := gcTopo.Locate(router.HashKey(k)); tb == table {
			return k
		}
	}
	t.Fatalf("no key lands in table %d", table)
	return ""
}

// A caller whose context ends while it waits returns at once; the group
// goes on for the others, and a caller that left before its group was
// taken wrote nothing.
func TestGroupCommitCallerGivesUp(t *testing.T) {
	f := gcSetup(t, "sqlite")
	first := f.lead(t, task.Spec{Topic: "gc", Key: "lead", Delay: delay(time.Hour)})
	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan error, 1)
	go func() {
		_, err := f.svc.Submit(ctx, []task.Spec{{Topic: "gc", Key: "gone", Delay: delay(time.Hour)}})
		gone <- err
	}()
	f.waitQueued(t, 1)
	stay := make(chan error, 1)
	go func() {
		_, err := f.svc.Submit(context.Background(), []task.Spec{{Topic: "gc", Key: "stay", Delay: delay(time.Hour)}})
		stay <- err
	}()
	f.waitQueued(t, 2)
	cancel()
	if err := <-gone; err == nil {
		t.Fatal("a cancelled submit answered no error")
	}
	close(f.g.gate)
	if err := <-stay; err != nil {
		t.Fatalf("the submit that stayed: %v", err)
	}
	<-first
	if _, err := f.st.GetByKey(context.Background(), "gc", "stay"); err != nil {
		t.Fatalf("the submit that stayed is not stored: %v", err)
	}
	if got, err := f.st.GetByKey(context.Background(), "gc", "gone"); err == nil {
		t.Fatalf("the submit that left before its group is stored: %+v", got)
	}
}

// Groups per table or per database, two writers each (what a node runs on
// MariaDB and on PostgreSQL): 200 concurrent submits, a fifth of them on
// 10 shared keys, all answered and stored, one task per key.
func TestGroupCommitByTable(t *testing.T) {
	for _, engine := range testdb.Engines {
		for _, byTable := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/by_table=%v", engine, byTable), func(t *testing.T) { testGroupCommitTwoWriters(t, engine, byTable) })
		}
	}
}

func testGroupCommitTwoWriters(t *testing.T, engine string, byTable bool) {
	t.Parallel()
	st, err := sqlstore.Open(context.Background(), sqlstore.Config{Driver: engine, DSNs: testdb.DSNs(t, engine, 1), Tables: gcTopo.Tables, Segments: stagetest.Segments})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	svc, err := submit.New(submit.Config{Store: st, Tier: stagetest.Tier(t), Planner: hot.NewPlanner(20*time.Millisecond, 0),
		Notifier: &notifier{}, Topology: gcTopo, Segments: stagetest.Segments, NodeID: node,
		Window: window, LeaseTTL: time.Minute, GroupByTable: byTable, GroupWriters: 2})
	if err != nil {
		t.Fatal(err)
	}
	svc.SetReady(true)
	const n = 200
	res := make([]submit.Result, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			sp := task.Spec{Topic: "gc", Payload: []byte(fmt.Sprintf(`{"i":%d}`, i)), Delay: delay(time.Duration(i%2) * time.Hour)}
			if i%5 == 0 {
				sp.Key = fmt.Sprintf("shared-%d", i%10)
			}
			r, err := svc.Submit(context.Background(), []task.Spec{sp})
			if err == nil {
				res[i] = r[0]
			}
			errs[i] = err
		})
	}
	wg.Wait()
	byKey := map[string]string{}
	ids := map[string]bool{}
	for i, r := range res {
		if errs[i] != nil || r.Err != nil {
			t.Fatalf("submit %d: %v %v", i, errs[i], r.Err)
		}
		if r.Task.Key != "" {
			if id, ok := byKey[r.Task.Key]; ok && id != r.Task.ID {
				t.Fatalf("key %s answered as %s and %s", r.Task.Key, id, r.Task.ID)
			}
			byKey[r.Task.Key] = r.Task.ID
			continue
		}
		if ids[r.Task.ID] {
			t.Fatalf("ID %s answered twice", r.Task.ID)
		}
		ids[r.Task.ID] = true
		if _, err := st.Get(context.Background(), r.Task.ID); err != nil {
			t.Fatalf("submit %d acknowledged but not stored: %v", i, err)
		}
	}
	for k, id := range byKey {
		got, err := st.GetByKey(context.Background(), "gc", k)
		if err != nil || got.ID != id {
			t.Fatalf("key %s names %v (%v); want %s", k, got, err, id)
		}
	}
}
