package sqlstore

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
	"github.com/ontimehq/ontime/internal/testdb"
)

// insertPlans are the plans every insert test runs with on engine: its
// own, and tiny limits that split a batch into many statements per table.
func insertPlans(engine string) map[string]insertPlan {
	own := planFor(dialects[engine])
	tiny := own
	tiny.rows, tiny.bytes = 7, 300
	return map[string]insertPlan{"own": own, "tiny": tiny}
}

func forEachInsertPlan(t *testing.T, f func(t *testing.T, engine string, s *Store, n int)) {
	for _, engine := range testdb.Engines {
		for name, plan := range insertPlans(engine) {
			t.Run(engine+"/"+name, func(t *testing.T) {
				t.Parallel()
				s := openT(t, engine, testdb.DSNs(t, engine, 1), 4, 4)
				s.ins = plan
				// Batches over the old limit of 500 rows per table; fewer
				// with the tiny plan, which splits them anyway (SQLite is
				// slow under -race).
				n := 5000
				if plan.rows < 100 {
					n = 700
				}
				f(t, engine, s, n)
			})
		}
	}
}

func countRows(t *testing.T, s *Store, where string) int {
	t.Helper()
	total := 0
	for _, tn := range s.names {
		var n int
		if err := s.w[0].QueryRowContext(context.Background(), `SELECT COUNT(*) FROM `+tn+` WHERE `+where).Scan(&n); err != nil {
			t.Fatal(err)
		}
		total += n
	}
	return total
}

// checkStored: every task out reports is stored exactly so.
func checkStored(t *testing.T, s *Store, out []store.Inserted) {
	t.Helper()
	for _, in := range out {
		got, err := s.getW(context.Background(), in.Task.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, in.Task) {
			t.Fatalf("stored %+v\nreported %+v", got, in.Task)
		}
	}
}

// TestInsertBatchOverLimits: one call of 5,000 tasks, keyed and not,
// spanning 4 tables with over 1,000 rows each (700 tasks and many
// statements per table with the tiny plan),
// is written whole; unkeyed tasks have a NULL key; a second call with the
// same tasks writes nothing and answers the stored tasks.
func TestInsertBatchOverLimits(t *testing.T) {
	forEachInsertPlan(t, func(t *testing.T, engine string, s *Store, n int) {
		ctx := context.Background()
		due := time.Now().Add(time.Hour)
		var tasks []store.NewTask
		for i := range n {
			key := ""
			if i%2 == 0 {
				key = fmt.Sprintf("k-%d", i)
			}
			tasks = append(tasks, newTask(t, key, due, 4))
		}
		out, err := s.Insert(ctx, tasks)
		if err != nil {
			t.Fatal(err)
		}
		for i, in := range out {
			if in.Existing || in.Task.ID != tasks[i].ID {
				t.Fatalf("task %d: %+v, want it inserted", i, in)
			}
		}
		if got := countRows(t, s, "1 = 1"); got != n {
			t.Fatalf("%d rows, want %d", got, n)
		}
		if got := countRows(t, s, "task_key IS NULL"); got != n/2 {
			t.Fatalf("%d rows with a NULL key, want %d", got, n/2)
		}
		checkStored(t, s, out[:50])
		checkStored(t, s, out[len(out)-50:])

		// Again, the same tasks, and the same keys under new IDs.
		again := slices.Clone(tasks)
		for i := range 10 {
			again = append(again, newTask(t, fmt.Sprintf("k-%d", 2*i), due, 4))
		}
		out2, err := s.Insert(ctx, again)
		if err != nil {
			t.Fatal(err)
		}
		if got := countRows(t, s, "1 = 1"); got != n {
			t.Fatalf("%d rows after the second call, want %d", got, n)
		}
		// A task sent again (same ID) is answered as written: it is; one
		// with a new ID and a stored key gets the stored task.
		for i, in := range out2 {
			orig := i
			if i >= len(tasks) {
				orig = 2 * (i - len(tasks))
			}
			if in.Task.ID != tasks[orig].ID || in.Existing != (i >= len(tasks)) {
				t.Fatalf("task %d: %s (existing %v), want the stored task %s", i, in.Task.ID, in.Existing, tasks[orig].ID)
			}
		}
	})
}

// TestInsertReportsExactlyWhatWentIn: in one call, keys already stored,
// keys repeated within the call and new keys: each task's answer says
// whether it was written, and names the task of its key.
func TestInsertReportsExactlyWhatWentIn(t *testing.T) {
	forEachInsertPlan(t, func(t *testing.T, engine string, s *Store, _ int) {
		ctx := context.Background()
		due := time.Now().Add(time.Hour)
		var first []store.NewTask
		for i := range 40 {
			first = append(first, newTask(t, fmt.Sprintf("old-%d", i), due, 4))
		}
		if _, err := s.Insert(ctx, first); err != nil {
			t.Fatal(err)
		}
		var tasks []store.NewTask
		want := map[int]string{} // position → the ID its answer names
		for i := range 120 {
			var nt store.NewTask
			switch i % 3 {
			case 0: // a stored key
				nt = newTask(t, fmt.Sprintf("old-%d", i/3), due, 4)
				want[i] = first[i/3].ID
			case 1: // a new key, twice in the call: the first wins
				nt = newTask(t, fmt.Sprintf("dup-%d", i/3), due, 4)
				want[i] = nt.ID
			default:
				nt = newTask(t, fmt.Sprintf("dup-%d", i/3), due, 4)
				want[i] = tasks[i-1].ID
			}
			tasks = append(tasks, nt)
		}
		tasks = append(tasks, newTask(t, "", due, 4))
		want[len(tasks)-1] = tasks[len(tasks)-1].ID
		out, err := s.Insert(ctx, tasks)
		if err != nil {
			t.Fatal(err)
		}
		for i, in := range out {
			if in.Task.ID != want[i] {
				t.Fatalf("task %d: answered %s, want %s", i, in.Task.ID, want[i])
			}
			if in.Existing != (want[i] != tasks[i].ID) {
				t.Fatalf("task %d: Existing %v", i, in.Existing)
			}
		}
		if n := countRows(t, s, "1 = 1"); n != 40+40+1 {
			t.Fatalf("%d rows, want 81", n)
		}
		checkStored(t, s, out)
	})
}

// TestInsertOddPayloadsAndClaims: payload bytes travel unchanged (NUL,
// bytes that are not UTF-8, quotes and backslashes, empty), and a task
// inserted claimed keeps its lease.
func TestInsertOddPayloadsAndClaims(t *testing.T) {
	payloads := [][]byte{
		{0}, {0, 0, 'x', 0}, {0xff, 0xfe, 0x80}, []byte(`"\\x00'; --\"`), []byte(`\x41\\`), {}, bytes.Repeat([]byte{0, 0xff}, 5000),
		[]byte(`{"a":"\u0000","b":"é€𝄞"}`), []byte("{\"nul\":\"\x00\"}\r\n\t"),
	}
	forEachInsertPlan(t, func(t *testing.T, engine string, s *Store, _ int) {
		ctx := context.Background()
		due := time.Now().Add(time.Hour)
		var tasks []store.NewTask
		for i, p := range payloads {
			nt := newTask(t, fmt.Sprintf("odd-%d", i), due, 4)
			nt.Payload = p
			nt.Target = "https://example.com/é?q='\\"
			if i%2 == 1 {
				nt.Claim = &store.Lease{Owner: "node-ü", Until: due.Add(time.Minute), Token: int64(1000 + i)}
			}
			tasks = append(tasks, nt)
		}
		out, err := s.Insert(ctx, tasks)
		if err != nil {
			t.Fatal(err)
		}
		for i, in := range out {
			got, err := s.getW(ctx, in.Task.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Payload, payloads[i]) {
				t.Fatalf("payload %d: stored %q, want %q", i, got.Payload, payloads[i])
			}
			if got.Target != tasks[i].Target {
				t.Fatalf("target %d: stored %q", i, got.Target)
			}
			if i%2 == 1 && (got.Status != task.StatusClaimed || got.Owner != "node-ü" || got.Token != int64(1000+i) || !got.LeaseUntil.Equal(fromMicros(micros(due.Add(time.Minute))))) {
				t.Fatalf("claimed task %d stored as %+v", i, got)
			}
			if i%2 == 0 && (got.Status != task.StatusPending || got.Owner != "" || got.Token != 0) {
				t.Fatalf("pending task %d stored as %+v", i, got)
			}
		}
	})
}

// TestInsertLargePayloads: a batch of large payloads bound for one table
// is split by bytes: on MariaDB one statement of them all would pass
// max_allowed_packet (16 MiB by default).
func TestInsertLargePayloads(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := openT(t, engine, testdb.DSNs(t, engine, 1), 1, 4)
			due := time.Now().Add(time.Hour)
			var tasks []store.NewTask
			for i := range 40 {
				nt := newTask(t, "", due, 4)
				nt.Payload = bytes.Repeat([]byte{byte('a' + i%26)}, 600<<10)
				tasks = append(tasks, nt)
			}
			if _, err := s.Insert(ctx, tasks); err != nil {
				t.Fatal(err)
			}
			if n := countRows(t, s, "1 = 1"); n != len(tasks) {
				t.Fatalf("%d rows, want %d", n, len(tasks))
			}
			got, err := s.getW(ctx, tasks[39].ID)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Payload, tasks[39].Payload) {
				t.Fatalf("payload of the last task: %d bytes, want %d", len(got.Payload), len(tasks[39].Payload))
			}
		})
	}
}

func TestInsertPlanChunks(t *testing.T) {
	tasks := make([]store.NewTask, 10)
	for i := range tasks {
		tasks[i].Payload = make([]byte, 10*(i+1)) // 10, 20, … 100 bytes
	}
	idx := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	for _, tc := range []struct {
		plan insertPlan
		want [][]int
	}{
		{insertPlan{rows: 4, bytes: 1 << 20}, [][]int{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}}},
		{insertPlan{rows: 100, bytes: 100}, [][]int{{0, 1, 2, 3}, {4}, {5}, {6}, {7}, {8}, {9}}},
		{insertPlan{rows: 100, bytes: 5}, [][]int{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}}},
		{insertPlan{rows: 100, bytes: 1 << 20}, [][]int{idx}},
	} {
		if got := tc.plan.chunks(idx, tasks); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%+v: %v, want %v", tc.plan, got, tc.want)
		}
	}
	if got := (insertPlan{rows: 3, bytes: 10}).chunks(nil, tasks); len(got) != 0 {
		t.Errorf("no rows: %v", got)
	}
}
