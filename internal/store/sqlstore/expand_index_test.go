package sqlstore

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/sqldb"
	"github.com/ontimehq/ontime/internal/task"
	"github.com/ontimehq/ontime/internal/testdb"
)

// hasChangesIndex reports whether table tn of db has the catch-up's index
// of changes.
func hasChangesIndex(t *testing.T, engine string, db *sql.DB, tn string) bool {
	t.Helper()
	q := map[string]string{
		"sqlite":   `SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name = ?`,
		"mysql":    `SELECT COUNT(*) FROM information_schema.statistics WHERE table_schema = DATABASE() AND index_name = ?`,
		"postgres": `SELECT COUNT(*) FROM pg_class c WHERE c.relname = $1 AND c.relkind = 'i' AND pg_table_is_visible(c.oid)`,
	}[engine]
	var n int
	if err := db.QueryRowContext(context.Background(), q, changesIndex(tn)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// TestCatchUpReadsChanges: on MariaDB and PostgreSQL the copy's catch-up
// reads the rows changed since its last pass through an index of changes,
// in order, not every row of the table (the cutover's pause waits for the
// last pass); rows changed at one microsecond across many pages are all
// copied; an abort drops the index. SQLite scans, and copies the same.
func TestCatchUpReadsChanges(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s, _, _ := planRows(t, engine)
			twin := testdb.DSNs(t, engine, 1)
			tn, db := s.names[0], s.w[0]
			if err := s.ExpandBegin(ctx, twin); err != nil {
				t.Fatal(err)
			}
			if err := s.ExpandCopy(ctx, ExpandOptions{Page: 1000}); err != nil {
				t.Fatal(err)
			}
			indexed := engine != "sqlite"
			if got := hasChangesIndex(t, engine, db, tn); got != indexed {
				t.Fatalf("index of changes after the copy: %v, want %v", got, indexed)
			}
			if indexed {
				analyze := map[string]string{"mysql": "ANALYZE TABLE " + tn, "postgres": "ANALYZE " + tn}[engine]
				if _, err := db.ExecContext(ctx, analyze); err != nil {
					t.Fatal(err)
				}
				pred, pargs := s.moving(1)
				since := time.Now().Add(-2 * time.Second).UnixMicro()
				for _, status := range []string{`status >= 3`, `status < 3`} {
					for _, after := range []string{"", "01m8xe4zdyvakye240k563j3dc"} {
						where, order, args := s.catchUpWhere(status, pred, pargs, since, since, after)
						plan := explain(t, engine, db, s.d.rebind(`SELECT `+cols+` FROM `+tn+` WHERE `+where+` ORDER BY `+order+` LIMIT 1000`), args)
						if fullScan(engine, plan) || !strings.Contains(plan, changesIndex(tn)) {
							t.Errorf("catch-up %s after %q: plan does not read the index of changes:\n%s", status, after, plan)
						}
						if engine == "mysql" && strings.Contains(plan, "filesort") {
							t.Errorf("catch-up %s after %q: plan sorts instead of reading the index in order:\n%s", status, after, plan)
						}
						t.Logf("catch-up %s after %q:\n%s", status, after, plan)
					}
				}
			}

			// Rows changed at one microsecond, across pages of 7 rows:
			// each page starts after the last (updated_at, id), so none is
			// passed over.
			pred, pargs := s.moving(1)
			at := time.Now().UnixMicro()
			res, err := db.ExecContext(ctx, s.d.rebind(`UPDATE `+tn+` SET status = ?, updated_at = ? WHERE status = 0 AND `+pred),
				append([]any{int(task.StatusDead), at}, pargs...)...)
			if err != nil {
				t.Fatal(err)
			}
			changed, _ := res.RowsAffected()
			if changed < 100 {
				t.Fatalf("%d rows changed: too few to span pages", changed)
			}
			if err := s.ExpandCopy(ctx, ExpandOptions{Page: 7}); err != nil {
				t.Fatal(err)
			}
			tdb, err := sqldb.Open(engine, twin[0], sqldb.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer tdb.Close()
			var got int64
			if err := tdb.QueryRowContext(ctx, s.d.rebind(`SELECT COUNT(*) FROM `+tn+` WHERE status = ? AND updated_at = ?`), int(task.StatusDead), at).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != changed {
				t.Fatalf("the catch-up copied %d of the %d rows changed at one instant", got, changed)
			}

			if err := s.ExpandAbort(ctx); err != nil {
				t.Fatal(err)
			}
			if hasChangesIndex(t, engine, db, tn) {
				t.Fatal("the index of changes outlived the abort")
			}
		})
	}
}
