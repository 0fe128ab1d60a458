package sqldb

import (
	"context"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/testdb"
)

func TestSQLiteDSN(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ dsn, params, want string }{
		{"/d/x.db", "a=1&b=2", "file:/d/x.db?a=1&b=2"},
		{"x.db", "", "file:x.db"},
		{"file:x.db", "a=1", "file:x.db?a=1"},
		{"file:x.db?mode=rwc", "a=1", "file:x.db?mode=rwc&a=1"},
	} {
		if got := SQLiteDSN(c.dsn, c.params); got != c.want {
			t.Errorf("SQLiteDSN(%q, %q) = %q, want %q", c.dsn, c.params, got, c.want)
		}
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// The caller's parameters reach the connection, also after the DSN's own.
func TestOpenSQLiteParams(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, dsn := range []string{filepath.Join(dir, "a.db"), "file:" + filepath.Join(dir, "b.db") + "?mode=rwc"} {
		db, err := Open(SQLite, dsn, Options{SQLite: "_pragma=busy_timeout(4321)"})
		if err != nil {
			t.Fatal(err)
		}
		var ms int
		if err := db.QueryRowContext(ctx(t), `PRAGMA busy_timeout`).Scan(&ms); err != nil {
			t.Fatalf("%s: %v", dsn, err)
		}
		db.Close()
		if ms != 4321 {
			t.Errorf("%s: busy_timeout %d, want 4321", dsn, ms)
		}
	}
}

func TestOpenRefuses(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ driver, dsn, want string }{
		{"oracle", "x", `driver "oracle" is not one of sqlite, mysql, postgres`},
		{MySQL, "root@tcp(127.0.0.1:3306)/", "names no database"},
		{MySQL, "root@nope(", "malformed MySQL DSN"},
		{Postgres, "postgres://h:notaport/db", "malformed PostgreSQL DSN"},
	} {
		db, err := Open(c.driver, c.dsn, Options{})
		if err == nil {
			db.Close()
			t.Errorf("Open(%s, %q) succeeded, want an error", c.driver, c.dsn)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("Open(%s, %q): %v, want %q", c.driver, c.dsn, err, c.want)
		}
	}
}

// ParseTime decides how a DATETIME scans, whatever the DSN says; a query
// of several statements runs only with MultiStatements.
func TestOpenMySQLOptions(t *testing.T) {
	t.Parallel()
	dsn := testdb.MySQL(t)
	const when = `SELECT CAST('2024-01-02 03:04:05' AS DATETIME)`

	db, err := Open(MySQL, dsn, Options{ParseTime: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v any
	if err := db.QueryRowContext(ctx(t), when).Scan(&v); err != nil {
		t.Fatal(err)
	}
	if tm, ok := v.(time.Time); !ok || tm.Year() != 2024 || tm.Second() != 5 {
		t.Errorf("with ParseTime a DATETIME scanned as %T %v, want time.Time 2024-01-02 03:04:05", v, v)
	}
	if _, err := db.ExecContext(ctx(t), `SELECT 1; SELECT 2`); err == nil {
		t.Error("two statements in one query ran without MultiStatements")
	}

	raw, err := Open(MySQL, dsn+"?parseTime=true", Options{MultiStatements: true})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if err := raw.QueryRowContext(ctx(t), when).Scan(&v); err != nil {
		t.Fatal(err)
	}
	if b, ok := v.([]byte); !ok || string(b) != "2024-01-02 03:04:05" {
		t.Errorf("without ParseTime a DATETIME scanned as %T %v, want its text", v, v)
	}
	if _, err := raw.ExecContext(ctx(t), `SELECT 1; SELECT 2`); err != nil {
		t.Errorf("two statements in one query with MultiStatements: %v", err)
	}
}

// PostgreSQL runs statements unprepared (exec mode) unless the DSN asks
// for another mode: the session then holds no prepared statement.
func TestOpenPostgresExecMode(t *testing.T) {
	t.Parallel()
	dsn := testdb.Postgres(t)
	prepared := func(dsn string) int {
		t.Helper()
		db, err := Open(Postgres, dsn, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		db.SetMaxOpenConns(1) // one session: the statement below is in its list
		var n int
		if err := db.QueryRowContext(ctx(t), `SELECT $1::int + 1`, 41).Scan(&n); err != nil || n != 42 {
			t.Fatalf("SELECT $1 + 1: %d, %v", n, err)
		}
		if err := db.QueryRowContext(ctx(t), `SELECT COUNT(*) FROM pg_prepared_statements`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := prepared(dsn); n != 0 {
		t.Errorf("default mode: %d prepared statements in the session, want 0 (exec mode)", n)
	}
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	if n := prepared(dsn + sep + "default_query_exec_mode=cache_statement"); n == 0 {
		t.Error("cache_statement from the DSN: no prepared statement in the session, want the DSN's mode kept")
	}
}

// A multi-host DSN whose first host takes connections and never answers
// (a lost data centre's primary) still connects to the next one: each host
// gets MultiHostConnectTimeout unless the DSN sets connect_timeout. Then
// the silent host is tried last, so that a new connection under a deadline
// shorter than that timeout (a cluster heartbeat's) reaches the live host
// instead of waiting out the dead one.
func TestOpenPostgresMultiHost(t *testing.T) {
	t.Parallel()
	dsn := testdb.Postgres(t)
	// Never accepted: the kernel completes the handshake, nothing answers.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = silent.Addr().String() + "," + u.Host
	q := u.Query()
	q.Set("target_session_attrs", "read-write")
	u.RawQuery = q.Encode()
	db, err := Open(Postgres, u.String(), Options{})
	if err != nil {
		t.Fatalf("multi-host DSN %s: %v", u, err)
	}
	defer db.Close()
	db.SetMaxIdleConns(0) // every query below makes a new connection
	query := func(within time.Duration) error {
		c, cancel := context.WithTimeout(context.Background(), within)
		defer cancel()
		var one int
		return db.QueryRowContext(c, "SELECT 1").Scan(&one)
	}
	if err := query(6 * MultiHostConnectTimeout); err != nil {
		t.Fatalf("first connection through %s: %v", u, err)
	}
	for i := range 3 {
		if err := query(MultiHostConnectTimeout / 2); err != nil {
			t.Fatalf("connection %d with a deadline shorter than the connect timeout: %v (the silent host was tried first)", i+2, err)
		}
	}
}

// GenericPlans sets each session's plan_cache_mode, beside the multi-host
// hooks, unless the DSN sets one; without it the server's default stays.
func TestOpenPostgresGenericPlans(t *testing.T) {
	t.Parallel()
	dsn := testdb.Postgres(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	two := *u
	two.Host = u.Host + "," + u.Host
	with := func(dsn, param string) string {
		v, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		q := v.Query()
		q.Set("plan_cache_mode", param)
		v.RawQuery = q.Encode()
		return v.String()
	}
	for _, c := range []struct {
		name, dsn string
		generic   bool
		want      string
	}{
		{"off", dsn, false, "auto"},
		{"on", dsn, true, "force_generic_plan"},
		{"on, multi-host", two.String(), true, "force_generic_plan"},
		{"on, the DSN's own", with(dsn, "force_custom_plan"), true, "force_custom_plan"},
	} {
		db, err := Open(Postgres, c.dsn, Options{GenericPlans: c.generic})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var mode string
		err = db.QueryRowContext(ctx(t), `SHOW plan_cache_mode`).Scan(&mode)
		db.Close()
		if err != nil || mode != c.want {
			t.Errorf("%s: plan_cache_mode %q, %v; want %q", c.name, mode, err, c.want)
		}
	}
}

// AsyncCommit sets each session's synchronous_commit to off, beside
// GenericPlans, unless the DSN sets it; without it the server's default
// (on) stays.
func TestOpenPostgresAsyncCommit(t *testing.T) {
	t.Parallel()
	dsn := testdb.Postgres(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	own := *u
	q := own.Query()
	q.Set("synchronous_commit", "local")
	own.RawQuery = q.Encode()
	for _, c := range []struct {
		name, dsn      string
		o              Options
		want, wantPlan string
	}{
		{"off", dsn, Options{}, "on", "auto"},
		{"on", dsn, Options{AsyncCommit: true}, "off", "auto"},
		{"on, with generic plans", dsn, Options{AsyncCommit: true, GenericPlans: true}, "off", "force_generic_plan"},
		{"on, the DSN's own", own.String(), Options{AsyncCommit: true}, "local", "auto"},
	} {
		db, err := Open(Postgres, c.dsn, c.o)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var sc, plan string
		err = db.QueryRowContext(ctx(t), `SELECT current_setting('synchronous_commit'), current_setting('plan_cache_mode')`).Scan(&sc, &plan)
		db.Close()
		if err != nil || sc != c.want || plan != c.wantPlan {
			t.Errorf("%s: synchronous_commit %q, plan_cache_mode %q, %v; want %q, %q", c.name, sc, plan, err, c.want, c.wantPlan)
		}
	}
}
