package sqlstore

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/router"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/testdb"
)

// unkeyedIn returns a task without a key that lands in table of a
// topology of dbs databases and tables tables.
func unkeyedIn(t *testing.T, dbs, tables, db, table int, due time.Time) store.NewTask {
	t.Helper()
	topo := router.Topology{Databases: dbs, Tables: tables}
	for range 100000 {
		nt := newTask(t, "", due, 4)
		if d, tb := topo.Locate(nt.ShardHash); d == db && tb == table {
			return nt
		}
	}
	t.Fatalf("no task lands in database %d table %d", db, table)
	return store.NewTask{}
}

// TestInsertWithoutKeys: a batch without keys (on PostgreSQL one COPY per
// table in one query, on MariaDB one multi-statement query) of 5,000 tasks over 4 tables, far past one
// statement's 65,535 parameters, with payloads of every odd kind and
// claimed tasks, is stored exactly as answered.
func TestInsertWithoutKeys(t *testing.T) {
	payloads := [][]byte{
		{}, {0}, {0, 0, 'x', 0}, {0xff, 0xfe, 0x80}, []byte(`"\\x00'; --\"`), bytes.Repeat([]byte{0, 0xff}, 40000),
		[]byte(`{"a":"\u0000","b":"é€𝄞"}`), []byte("{\"nul\":\"\x00\"}\r\n\t"),
	}
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := openT(t, engine, testdb.DSNs(t, engine, 1), 4, 4)
			due := time.Now().Add(time.Hour)
			tasks := make([]store.NewTask, 5000)
			for i := range tasks {
				tasks[i] = newTask(t, "", due.Add(time.Duration(i)*time.Microsecond), 4)
				tasks[i].Payload = payloads[i%len(payloads)]
				tasks[i].Target = fmt.Sprintf("https://example.com/é?q='\\%d", i)
				tasks[i].MaxAttempts = 1 + i%7
				if i%5 == 1 {
					tasks[i].Claim = &store.Lease{Owner: "node-ü", Until: due.Add(time.Minute), Token: int64(1000 + i)}
				}
			}
			gs := s.groupIDs(ids(tasks))
			if engine == "postgres" && !s.copyable(gs, tasks) {
				t.Fatal("a batch without keys does not go by COPY")
			}
			if engine == "mysql" && !s.multiable(gs, tasks) {
				t.Fatal("a batch without keys does not go in one multi-statement query")
			}
			out, err := s.Insert(ctx, tasks)
			if err != nil {
				t.Fatal(err)
			}
			if n := countRows(t, s, "1 = 1"); n != len(tasks) {
				t.Fatalf("%d rows, want %d", n, len(tasks))
			}
			if n := countRows(t, s, "task_key IS NULL AND attempts = 0 AND last_error = ''"); n != len(tasks) {
				t.Fatalf("%d rows with no key, no attempts and no error, want %d", n, len(tasks))
			}
			for i, in := range out {
				if in.Existing || in.Task.ID != tasks[i].ID {
					t.Fatalf("task %d answered %+v", i, in)
				}
			}
			// An empty payload may read back as nil (SQLite).
			for _, in := range slices.Concat(out[:300], out[len(out)-100:]) {
				if len(in.Task.Payload) == 0 {
					in.Task.Payload = nil
				}
				got, err := s.getW(ctx, in.Task.ID)
				if err != nil {
					t.Fatal(err)
				}
				if len(got.Payload) == 0 {
					got.Payload = nil
				}
				if !reflect.DeepEqual(got, in.Task) {
					t.Fatalf("stored %+v\nreported %+v", got, in.Task)
				}
			}
		})
	}
}

func ids(tasks []store.NewTask) []string {
	out := make([]string, len(tasks))
	for i, t := range tasks {
		out[i] = t.ID
	}
	return out
}

// TestInsertWithoutKeysAgain: tasks inserted again with their IDs (a
// retried call) are skipped, not doubled nor refused, beside new ones in
// the same call; on PostgreSQL the COPY of such a batch fails whole and
// writes nothing, and the statements then write the new tasks.
func TestInsertWithoutKeysAgain(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := openT(t, engine, testdb.DSNs(t, engine, 1), 4, 4)
			due := time.Now().Add(time.Hour)
			var first, fresh []store.NewTask
			for range 300 {
				first = append(first, newTask(t, "", due, 4))
				fresh = append(fresh, newTask(t, "", due, 4))
			}
			out, err := s.Insert(ctx, first)
			if err != nil {
				t.Fatal(err)
			}
			checkStored(t, s, out)
			// One repeated task, last, in its own table: the COPY of the
			// other tables' new rows runs before it fails.
			again := append(slices.Clone(fresh), first[0])
			if engine == "postgres" {
				err := s.copyInsert(ctx, s.groupIDs(ids(again)), again, make([]store.Inserted, len(again)), time.Now())
				if err == nil || !uniqueViolation(err) {
					t.Fatalf("COPY of an existing ID answered %v, want a unique violation", err)
				}
				if n := countRows(t, s, "1 = 1"); n != len(first) {
					t.Fatalf("a failed COPY left %d rows, want %d", n, len(first))
				}
			}
			// The same call through Insert, twice (the second: all exist).
			// A task sent again is answered as written (it is), with the
			// time of this call.
			for range 2 {
				out, err := s.Insert(ctx, again)
				if err != nil {
					t.Fatal(err)
				}
				for i, in := range out {
					if in.Existing || in.Task.ID != again[i].ID {
						t.Fatalf("task %d answered %+v", i, in)
					}
				}
				if n := countRows(t, s, "1 = 1"); n != len(first)+len(fresh) {
					t.Fatalf("%d rows, want %d", n, len(first)+len(fresh))
				}
			}
		})
	}
}

// TestInsertWithoutKeysFailsWhole: a batch whose row in the last table is
// refused (a CHECK constraint added for the test) writes no row in any
// table, answers the server's error, and the connection it failed on
// serves the next inserts. With the tiny plan MariaDB's batch goes in many
// queries: those before the failing one are rolled back too.
func TestInsertWithoutKeysFailsWhole(t *testing.T) {
	for _, engine := range []string{"postgres", "mysql"} {
		for name, plan := range insertPlans(engine) {
			t.Run(engine+"/"+name, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				s := openT(t, engine, testdb.DSNs(t, engine, 1), 4, 4)
				s.ins = plan
				if _, err := s.w[0].ExecContext(ctx, `ALTER TABLE `+s.names[3]+` ADD CONSTRAINT no77 CHECK (max_attempts <> 77)`); err != nil {
					t.Fatal(err)
				}
				due := time.Now().Add(time.Hour)
				var tasks []store.NewTask
				for tb := range 4 {
					for range 50 {
						tasks = append(tasks, unkeyedIn(t, 1, 4, 0, tb, due))
					}
				}
				tasks[len(tasks)-1].MaxAttempts = 77
				_, err := s.Insert(ctx, tasks)
				if err == nil || !bytes.Contains([]byte(err.Error()), []byte("no77")) {
					t.Fatalf("Insert of a refused row answered %v, want the constraint's error", err)
				}
				if n := countRows(t, s, "1 = 1"); n != 0 {
					t.Fatalf("a failed Insert left %d rows", n)
				}
				tasks[len(tasks)-1].MaxAttempts = 3
				for range 6 { // more calls than the pool has connections
					batch := make([]store.NewTask, 0, len(tasks))
					for range tasks {
						batch = append(batch, newTask(t, "", due, 4))
					}
					if _, err := s.Insert(ctx, batch); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := s.Insert(ctx, tasks); err != nil {
					t.Fatal(err)
				}
				if n := countRows(t, s, "1 = 1"); n != 7*len(tasks) {
					t.Fatalf("%d rows, want %d", n, 7*len(tasks))
				}
			})
		}
	}
}

// TestInsertMixedAcrossDatabases: one call over two databases, keyed
// tasks in one (statements) and only tasks without keys in the other
// (COPY on PostgreSQL): every task is written once; sent again with new
// tasks of the same keys, the keys answer the stored tasks and nothing is
// doubled.
func TestInsertMixedAcrossDatabases(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := openT(t, engine, testdb.DSNs(t, engine, 2), 2, 4)
			due := time.Now().Add(time.Hour)
			var tasks []store.NewTask
			var keys []string
			for i := 0; len(keys) < 60; i++ {
				k := fmt.Sprintf("mixed-%d", i)
				if db, _ := s.topo.Locate(router.HashKey(k)); db == 0 {
					keys = append(keys, k)
					tasks = append(tasks, newTask(t, k, due, 4))
				}
			}
			keys = append(keys, keys[0]) // the same key twice in one call
			tasks = append(tasks, newTask(t, keys[0], due, 4))
			for tb := range 2 {
				for range 40 {
					tasks = append(tasks, unkeyedIn(t, 2, 2, 1, tb, due), unkeyedIn(t, 2, 2, 0, tb, due))
				}
			}
			if engine == "postgres" {
				for _, gs := range byDB(s.groupIDs(ids(tasks))) {
					if want := gs[0].db == 1; s.copyable(gs, tasks) != want {
						t.Fatalf("database %d goes by COPY: %v, want %v", gs[0].db, !want, want)
					}
				}
			}
			out, err := s.Insert(ctx, tasks)
			if err != nil {
				t.Fatal(err)
			}
			for i, in := range out {
				want := tasks[i].ID
				if i == len(keys)-1 {
					want = tasks[0].ID
				}
				if in.Task.ID != want || in.Existing != (want != tasks[i].ID) {
					t.Fatalf("task %d answered %s (existing %v), want %s", i, in.Task.ID, in.Existing, want)
				}
			}
			rows := func(db int) int {
				total := 0
				for _, tn := range s.names {
					var n int
					if err := s.w[db].QueryRowContext(ctx, `SELECT COUNT(*) FROM `+tn).Scan(&n); err != nil {
						t.Fatal(err)
					}
					total += n
				}
				return total
			}
			if a, b := rows(0), rows(1); a != 60+80 || b != 80 {
				t.Fatalf("rows per database %d and %d, want 140 and 80", a, b)
			}
			var again []store.NewTask
			for _, k := range keys[:10] {
				again = append(again, newTask(t, k, due, 4))
			}
			again = append(again, tasks[len(keys):]...)
			out, err = s.Insert(ctx, again)
			if err != nil {
				t.Fatal(err)
			}
			for i, in := range out[:10] {
				if !in.Existing || in.Task.ID != tasks[i].ID {
					t.Fatalf("key %s answered %+v, want the stored %s", keys[i], in, tasks[i].ID)
				}
			}
			if a, b := rows(0), rows(1); a != 60+80 || b != 80 {
				t.Fatalf("after the second call rows per database %d and %d, want 140 and 80", a, b)
			}
			checkStored(t, s, out[:10])
		})
	}
}

// byDB is the table groups of each database, as Insert passes them to
// insertTx.
func byDB(groups []group) [][]group {
	var mu sync.Mutex
	var out [][]group
	_ = forEachDB(groups, func(gs []group) error {
		mu.Lock()
		defer mu.Unlock()
		out = append(out, gs)
		return nil
	})
	return out
}

// TestInsertWithoutKeysConcurrent: concurrent batches without keys, and
// some cut short by their context, leave every batch that answered
// success stored whole and none that failed half-written.
func TestInsertWithoutKeysConcurrent(t *testing.T) {
	for _, engine := range []string{"postgres", "mysql"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			s := openT(t, engine, testdb.DSNs(t, engine, 1), 4, 4)
			due := time.Now().Add(time.Hour)
			var wg sync.WaitGroup
			var mu sync.Mutex
			var ok, failed [][]store.NewTask
			for w := range 6 {
				wg.Go(func() {
					for i := range 5 {
						var tasks []store.NewTask
						for range 400 {
							tasks = append(tasks, newTask(t, "", due, 4))
						}
						ctx, cancel := context.WithCancel(context.Background())
						if (w+i)%3 == 0 {
							time.AfterFunc(time.Duration(i)*time.Millisecond, cancel)
						}
						_, err := s.Insert(ctx, tasks)
						cancel()
						mu.Lock()
						if err == nil {
							ok = append(ok, tasks)
						} else {
							failed = append(failed, tasks)
						}
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			for _, tasks := range ok {
				for _, nt := range []store.NewTask{tasks[0], tasks[len(tasks)-1]} {
					if _, err := s.getW(context.Background(), nt.ID); err != nil {
						t.Fatalf("a batch answered success, its task %s: %v", nt.ID, err)
					}
				}
			}
			// A failed batch may have committed whole if the cancel came
			// after the commit: whole or nothing.
			written := 0
			for _, tasks := range failed {
				in := 0
				for _, nt := range tasks {
					if _, err := s.getW(context.Background(), nt.ID); err == nil {
						in++
					}
				}
				if in != 0 && in != len(tasks) {
					t.Fatalf("a failed batch is half-written: %d of %d rows", in, len(tasks))
				}
				written += in
			}
			if n := countRows(t, s, "1 = 1"); n != 400*len(ok)+written {
				t.Fatalf("%d rows, want %d", n, 400*len(ok)+written)
			}
			if len(ok) == 0 {
				t.Fatal("no batch succeeded")
			}
		})
	}
}
