// Package stagetest holds what the tests of the pipeline's stage packages
// (submit, scan, fire, deliver, complete) share: a real SQLite store and a
// memory hot tier per test, tasks placed where a test needs them, and
// polling with generous deadlines (never a "within N ms" assertion).
package stagetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/hot/memory"
	"github.com/ontimehq/ontime/internal/router"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/store/sqlstore"
	"github.com/ontimehq/ontime/internal/task"
	"github.com/ontimehq/ontime/internal/testdb"
)

// The topology of Store: one SQLite database, Tables tables, Segments
// segments each.
const (
	Tables   = 2
	Segments = 2
)

// Topology is the router topology of Store.
var Topology = router.Topology{Databases: 1, Tables: Tables}

// Deadline bounds every wait for something that must eventually happen:
// generous, for a loaded 2-core machine under -race.
const Deadline = 30 * time.Second

// Store opens a fresh SQLite store for t, closed when t ends.
func Store(t testing.TB) *sqlstore.Store {
	t.Helper()
	st, err := sqlstore.Open(context.Background(), sqlstore.Config{Driver: "sqlite", DSNs: []string{testdb.SQLite(t)},
		Tables: Tables, Segments: Segments})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// Tier builds a memory hot tier for t, closed when t ends.
func Tier(t testing.TB) *memory.Tier {
	t.Helper()
	tier, err := memory.New(memory.Config{Visibility: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tier.Close() })
	return tier
}

// NewTask builds a pending task of topic due at due for Store's topology
// (key "" makes a keyless task). Adjust its fields (Target, MaxAttempts,
// Claim) before inserting it.
func NewTask(t testing.TB, topic, key string, due time.Time) store.NewTask {
	t.Helper()
	now := time.Now()
	if due.Before(now) {
		now = due // keep a due time in the past as given
	}
	v, err := task.Validate(task.Spec{Topic: topic, Key: key, DueAt: &due, Payload: []byte(`{"key":"` + key + `"}`)},
		task.Limits{}, now)
	if err != nil {
		t.Fatal(err)
	}
	var hash uint32
	if key != "" {
		hash = router.HashKey(key)
	}
	id, p := router.NewID(time.Now(), hash, key != "")
	return store.NewTask{ID: id, ShardHash: p.ShardHash, Seg: p.Segment(Segments), Validated: v}
}

// NewTaskIn is NewTask for a keyed task that lands in item (its key is
// prefix plus a number).
func NewTaskIn(t testing.TB, item store.Item, topic, prefix string, due time.Time) store.NewTask {
	t.Helper()
	for i := range 10000 {
		nt := NewTask(t, topic, fmt.Sprintf("%s-%d", prefix, i), due)
		if ItemOf(nt.ShardHash, nt.Seg) == item {
			return nt
		}
	}
	t.Fatalf("no key of prefix %q lands in %+v", prefix, item)
	return store.NewTask{}
}

// Claimed sets nt to be inserted claimed by owner under token, with a lease
// of an hour.
func Claimed(nt store.NewTask, owner string, token int64) store.NewTask {
	nt.Claim = &store.Lease{Owner: owner, Until: time.Now().Add(time.Hour), Token: token}
	return nt
}

// ItemOf is the sharding item of a task with this shard hash and segment.
func ItemOf(hash uint32, seg int) store.Item {
	db, table := Topology.Locate(hash)
	return store.Item{DB: db, Table: table, Segment: seg}
}

// Insert inserts tasks and returns the stored ones; none may exist.
func Insert(t testing.TB, st store.Store, tasks ...store.NewTask) []*task.Task {
	t.Helper()
	res, err := st.Insert(context.Background(), tasks)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]*task.Task, len(res))
	for i, r := range res {
		if r.Existing {
			t.Fatalf("task %s: topic and key exist already", tasks[i].ID)
		}
		out[i] = r.Task
	}
	return out
}

// Running inserts tasks claimed and starts them: the tasks as Store.Start
// returns them (running, Attempts incremented, with their token), in input
// order.
func Running(t testing.TB, st store.Store, tasks ...store.NewTask) []*task.Task {
	t.Helper()
	token := store.NewToken()
	refs := make([]store.Ref, len(tasks))
	for i := range tasks {
		tasks[i] = Claimed(tasks[i], "stagetest", token)
		refs[i] = store.Ref{ID: tasks[i].ID, Token: token, DueAt: tasks[i].DueAt, Topic: tasks[i].Topic}
	}
	Insert(t, st, tasks...)
	started, err := st.Start(context.Background(), refs, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]*task.Task{}
	for _, tk := range started {
		byID[tk.ID] = tk
	}
	out := make([]*task.Task, len(tasks))
	for i, nt := range tasks {
		if out[i] = byID[nt.ID]; out[i] == nil {
			t.Fatalf("task %s was not started", nt.ID)
		}
	}
	return out
}

// Get reads a task.
func Get(t testing.TB, st store.Store, id string) *task.Task {
	t.Helper()
	tk, err := st.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// Count is the number of tasks with status s.
func Count(t testing.TB, st store.Store, s task.Status) int64 {
	t.Helper()
	c, err := st.Count(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return c[s]
}

// Total is the number of tasks in st.
func Total(t testing.TB, st store.Store) int64 {
	t.Helper()
	c, err := st.Count(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, v := range c {
		n += v
	}
	return n
}

// Eventually polls cond until it holds, failing t after Deadline.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(Deadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("not within %s: %s", Deadline, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// StatusIs polls until task id has status s and returns it.
func StatusIs(t testing.TB, st store.Store, id string, s task.Status) *task.Task {
	t.Helper()
	end := time.Now().Add(Deadline)
	for {
		tk := Get(t, st, id)
		if tk.Status == s {
			return tk
		}
		if time.Now().After(end) {
			t.Fatalf("task %s is %s after %s; want %s", id, tk.Status, Deadline, s)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Done waits for ch to close, failing t after Deadline.
func Done(t testing.TB, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(Deadline):
		t.Fatalf("not within %s: %s", Deadline, what)
	}
}
