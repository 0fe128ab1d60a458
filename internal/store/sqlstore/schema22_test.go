package sqlstore

import (
	"context"
	"testing"

	"github.com/ontimehq/ontime/internal/testdb"
)

// A database of schema version 21 gets the leases index on every task
// table; the step run again (cut short on MariaDB, which commits each DDL
// statement on its own) changes nothing.
func TestSchema22AddsTheLeasesIndex(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := openT(t, engine, testdb.DSNs(t, engine, 1), 3, 2)
			db := s.w[0]
			has := func(t *testing.T, name string) bool {
				t.Helper()
				q := map[string]string{
					"sqlite":   `SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name = ?`,
					"postgres": `SELECT COUNT(*) FROM pg_indexes WHERE indexname = $1`,
					"mysql":    `SELECT COUNT(*) FROM information_schema.statistics WHERE table_schema = DATABASE() AND index_name = ?`,
				}[engine]
				var n int
				if err := db.QueryRowContext(ctx, q, name).Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n > 0
			}
			for _, tn := range s.names {
				if !has(t, tn+"_lease") {
					t.Fatalf("%s: no leases index in a new database", tn)
				}
				drop := `DROP INDEX ` + tn + `_lease`
				if engine == "mysql" {
					drop += ` ON ` + tn
				}
				if _, err := db.ExecContext(ctx, drop); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := db.ExecContext(ctx, `UPDATE ontime_meta SET v = '21' WHERE k = 'schema_version'`); err != nil {
				t.Fatal(err)
			}
			if err := s.migrate(ctx, db); err != nil {
				t.Fatal(err)
			}
			stepAgain(t, s, 0, 22)
			for _, tn := range s.names {
				if !has(t, tn+"_lease") {
					t.Fatalf("%s: no leases index after step 22", tn)
				}
			}
		})
	}
}
