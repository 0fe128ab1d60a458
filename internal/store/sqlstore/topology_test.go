package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/sqldb"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/testdb"
)

// cloneDB makes a copy of the database of dsn the way an operator would
// (cp of the file; CREATE DATABASE … TEMPLATE; a table-by-table copy on
// MariaDB, what a dump and restore does) and returns the copy's DSN. The
// store on dsn must be closed.
func cloneDB(t *testing.T, engine, dsn string) string {
	t.Helper()
	ctx := context.Background()
	switch engine {
	case "sqlite":
		to := testdb.SQLite(t)
		copyFile(t, dsn, to)
		return to
	case "postgres":
		// A fresh database, dropped again: createDB's name and cleanup.
		to := testdb.Postgres(t)
		from, name := dbName(dsn), dbName(to)
		admin := openRaw(t, engine, strings.Replace(to, "/"+name, "/postgres", 1))
		if _, err := admin.ExecContext(ctx, `DROP DATABASE `+name); err != nil {
			t.Fatal(err)
		}
		// Connections of the closed store may linger a moment.
		var err error
		for range 50 {
			if _, err = admin.ExecContext(ctx, `CREATE DATABASE `+name+` TEMPLATE `+from); err == nil {
				return to
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatal(err)
	case "mysql":
		to := testdb.MySQL(t)
		from, name := dbName(dsn), dbName(to)
		db := openRaw(t, engine, to)
		rows, err := db.QueryContext(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = ?`, from)
		if err != nil {
			t.Fatal(err)
		}
		var tables []string
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				t.Fatal(err)
			}
			tables = append(tables, n)
		}
		rows.Close()
		for _, tn := range tables {
			// Generated columns (the live key) are made, not copied.
			var cols string
			if err := db.QueryRowContext(ctx, `SELECT GROUP_CONCAT(column_name ORDER BY ordinal_position) FROM information_schema.columns
				WHERE table_schema = ? AND table_name = ? AND extra NOT LIKE '%GENERATED%'`, from, tn).Scan(&cols); err != nil {
				t.Fatal(err)
			}
			for _, q := range []string{`CREATE TABLE ` + name + `.` + tn + ` LIKE ` + from + `.` + tn,
				`INSERT INTO ` + name + `.` + tn + ` (` + cols + `) SELECT ` + cols + ` FROM ` + from + `.` + tn} {
				if _, err := db.ExecContext(ctx, q); err != nil {
					t.Fatal(err)
				}
			}
		}
		return to
	}
	t.Fatalf("engine %q", engine)
	return ""
}

func dbName(dsn string) string {
	if i := strings.IndexByte(dsn, '?'); i >= 0 {
		dsn = dsn[:i]
	}
	return dsn[strings.LastIndexByte(dsn, '/')+1:]
}

func openRaw(t *testing.T, engine, dsn string) *sql.DB {
	t.Helper()
	db, err := sqldb.Open(engine, dsn, sqldb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestTopologyRefusesMismatch starts a store, then opens it with each kind
// of wrong config an operator may write: every one is refused with what
// differs and what fixes it, and the store stays as it was (the right
// config opens it again).
func TestTopologyRefusesMismatch(t *testing.T) {
	t.Parallel()
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			open := func(dsns ...string) (*Store, error) {
				return Open(ctx, Config{Driver: engine, DSNs: dsns, Tables: 2, Segments: 1})
			}
			one := testdb.DSNs(t, engine, 1)[0]
			s, err := open(one)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Insert(ctx, []store.NewTask{newTask(t, "k1", time.Now().Add(time.Hour), 1)}); err != nil {
				t.Fatal(err)
			}
			s.Close()
			copied := cloneDB(t, engine, one)
			two := testdb.DSNs(t, engine, 3)
			s, err = open(two[0], two[1])
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
			other := testdb.DSNs(t, engine, 1)[0]
			if s, err = open(other); err != nil {
				t.Fatal(err)
			}
			s.Close()
			for name, tc := range map[string]struct {
				dsns []string
				want []string
			}{
				"copy":      {[]string{one, copied}, []string{"store.databases[1] is the same database as store.databases[0], or a copy of it", "ontime store expand"}},
				"removed":   {[]string{two[0]}, []string{"store's database 1 (database ID", "is missing from store.databases", "put the missing databases back"}},
				"reordered": {[]string{two[1], two[0]}, []string{"store.databases[0] is the store's database 1", "store.databases[1] is the store's database 0", "list the databases in the store's order"}},
				"added":     {[]string{two[0], two[1], two[2]}, []string{"store.databases[2] is an empty database that is not part of the store", "ontime store expand --databases"}},
				"foreign":   {[]string{one, other}, []string{"store.databases[1] belongs to another ontime store", "remove the databases of another store"}},
			} {
				_, err := open(tc.dsns...)
				t.Logf("%s: %v", name, err)
				if !errors.Is(err, ErrTopology) {
					t.Fatalf("%s: Open = %v, want ErrTopology", name, err)
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%s: %v\nlacks %q", name, err, w)
					}
				}
			}
			// Refusals wrote nothing: the right configs still open, and
			// the empty database is still new.
			for _, dsns := range [][]string{{one}, {two[0], two[1]}, {other}, {copied}} {
				s, err := open(dsns...)
				if err != nil {
					t.Fatalf("%v after the refusals: %v", dsns, err)
				}
				s.Close()
			}
			id, err := readIdentity(ctx, openRaw(t, engine, two[2]))
			if err == nil && id.known() {
				t.Fatalf("the refused empty database got an identity: %+v", id)
			}
		})
	}
}
