package outboxrelay

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/submit"
	"github.com/ontimehq/ontime/internal/task"
	"github.com/ontimehq/ontime/outbox"
)

// readsTasks is the node's task reads as the finish loop sees them: the
// tasks it holds, and every read asked of it.
type readsTasks struct {
	mu    sync.Mutex
	tasks map[string]*task.Task
	reads [][]string
}

func (r *readsTasks) Submit(context.Context, []task.Spec) ([]submit.Result, error) {
	panic("the finish loop submits nothing")
}

func (r *readsTasks) GetMany(_ context.Context, ids []string) (map[string]*task.Task, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reads = append(r.reads, slices.Clone(ids))
	out := map[string]*task.Task{}
	for _, id := range ids {
		if t, ok := r.tasks[id]; ok {
			out[id] = t
		}
	}
	return out, nil
}

// The finish loop finishes the in-flight rows whose tasks this node's
// completer ended (TasksEnded: done, dead, cancelled) without reading
// those tasks; the others' tasks it reads only on the rounds that read
// (readTasksEvery), and only theirs. A retry ended nothing; a row whose
// task neither ended here nor was read stays in flight, watched.
func TestFinishUsesTheEndsOfThisNode(t *testing.T) {
	ctx := context.Background()
	tasks := &readsTasks{tasks: map[string]*task.Task{
		"elsewhere": {ID: "elsewhere", Status: task.StatusDone},
		"running":   {ID: "running", Status: task.StatusRunning},
	}}
	r, err := New(Config{Name: "e", Driver: "sqlite", Databases: []string{filepath.Join(t.TempDir(), "o.db")}, Table: "outbox"}, tasks, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ddl, err := outbox.DDL(outbox.SQLite, "outbox")
	if err != nil {
		t.Fatal(err)
	}
	db := r.dbs[0]
	for _, q := range ddl {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	inFlight := []string{"done", "dead", "cancelled", "retried", "elsewhere", "running", "gone"}
	for _, id := range inFlight {
		if _, err := db.ExecContext(ctx, `INSERT INTO outbox (topic, msg_key, key_shard, payload, target, due_at, max_attempts, created_at, status, task_id)
			VALUES ('t', ?, 0, x'7b7d', '', 0, 0, 1, ?, ?)`, "k-"+id, outbox.StatusInFlight, id); err != nil {
			t.Fatal(err)
		}
	}
	r.TasksEnded([]store.Outcome{
		{Ref: store.Ref{ID: "done"}, Done: true},
		{Ref: store.Ref{ID: "dead"}, Dead: true, Error: "410 gone"},
		{Ref: store.Ref{ID: "cancelled"}, Cancelled: true},
		{Ref: store.Ref{ID: "retried"}, Error: "503"},
	})
	left := func() []string {
		rows, err := db.QueryContext(ctx, `SELECT task_id FROM outbox ORDER BY task_id`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var ids []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		return ids
	}
	it := r.item(0)
	q := outbox.Quote(it.name, r.d)
	n, watch, err := r.finishEnded(ctx, db, q, it, false)
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 || len(tasks.reads) != 0 {
		t.Fatalf("a round that does not read finished %d rows and read tasks %v; want the 3 ended here and no read", n, tasks.reads)
	}
	if want := []string{"elsewhere", "gone", "retried", "running"}; !slices.Equal(left(), want) {
		t.Fatalf("rows left %v, want %v", left(), want)
	}
	for _, id := range []string{"retried", "elsewhere", "running", "gone"} {
		if _, ok := watch[id]; !ok {
			t.Fatalf("task %s not watched: %v", id, watch)
		}
	}
	n, watch, err = r.finishEnded(ctx, db, q, it, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks.reads) != 1 || !slices.Equal(slices.Sorted(slices.Values(tasks.reads[0])), []string{"elsewhere", "gone", "retried", "running"}) {
		t.Fatalf("reads %v, want one of the four rows' tasks not ended here", tasks.reads)
	}
	// Done elsewhere and gone (retention deleted it) end their rows; the
	// retried task (not in the store here: gone too) as well.
	if n != 3 || !slices.Equal(left(), []string{"running"}) {
		t.Fatalf("a reading round finished %d rows, left %v; want 3 and [running]", n, left())
	}
	if _, ok := watch["running"]; !ok || len(watch) != 1 {
		t.Fatalf("watch %v, want [running]", watch)
	}
}

// The ends a relay keeps are bounded: two generations of endsMax, the
// oldest dropped first (a row whose task's end was dropped is finished by
// a reading round).
func TestEndsAreBounded(t *testing.T) {
	r, err := New(Config{Name: "b", Driver: "sqlite", Databases: []string{filepath.Join(t.TempDir(), "o.db")}, Table: "outbox"}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i := range 3 * endsMax {
		r.TasksEnded([]store.Outcome{{Ref: store.Ref{ID: strconv.Itoa(i)}, Done: true}})
	}
	if n := len(r.ends) + len(r.endsPrev); n > 2*endsMax {
		t.Fatalf("%d ends kept, more than %d", n, 2*endsMax)
	}
	if _, ok := r.endedHere("0"); ok {
		t.Fatal("the oldest end is still kept")
	}
	if e, ok := r.endedHere(strconv.Itoa(3*endsMax - 1)); !ok || e.status != task.StatusDone {
		t.Fatal("the latest end is not kept")
	}
}
