package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/testdb"
)

func TestLiteChunks(t *testing.T) {
	for n := range 1200 {
		sum, prev := 0, liteMaxRows
		for _, c := range liteChunks(n) {
			if c < 1 || c > prev || c&(c-1) != 0 {
				t.Fatalf("n=%d: chunks %v: each a power of two, largest first, at most %d", n, liteChunks(n), liteMaxRows)
			}
			sum, prev = sum+c, c
		}
		if sum != n {
			t.Fatalf("n=%d: chunks %v sum to %d", n, liteChunks(n), sum)
		}
	}
}

// liteStmtSet is the statements a store holds, by key.
func liteStmtSet(s *Store) map[liteKey]*sql.Stmt {
	s.lite.mu.Lock()
	defer s.lite.mu.Unlock()
	out := make(map[liteKey]*sql.Stmt, len(s.lite.m))
	for k, v := range s.lite.m {
		out[k] = v
	}
	return out
}

// Batches of every size class, and sizes between them, each written
// twice: the first call creates every task (keyed ones once per key, the
// first of a call's duplicates winning, whichever statement of the
// decomposition the duplicates fall in); the keys submitted again create
// nothing and answer the stored tasks. The statements are prepared once per table
// and reused by every later call.
func TestLiteInsertEverySizeExact(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openT(t, "sqlite", testdb.DSNs(t, "sqlite", 1), 2, 2)
	due := time.Now().Add(time.Hour)
	var held map[liteKey]*sql.Stmt
	for _, n := range []int{1, 2, 3, 4, 7, 8, 31, 63, 64, 65, 127, 128, 129, 200, 600} {
		var tasks []store.NewTask
		want := make([]int, 0, n) // position → the position whose task it answers
		for i := range n {
			switch {
			case i%5 == 4 && i >= 30:
				// the key of a task ~30 positions earlier: another
				// statement of the decomposition, mostly
				tasks = append(tasks, newTask(t, tasks[i-30].Key, due, 2))
				want = append(want, want[i-30])
			case i%3 == 0:
				tasks = append(tasks, newTask(t, "", due, 2))
				want = append(want, i)
			default:
				tasks = append(tasks, newTask(t, fmt.Sprintf("n%d-%d", n, i), due, 2))
				want = append(want, i)
			}
			if tasks[i].Key == "" && i%5 == 4 && i >= 30 {
				// the earlier one was keyless: this one is its own task
				want[i] = i
			}
		}
		before := countRows(t, s, "1 = 1")
		first, err := s.Insert(ctx, tasks)
		if err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		created := 0
		for i, in := range first {
			if in.Task.ID != tasks[want[i]].ID || in.Existing != (want[i] != i) {
				t.Fatalf("n=%d task %d: answered %s existing=%v, want %s", n, i, in.Task.ID, in.Existing, tasks[want[i]].ID)
			}
			if !in.Existing {
				created++
			}
		}
		if got := countRows(t, s, "1 = 1") - before; got != created {
			t.Fatalf("n=%d: %d rows written, %d answered created", n, got, created)
		}
		checkStored(t, s, first)

		// The same keys submitted again (new IDs, as a retried submit
		// has): every keyed task answers the stored one.
		var retry []store.NewTask
		for _, nt := range tasks {
			if nt.Key != "" {
				retry = append(retry, newTask(t, nt.Key, due, 2))
			}
		}
		again, err := s.Insert(ctx, retry)
		if err != nil {
			t.Fatal(err)
		}
		j := 0
		for i := range tasks {
			if tasks[i].Key == "" {
				continue
			}
			in := again[j]
			j++
			if !in.Existing || in.Task.ID != first[i].Task.ID {
				t.Fatalf("n=%d task %d again: answered %s existing=%v, want the stored %s", n, i, in.Task.ID, in.Existing, first[i].Task.ID)
			}
		}
		if got := countRows(t, s, "1 = 1") - before; got != created {
			t.Fatalf("n=%d: the second call wrote %d rows", n, got-created)
		}

		got := liteStmtSet(s)
		if len(got)%liteClasses != 0 || len(got) > 2*liteClasses {
			t.Fatalf("after n=%d: %d statements, want %d per table touched", n, len(got), liteClasses)
		}
		for k, st := range held {
			if got[k] != st {
				t.Fatalf("after n=%d: statement %+v was prepared again", n, k)
			}
		}
		held = got
	}
	if len(held) != 2*liteClasses {
		t.Fatalf("%d statements, want %d (2 tables × %d sizes)", len(held), 2*liteClasses, liteClasses)
	}
}

// A prepared statement outlives schema changes: SQLite prepares it again
// when the table changes (a column added: every column still written as
// before), and an insert into a table dropped since fails rather than
// writing elsewhere.
func TestLiteInsertAfterSchemaChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openT(t, "sqlite", testdb.DSNs(t, "sqlite", 1), 1, 2)
	due := time.Now().Add(time.Hour)
	if _, err := s.Insert(ctx, []store.NewTask{newTask(t, "a", due, 2), newTask(t, "", due, 2)}); err != nil {
		t.Fatal(err)
	}
	stmts := liteStmtSet(s)
	for _, stmt := range []string{
		`ALTER TABLE ` + s.names[0] + ` ADD COLUMN extra INTEGER NOT NULL DEFAULT 7`,
		`CREATE INDEX extra_idx ON ` + s.names[0] + ` (extra, id)`,
	} {
		if _, err := s.w[0].ExecContext(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	tasks := []store.NewTask{newTask(t, "b", due, 2), newTask(t, "a", due, 2), newTask(t, "", due, 2)}
	out, err := s.Insert(ctx, tasks)
	if err != nil {
		t.Fatal(err)
	}
	if out[0].Existing || !out[1].Existing || out[2].Existing {
		t.Fatalf("after ALTER: %+v", out)
	}
	checkStored(t, s, []store.Inserted{out[0], out[2]})
	var extra int
	if err := s.w[0].QueryRowContext(ctx, `SELECT extra FROM `+s.names[0]+` WHERE id = ?`, out[0].Task.ID).Scan(&extra); err != nil || extra != 7 {
		t.Fatalf("new column: %d, %v", extra, err)
	}
	for k, st := range liteStmtSet(s) {
		if stmts[k] != st {
			t.Fatalf("statement %+v replaced; SQLite re-prepares it itself", k)
		}
	}

	if _, err := s.w[0].ExecContext(ctx, `DROP TABLE `+s.names[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Insert(ctx, []store.NewTask{newTask(t, "", due, 2)}); err == nil {
		t.Fatal("insert into a dropped table answered no error")
	}
}

// Close closes the statements; an insert after it fails.
func TestLiteStmtsClosedWithStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := Open(ctx, Config{Driver: "sqlite", DSNs: testdb.DSNs(t, "sqlite", 1), Tables: 2, Segments: 2})
	if err != nil {
		t.Fatal(err)
	}
	due := time.Now().Add(time.Hour)
	if _, err := s.Insert(ctx, []store.NewTask{newTask(t, "", due, 2), newTask(t, "", due, 2), newTask(t, "", due, 2)}); err != nil {
		t.Fatal(err)
	}
	held := liteStmtSet(s)
	if len(held) == 0 {
		t.Fatal("no statements held after an insert")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := s.lite.len(); n != 0 {
		t.Fatalf("%d statements left after Close", n)
	}
	for k, st := range held {
		// A closed Stmt answers "statement is closed".
		if _, err := st.ExecContext(ctx); err == nil {
			t.Fatalf("statement %+v still usable after Close", k)
		}
	}
	if _, err := s.Insert(ctx, []store.NewTask{newTask(t, "", due, 2)}); err == nil {
		t.Fatal("insert after Close answered no error")
	}
}

// Concurrent inserts into tables not yet prepared: one inserts (holding the
// only writer connection) while another prepares its table's statements;
// neither may wait on the other. (A lock held across the prepare
// deadlocked the two.) Every task is written.
func TestLiteConcurrentFirstInserts(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := openT(t, "sqlite", testdb.DSNs(t, "sqlite", 1), 8, 2)
	due := time.Now().Add(time.Hour)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 16 {
		wg.Go(func() {
			for i := range 10 {
				tasks := []store.NewTask{newTask(t, "", due, 2)}
				if i%2 == 0 {
					tasks = append(tasks, newTask(t, fmt.Sprintf("g%d-%d", g, i), due, 2), newTask(t, "", due, 2))
				}
				if _, err := s.Insert(ctx, tasks); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := countRows(t, s, "1 = 1"); n != 16*(5*1+5*3) {
		t.Fatalf("%d rows, want %d", n, 16*20)
	}
}
