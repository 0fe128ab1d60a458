package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/router"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
	"github.com/ontimehq/ontime/internal/testdb"
)

func openT(t *testing.T, engine string, dsns []string, tables, segs int) *Store {
	t.Helper()
	s, err := Open(context.Background(), Config{Driver: engine, DSNs: dsns, Tables: tables, Segments: segs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func newTask(t testing.TB, key string, due time.Time, segs int) store.NewTask {
	v, err := task.Validate(task.Spec{Topic: "t", Key: key, DueAt: &due, Payload: []byte(`{}`)}, task.Limits{}, due.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var h uint32
	if key != "" {
		h = router.HashKey(key)
	}
	id, p := router.NewID(time.Now(), h, key != "")
	return store.NewTask{ID: id, ShardHash: p.ShardHash, Seg: p.Segment(segs), Validated: v}
}

func TestOpenValidatesConfig(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for name, tc := range map[string]struct {
		cfg  Config
		want string
	}{
		"driver":        {Config{Driver: "oracle", DSNs: []string{"x"}, Tables: 1, Segments: 1}, "store.driver"},
		"no dbs":        {Config{Driver: "sqlite", Tables: 1, Segments: 1}, "store.databases"},
		"tables":        {Config{Driver: "sqlite", DSNs: []string{"x"}, Tables: -1, Segments: 1}, "store.tables"},
		"segments":      {Config{Driver: "sqlite", DSNs: []string{"x"}, Tables: 1, Segments: 0}, "store.segments"},
		"mysql dsn":     {Config{Driver: "mysql", DSNs: []string{"root:secretpw@tcp(127.0.0.1:3306"}, Tables: 1, Segments: 1}, "store.databases[0]: malformed"},
		"mysql no db":   {Config{Driver: "mysql", DSNs: []string{"root@tcp(127.0.0.1:3306)/"}, Tables: 1, Segments: 1}, "store.databases[0]"},
		"mysql down":    {Config{Driver: "mysql", DSNs: []string{"root:secretpw@tcp(127.0.0.1:1)/x"}, Tables: 1, Segments: 1}, "store.databases[0]: cannot reach"},
		"postgres dsn":  {Config{Driver: "postgres", DSNs: []string{"postgres://u:secretpw@h:notaport/db"}, Tables: 1, Segments: 1}, "store.databases[0]: malformed"},
		"postgres down": {Config{Driver: "postgres", DSNs: []string{"postgres://u:secretpw@127.0.0.1:1/db?connect_timeout=2"}, Tables: 1, Segments: 1}, "store.databases[0]: cannot reach"},
	} {
		_, err := Open(ctx, tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", name, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "secretpw") {
			t.Errorf("%s: the error shows the password: %v", name, err)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error spans lines: %q", name, err)
		}
	}
}

// TestMigrateConcurrentAndIdempotent: several nodes opening the same
// databases at once migrate once; reopening changes nothing; a different
// table count is refused, naming the key.
func TestMigrateConcurrentAndIdempotent(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			dsns := testdb.DSNs(t, engine, 2)
			var wg sync.WaitGroup
			errs := make([]error, 4)
			for i := range errs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					s, err := Open(context.Background(), Config{Driver: engine, DSNs: dsns, Tables: 3, Segments: 2})
					if err == nil {
						s.Close()
					}
					errs[i] = err
				}()
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					t.Fatalf("concurrent open: %v", err)
				}
			}
			s := openT(t, engine, dsns, 3, 2)
			nt := newTask(t, "k", time.Now().Add(time.Hour), 2)
			if _, err := s.Insert(context.Background(), []store.NewTask{nt}); err != nil {
				t.Fatal(err)
			}
			s2 := openT(t, engine, dsns, 3, 2) // idempotent: data kept
			if _, err := s2.Get(context.Background(), nt.ID); err != nil {
				t.Fatalf("reopen lost data: %v", err)
			}
			if _, err := Open(context.Background(), Config{Driver: engine, DSNs: dsns, Tables: 4, Segments: 2}); err == nil || !strings.Contains(err.Error(), "store.tables") {
				t.Fatalf("different table count: %v", err)
			}
			if _, err := Open(context.Background(), Config{Driver: engine, DSNs: dsns, Tables: 3, Segments: 3}); err == nil || !strings.Contains(err.Error(), "store.segments") {
				t.Fatalf("different segment count: %v", err)
			}
		})
	}
}

// TestTablesUnset: a config without store.tables opens a new store with
// DefaultTables (1, every engine) and records them; an existing store
// opens with the tables it records, whatever they are, and a config that
// names another count is still refused.
func TestTablesUnset(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			fresh := testdb.DSNs(t, engine, 2)
			s := openT(t, engine, fresh, 0, 2)
			const want = 1
			if s.Tables() != want || DefaultTables != want {
				t.Fatalf("a new store without store.tables has %d tables (DefaultTables %d), want %d", s.Tables(), DefaultTables, want)
			}
			for i, db := range s.w {
				var v string
				if err := db.QueryRowContext(ctx, `SELECT v FROM ontime_meta WHERE k = 'tables'`).Scan(&v); err != nil || v != strconv.Itoa(want) {
					t.Fatalf("databases[%d] records %q tables (%v), want %d", i, v, err, want)
				}
			}
			// A task written through it is found again by a store opened
			// with the count named.
			nt := newTask(t, "k", time.Now().Add(time.Hour), 2)
			if _, err := s.Insert(ctx, []store.NewTask{nt}); err != nil {
				t.Fatal(err)
			}
			if _, err := openT(t, engine, fresh, want, 2).Get(ctx, nt.ID); err != nil {
				t.Fatalf("store opened with store.tables %d: %v", want, err)
			}

			old := testdb.DSNs(t, engine, 2)
			openT(t, engine, old, 5, 2).Close()
			s = openT(t, engine, old, 0, 2)
			if s.Tables() != 5 {
				t.Fatalf("a store created with 5 tables opens with %d when store.tables is unset", s.Tables())
			}
			if len(s.names) != 5 || s.topo.Tables != 5 {
				t.Fatalf("topology %+v, %d table names, want 5 tables", s.topo, len(s.names))
			}
			if _, err := Open(ctx, Config{Driver: engine, DSNs: old, Tables: want, Segments: 2}); err == nil || !strings.Contains(err.Error(), "store.tables") {
				t.Fatalf("store.tables %d on a store of 5: %v, want refused", want, err)
			}
		})
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestQueriesUseScanIndex: the claim, expired-lease claim, keyset scan and
// NextDue queries run on the (seg, status, due_at, id) index on every
// engine, with realistic data (most rows done, statistics gathered).
func TestQueriesUseScanIndex(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			s, tasks, now := planRows(t, engine)
			tn, db := s.names[0], s.w[0]
			h := now.Add(time.Hour).UnixMicro()
			refs := []store.Ref{{ID: tasks[0].ID, Token: 1}, {ID: tasks[1].ID, Token: 2}, {ID: tasks[2].ID, Token: 2}}
			match, margs := refMatch(refs)
			queries := map[string]struct {
				q    string
				args []any
			}{
				// Start, Finish, Release: by primary key, however many rows are claimed.
				"start by refs": {`SELECT id FROM ` + tn + ` WHERE status = ? AND ` + match, append([]any{1}, margs...)},
				"claim due":     {claimSelect(tn, dueWhere, dueOrder), []any{1, 0, h, 500}},
				"claim expired": {claimSelect(tn, expiredWhere, expiredOrder), []any{1, h, 500}},
				// A paused topic is a residual filter on the same index walk.
				"claim due, a topic paused": {claimSelect(tn, dueWhere+` AND topic NOT IN (?)`, dueOrder), []any{1, 0, h, "paused.topic", 500}},
				"keyset scan":               {scanQuery(tn, true, ""), []any{1, 0, h, h - 1000, h - 1000, "0", 500}},
				"next due":                  {nextDueQuery(tn, ""), []any{1, 0, 1, 1, 1, 2}},
				// A residual filter: the first row of each range in order,
				// not a MIN that MariaDB answers by reading the whole range.
				"next due, a cleanup under way": {nextDueOwnedQuery(tn, ` AND shard_hash % 16 < 8`, ""), []any{1, 0, 1, 1, 1, 2}},
				"next due, a topic paused":      {nextDueQuery(tn, ` AND topic NOT IN (?)`), []any{1, 0, "paused.topic", 1, 1, 1, 2}},
				"extend leases":                 {extendQuery(tn, 4, 2), []any{0, 0, 1, h, 1, 2}},
			}
			if engine == "postgres" {
				// What NextDue sends there (scan.go, nextDueText).
				queries["next due, in order"] = struct {
					q    string
					args []any
				}{nextDueText(tn, "", "", true), []any{1, 0, 1, 1, 1, 2}}
			}
			for name, q := range queries {
				plan := explain(t, engine, db, s.d.rebind(q.q), q.args)
				if fullScan(engine, plan) {
					t.Errorf("%s: plan reads the whole table:\n%s", name, plan)
				}
				// The claim and the keyset scan must walk the scan index; with
				// SQLite and MariaDB, in order (no sort). PostgreSQL may choose
				// a bitmap scan of the same index plus a sort of the few rows
				// found, by its statistics.
				// SQLite plans without statistics in production: it must seek
				// each id, never walk every claimed row. (PostgreSQL and
				// MariaDB choose by their statistics; no full scan either way.)
				if name == "start by refs" && engine == "sqlite" && !strings.Contains(plan, "id=?") {
					t.Errorf("%s: plan does not seek rows by id:\n%s", name, plan)
				}
				// The leases a claim or a scan reads are those that ended, or
				// the first of each status: never every lease held (schema21.go).
				// MariaDB answers MIN from the index while planning: it names none.
				optimized := engine == "mysql" && name == "next due" &&
					strings.Count(plan, "Select tables optimized away")+strings.Count(plan, "No matching min/max row") == 3
				// MariaDB chooses an extension's index by its statistics,
				// which at one claimed row here make any index as good.
				nextDue := strings.HasPrefix(name, "next due")
				leases := name == "claim expired" || nextDue || name == "extend leases" && engine != "mysql"
				used := strings.Contains(plan, tn+"_lease ") || strings.Contains(plan, "key="+tn+"_lease ")
				if leases && !used && !optimized {
					t.Errorf("%s: plan does not use the leases index:\n%s", name, plan)
				}
				if name == "claim due" || name == "keyset scan" || name == "claim due, a topic paused" || nextDue && name != "next due" {
					if !strings.Contains(plan, tn+"_scan") && !strings.Contains(plan, "key=scan ") {
						t.Errorf("%s: plan does not use the scan index:\n%s", name, plan)
					}
					if engine != "postgres" && (strings.Contains(plan, "filesort") || strings.Contains(plan, "TEMP B-TREE")) {
						t.Errorf("%s: plan sorts instead of reading the index in order:\n%s", name, plan)
					}
				}
				t.Logf("%s plan:\n%s", name, plan)
			}
		})
	}
}

// TestLeaseHeldStatuses: the literal statuses of the leases index's WHERE
// term are those of a claimed and a running task.
func TestLeaseHeldStatuses(t *testing.T) {
	want := fmt.Sprintf("status IN (%d, %d) AND lease_until >= 0", task.StatusClaimed, task.StatusRunning)
	if leaseHeld != want {
		t.Fatalf("leaseHeld is %q, want %q", leaseHeld, want)
	}
}

// fullScan spots a table scan in a plan.
func fullScan(engine, plan string) bool {
	switch engine {
	case "postgres":
		return strings.Contains(plan, "Seq Scan")
	case "mysql":
		return strings.Contains(plan, "type=ALL ")
	default:
		for _, line := range strings.Split(plan, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "SCAN ontime_") && !strings.Contains(line, "INDEX") {
				return true
			}
		}
		return false
	}
}

func explain(t *testing.T, engine string, db *sql.DB, q string, args []any) string {
	t.Helper()
	prefix := map[string]string{"sqlite": "EXPLAIN QUERY PLAN ", "mysql": "EXPLAIN ", "postgres": "EXPLAIN "}[engine]
	rows, err := db.QueryContext(context.Background(), prefix+q, args...)
	if err != nil {
		t.Fatalf("explain: %v", err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var b strings.Builder
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		for i, v := range vals {
			if engine == "mysql" {
				fmt.Fprintf(&b, "%s=%s ", cols[i], v.String)
			} else if cols[i] == "detail" || cols[i] == "QUERY PLAN" {
				b.WriteString(v.String)
			}
		}
		b.WriteString("\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// planRows opens a store of one table on engine holding 20,000 tasks due
// a second apart from now, the first 19,000 done, with the engine's
// statistics gathered: what query plans are checked on.
func planRows(t *testing.T, engine string) (*Store, []store.NewTask, time.Time) {
	t.Helper()
	ctx := context.Background()
	s := openT(t, engine, testdb.DSNs(t, engine, 1), 1, 4)
	var tasks []store.NewTask
	now := time.Now()
	for i := range 20000 {
		tasks = append(tasks, newTask(t, "", now.Add(time.Duration(i)*time.Second), 4))
	}
	if _, err := s.Insert(ctx, tasks); err != nil {
		t.Fatal(err)
	}
	tn, db := s.names[0], s.w[0]
	if _, err := db.ExecContext(ctx, s.d.rebind(`UPDATE `+tn+` SET status = ? WHERE due_at < ?`), int(task.StatusDone), now.Add(19000*time.Second).UnixMicro()); err != nil {
		t.Fatal(err)
	}
	analyze := map[string]string{"sqlite": "ANALYZE", "mysql": "ANALYZE TABLE " + tn, "postgres": "ANALYZE " + tn}[engine]
	if _, err := db.ExecContext(ctx, analyze); err != nil {
		t.Fatal(err)
	}
	return s, tasks, now
}

// stepAgain runs migration step v once more on database db of s: every
// step must find its work done and change nothing.
func stepAgain(t *testing.T, s *Store, db, v int) {
	t.Helper()
	ctx := context.Background()
	c, err := s.w[db].Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := s.migrateTo(ctx, c, v); err != nil {
		t.Fatalf("step %d again: %v", v, err)
	}
}

// backTo makes s's first database look as version v left it: column
// dropped from every task table and v recorded.
func backTo(t *testing.T, s *Store, column string, v int) {
	t.Helper()
	ctx := context.Background()
	for _, name := range s.names {
		if _, err := s.w[0].ExecContext(ctx, `ALTER TABLE `+name+` DROP COLUMN `+column); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.w[0].ExecContext(ctx, s.d.rebind(s.d.upsertMeta), "schema_version", strconv.Itoa(v)); err != nil {
		t.Fatal(err)
	}
}
