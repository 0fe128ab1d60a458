package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
	"github.com/ontimehq/ontime/internal/testdb"
)

// PostgreSQL's keyed batches, of one table or several, go in one
// statement (insert_keyed.go); the other engines and keyless batches do
// not.
func TestKeyedStatementChosen(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			s := openT(t, engine, testdb.DSNs(t, engine, 1), 3, 2)
			due := time.Now().Add(time.Hour)
			tasks := []store.NewTask{keyedIn(t, 3, 0, "a", due), keyedIn(t, 3, 1, "b", due), newTask(t, "", due, 2)}
			if one := []store.NewTask{tasks[0]}; s.oneStatement(s.groupIDs([]string{one[0].ID}), one) != (engine == "postgres") {
				t.Fatalf("a keyed submit of one table in the keyed statement: %v, want %v", !(engine == "postgres"), engine == "postgres")
			}
			keyless := []store.NewTask{newTask(t, "", due, 2), newTask(t, "", due, 2)}
			gs := s.groupIDs([]string{tasks[0].ID, tasks[1].ID, tasks[2].ID})
			if got, want := s.oneStatement(gs, tasks), engine == "postgres"; got != want {
				t.Fatalf("keyed batch in one statement: %v, want %v", got, want)
			}
			if s.oneStatement(s.groupIDs([]string{keyless[0].ID, keyless[1].ID}), keyless) {
				t.Fatal("a keyless batch took the keyed statement (COPY's)")
			}
		})
	}
}

// keyedInsert on its own: per-task answers (created, a live holder, a
// final holder within the hold for keep and for replace, the same key
// twice, keyless rows, an ID inserted before) in one statement over three
// tables; and a statement that fails writes nothing in any table.
func TestKeyedInsertStatement(t *testing.T) {
	t.Parallel()
	// all: the statement names all four tables, prepared (more than one
	// has rows); else only those with rows.
	for _, all := range []bool{true, false} {
		t.Run(fmt.Sprintf("all=%v", all), func(t *testing.T) {
			t.Parallel()
			testKeyedInsertStatement(t, all)
		})
	}
}

func testKeyedInsertStatement(t *testing.T, all bool) {
	const hold = time.Hour
	ctx := context.Background()
	s, err := Open(ctx, Config{Driver: "postgres", DSNs: testdb.DSNs(t, "postgres", 1), Tables: 4, Segments: 2, KeyHold: hold})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	s.ins.keyedAll = all
	due := time.Now().Add(time.Hour)
	live, final, again := keyedIn(t, 4, 0, "live", due), keyedIn(t, 4, 1, "final", due), newTask(t, "", due, 2)
	if _, err := s.Insert(ctx, []store.NewTask{live, final, again}); err != nil {
		t.Fatal(err)
	}
	cancelled, err := s.Cancel(ctx, final.ID)
	if err != nil {
		t.Fatal(err)
	}
	repl := func(nt store.NewTask) store.NewTask { nt.ReplaceFinal = true; return nt }
	same := func(nt store.NewTask) store.NewTask { return newTask(t, nt.Key, due, 2) }
	fresh := keyedIn(t, 4, 2, "fresh", due)
	tasks := []store.NewTask{
		fresh,                            // 0 created
		same(live),                       // 1 existing live
		same(final),                      // 2 existing final, held until
		repl(same(final)),                // 3 created over the final task
		repl(same(final)),                // 4 meets 3
		same(fresh),                      // 5 meets 0
		newTask(t, "", due, 2),           // 6 keyless, created
		again,                            // 7 keyless, its ID exists: skipped
		repl(keyedIn(t, 4, 0, "r", due)), // 8 created
	}
	ids := make([]string, len(tasks))
	for i := range tasks {
		ids[i] = tasks[i].ID
	}
	gs := s.groupIDs(ids)
	if len(gs) < 3 || !s.oneStatement(gs, tasks) || s.allTables(len(gs)) != all {
		t.Fatalf("%d tables, one statement %v, naming every table %v", len(gs), s.oneStatement(gs, tasks), s.allTables(len(gs)))
	}
	out := make([]store.Inserted, len(tasks))
	rest, err := s.keyedInsert(ctx, gs, tasks, out, time.Now())
	if err != nil || len(rest) != 0 {
		t.Fatalf("keyedInsert: %v, %d groups left", err, len(rest))
	}
	want := []struct {
		existing bool
		id       string
		held     bool
	}{{false, fresh.ID, false}, {true, live.ID, false}, {true, final.ID, true}, {false, tasks[3].ID, false},
		{true, tasks[3].ID, false}, {true, fresh.ID, false}, {false, tasks[6].ID, false}, {false, again.ID, false}, {false, tasks[8].ID, false}}
	// A keep over a key that a replace of the same statement made live
	// again may answer either: the final task (as if before the replace)
	// or the replace's task (after it).
	if out[2].Task.ID == tasks[3].ID && out[2].Existing && out[2].HeldUntil.IsZero() {
		want[2].id, want[2].held = tasks[3].ID, false
	}
	for i, w := range want {
		r := out[i]
		if r.Existing != w.existing || r.Task.ID != w.id || r.HeldUntil.IsZero() == w.held {
			t.Fatalf("task %d: existing=%v id=%s held until %v; want existing=%v id=%s held=%v", i, r.Existing, r.Task.ID, r.HeldUntil, w.existing, w.id, w.held)
		}
	}
	if want[2].held && (!out[2].HeldUntil.Equal(cancelled.UpdatedAt.Add(hold)) || out[2].Task.Status != task.StatusCancelled) {
		t.Fatalf("held by %s until %v; want %v", out[2].Task.Status, out[2].HeldUntil, cancelled.UpdatedAt.Add(hold))
	}
	counts, err := s.Count(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// live, again, fresh, 3, 6, 8 pending; final cancelled.
	if counts[task.StatusPending] != 6 || counts[task.StatusCancelled] != 1 {
		t.Fatalf("counts %v; want 6 pending and 1 cancelled", counts)
	}

	// One table gone: the statement fails, and no table has its rows.
	if _, err := s.w[0].ExecContext(ctx, `DROP TABLE `+s.names[2]); err != nil {
		t.Fatal(err)
	}
	var batch []store.NewTask
	for i := range 9 {
		batch = append(batch, keyedIn(t, 4, i%3, fmt.Sprintf("gone%d", i), due))
	}
	ids = ids[:0]
	for _, nt := range batch {
		ids = append(ids, nt.ID)
	}
	if _, err := s.keyedInsert(ctx, s.groupIDs(ids), batch, make([]store.Inserted, len(batch)), time.Now()); err == nil {
		t.Fatal("keyedInsert into a dropped table answered no error")
	}
	for _, tb := range []string{s.names[0], s.names[1], s.names[3]} {
		var n int
		if err := s.w[0].QueryRowContext(ctx, `SELECT COUNT(*) FROM `+tb+` WHERE task_key LIKE 'gone%'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Fatalf("a failed statement left %d rows in %s", n, tb)
		}
	}
}

// The keyed statement is planned once per connection on PostgreSQL: its
// pool's sessions keep the generic plan (keyedPool) where the server would
// plan every call for its values. Groups over different sets of tables
// share the one statement naming every table; the store's other
// statements run on the other pool, planned as before.
func TestKeyedStatementPlannedOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openT(t, "postgres", testdb.DSNs(t, "postgres", 1), 4, 2)
	s.kw[0].SetMaxOpenConns(1) // one session: its prepared statements below
	due := time.Now().Add(time.Hour)
	sets := [][]int{{0}, {0}, {1, 2}, {0, 3}, {1, 2, 3}, {2}, {0, 1}, {3, 1}, {0}, {2, 0}}
	for i, tables := range sets {
		var tasks []store.NewTask
		for _, tb := range tables {
			tasks = append(tasks, keyedIn(t, 4, tb, fmt.Sprintf("plan%d-%d", i, tb), due))
		}
		res, err := s.Insert(ctx, tasks)
		if err != nil {
			t.Fatal(err)
		}
		for j, r := range res {
			if r.Existing || r.Task.ID != tasks[j].ID {
				t.Fatalf("set %d, task %d: existing %v, id %s; want %s created", i, j, r.Existing, r.Task.ID, tasks[j].ID)
			}
		}
	}
	rows, err := s.kw[0].QueryContext(ctx, `SELECT name, parameter_types::text, statement, generic_plans, custom_plans FROM pg_prepared_statements`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var every, one int
	var everyName, everyTypes string
	for rows.Next() {
		var name, types, stmt string
		var generic, custom int
		if err := rows.Scan(&name, &types, &stmt, &generic, &custom); err != nil {
			t.Fatal(err)
		}
		if strings.Count(stmt, "INSERT INTO") == 4 {
			everyName, everyTypes = name, types
		}
		if custom != 0 || generic == 0 {
			t.Errorf("%d custom and %d generic plans of %.80q…", custom, generic, stmt)
		}
		switch n := strings.Count(stmt, "INSERT INTO"); n {
		case 4:
			every += generic
		case 1:
			one += generic
		default:
			t.Errorf("a statement over %d tables: %.80q…", n, stmt)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	// Six groups of several tables ran the statement naming all four;
	// four of one table ran the one-table statements.
	if every != 6 || one != 4 {
		t.Fatalf("%d runs of the statement over every table, %d of one table's; want 6 and 4", every, one)
	}
	rows.Close()
	// The plan was made once, over near-empty tables, and serves the
	// connection's life whatever they grow to: each table's key hold must
	// be an index probe per row, never a scan of the table.
	params := strings.TrimSuffix(strings.Repeat("NULL, ", strings.Count(everyTypes, ",")+1), ", ")
	plan := explain(t, "postgres", s.kw[0], `EXECUTE `+everyName+`(`+params+`)`, nil)
	// Two probes a table: a live holder, a final one (endedkeys.go).
	if strings.Contains(plan, "Seq Scan on ontime_tasks") || strings.Count(plan, "_live_keyed on ontime_tasks_") != 4 ||
		strings.Count(plan, "_ended_keyed on ontime_tasks_") != 4 {
		t.Fatalf("the generic plan does not probe each table's key index:\n%s", plan)
	}
}

// The keyed pool's connections come out of store.max_connections: a node
// opens no more than that to a database; below 16 there is no keyed pool.
func TestPoolSizes(t *testing.T) {
	for _, c := range []struct {
		driver           string
		max, main, keyed int
	}{{"postgres", 0, 24, 8}, {"postgres", 32, 24, 8}, {"postgres", 16, 12, 4}, {"postgres", 15, 15, 0}, {"postgres", 8, 8, 0}, {"postgres", 2, 2, 0}, {"postgres", 1000, 750, 250}, {"mysql", 32, 32, 0}} {
		s := &Store{cfg: Config{MaxConns: c.max}, ins: planFor(dialects[c.driver])}
		if main, keyed := s.poolSizes(); main != c.main || keyed != c.keyed {
			t.Errorf("%s, %d connections: %d main and %d keyed; want %d and %d", c.driver, c.max, main, keyed, c.main, c.keyed)
		}
	}
}

// TestKeyedInsertHolderEndingMeanwhile: on PostgreSQL, a keyed insert
// whose key's holder is live when the statement starts and ends before
// the statement writes answers that holder and makes no second task. The
// holder's end is held open in a transaction of its own while the insert
// runs: the insert must see the holder in its snapshot (the live NOT
// EXISTS) rather than wait on the live-key index for that transaction and
// then find the key free (it did once the live holder was left to ON
// CONFLICT alone: TestChaosOutboxKill under load saw messages become two
// tasks).
func TestKeyedInsertHolderEndingMeanwhile(t *testing.T) {
	// One task: the keyed statement; 150: a keyed COPY, whose check of the
	// keys runs after the COPY in a snapshot of its own.
	for _, n := range []int{1, 150} {
		t.Run(fmt.Sprintf("batch=%d", n), func(t *testing.T) {
			t.Parallel()
			holderEndingMeanwhile(t, n)
		})
	}
}

func holderEndingMeanwhile(t *testing.T, n int) {
	ctx := context.Background()
	s, err := Open(ctx, Config{Driver: "postgres", DSNs: testdb.DSNs(t, "postgres", 1), Tables: 1, Segments: 1, KeyHold: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Now()
	holder := newTask(t, "order-1", now.Add(time.Hour), 1)
	if _, err := s.Insert(ctx, []store.NewTask{holder}); err != nil {
		t.Fatal(err)
	}
	// The holder's end, not committed yet.
	end, err := s.w[0].BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = end.Rollback() }()
	if _, err := end.ExecContext(ctx, `UPDATE `+s.names[0]+` SET status = $1, updated_at = $2 WHERE id = $3`,
		int(task.StatusDone), now.UnixMicro(), holder.ID); err != nil {
		t.Fatal(err)
	}
	type result struct {
		ins []store.Inserted
		err error
	}
	done := make(chan result, 1)
	batch := []store.NewTask{newTask(t, "order-1", now.Add(time.Hour), 1)}
	for i := 1; i < n; i++ {
		batch = append(batch, newTask(t, fmt.Sprintf("other-%d", i), now.Add(time.Hour), 1))
	}
	go func() {
		ins, err := s.Insert(ctx, batch)
		done <- result{ins, err}
	}()
	// Let the insert run to its answer, or to a wait on the holder's end.
	var r result
	waitLoop := time.NewTimer(30 * time.Second)
	defer waitLoop.Stop()
wait:
	for {
		select {
		case r = <-done:
			break wait
		case <-waitLoop.C:
			t.Fatal("the insert neither answered nor waited on a lock in 30 s")
		case <-time.After(20 * time.Millisecond):
			var waiting int
			if err := s.w[0].QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
				t.Fatal(err)
			}
			if waiting > 0 {
				// It waits on the end: let it go, and take its answer.
				if err := end.Commit(); err != nil {
					t.Fatal(err)
				}
				r = <-done
				break wait
			}
		}
	}
	if err := end.Commit(); err != nil && !errors.Is(err, sql.ErrTxDone) {
		t.Fatal(err)
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := r.ins[0]; !got.Existing || got.Task.ID != holder.ID {
		t.Fatalf("insert over a holder ending meanwhile: %+v; want the holder %s, existing", got.Task, holder.ID)
	}
	for i, r := range r.ins[1:] {
		if r.Existing || r.Task.ID != batch[i+1].ID {
			t.Fatalf("task %d of the batch: %+v; want it created", i+1, r)
		}
	}
	var rows int
	if err := s.w[0].QueryRowContext(ctx, `SELECT count(*) FROM `+s.names[0]+` WHERE task_key = 'order-1'`).Scan(&rows); err != nil || rows != 1 {
		t.Fatalf("%d tasks of the key (%v); want 1", rows, err)
	}
}
