// Package sqldb opens a database/sql pool by driver name and DSN for the
// three engines ontime speaks: the task store's databases
// (internal/store/sqlstore) and the users' databases a SQL scan job works
// through (internal/scanjob). It knows the drivers and their DSN syntax,
// nothing of what the pools are for: each caller sizes its pools and
// passes the settings that differ (Options).
package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// The driver names, as configs spell them.
const (
	SQLite   = "sqlite"   // modernc.org/sqlite (pure Go); the DSN is a file path or a file: URI
	MySQL    = "mysql"    // MariaDB or MySQL through go-sql-driver/mysql; user:pass@tcp(host:port)/dbname?params
	Postgres = "postgres" // PostgreSQL through pgx; a postgres:// URL or key=value pairs
)

// Options are what differs between callers; the rest every pool gets.
type Options struct {
	// SQLite are parameters added to a SQLite DSN's query, "a=b&c=d":
	// pragmas and _txlock, which differ per pool (a writer, readers).
	SQLite string
	// ParseTime makes MySQL scan DATE and DATETIME columns as time.Time
	// (the DSN's own parseTime is overridden, so what the caller scans
	// does not depend on what a user wrote).
	ParseTime bool
	// MultiStatements lets one MySQL query carry several statements
	// separated by ";". Only SQL built by ontime, never from input, may be
	// sent on such a pool.
	MultiStatements bool
	// GenericPlans makes a PostgreSQL session (servers from 12) plan its
	// prepared statements once, for any values (plan_cache_mode
	// force_generic_plan), unless the DSN sets plan_cache_mode itself. It
	// applies to every statement of the pool, each unprepared one too
	// (planned without its values): only for pools that run prepared
	// statements whose plan does not depend on their values.
	GenericPlans bool
	// AsyncCommit makes a PostgreSQL session commit without waiting for
	// its WAL to reach the disk (synchronous_commit off), unless the DSN
	// sets synchronous_commit itself: a server crash may lose the last
	// commits (at most about three times wal_writer_delay), never make
	// the database inconsistent. Only for writes that are safe to lose
	// and do again.
	AsyncCommit bool
}

// connectTimeout bounds the dial of a MySQL connection.
const connectTimeout = 10 * time.Second

// MultiHostConnectTimeout bounds each host's connection attempt when a
// PostgreSQL DSN lists several hosts (libpq's multi-host form,
// "postgres://a:5432,b:5432/db?target_session_attrs=read-write") and sets
// no connect_timeout. Without it a host that does not answer (its data
// centre lost, its packets dropped) holds every new connection until the
// caller's deadline, and the next host — the promoted replica — is never
// tried.
const MultiHostConnectTimeout = 5 * time.Second

// MultiHostUserTimeout is the TCP_USER_TIMEOUT (Linux) of the connections
// of a multi-host PostgreSQL DSN: a connection whose sent data stays
// unacknowledged that long is closed, so that a pooled connection to a lost
// primary fails instead of holding its statements until their callers'
// deadlines (or the kernel's 15-minute limit). A live server's kernel
// acknowledges at once, however long its statements run.
const MultiHostUserTimeout = 10 * time.Second

// Open returns a pool of driver's connections to dsn. It does not connect:
// the first use does (PingContext to check).
//
// MySQL binds parameters client-side (interpolateParams: one round trip
// per statement instead of prepare, execute, close) and needs a database
// name. PostgreSQL sends parse, bind and execute together (pgx's exec
// mode) unless the DSN names default_query_exec_mode: statements that
// differ in their number of rows would miss a statement cache and pay a
// round trip to prepare each.
func Open(driver, dsn string, o Options) (*sql.DB, error) {
	switch driver {
	case SQLite:
		db, err := sql.Open(SQLite, SQLiteDSN(dsn, o.SQLite))
		if err != nil {
			return nil, fmt.Errorf("malformed SQLite DSN: %w", err)
		}
		return db, nil
	case MySQL:
		mc, err := mysql.ParseDSN(dsn)
		if err != nil {
			return nil, fmt.Errorf("malformed MySQL DSN: %w", err)
		}
		if mc.DBName == "" {
			return nil, errors.New("the MySQL DSN names no database (…/dbname)")
		}
		mc.ParseTime = o.ParseTime
		mc.InterpolateParams = true
		if o.MultiStatements {
			mc.MultiStatements = true
		}
		mc.Timeout = connectTimeout
		conn, err := mysql.NewConnector(mc)
		if err != nil {
			return nil, fmt.Errorf("malformed MySQL DSN: %w", err)
		}
		return sql.OpenDB(conn), nil
	case Postgres:
		pc, err := pgx.ParseConfig(dsn)
		if err != nil {
			return nil, fmt.Errorf("malformed PostgreSQL DSN: %w", err)
		}
		if !strings.Contains(dsn, "default_query_exec_mode") {
			pc.DefaultQueryExecMode = pgx.QueryExecModeExec
		}
		var after []func(context.Context, *pgx.Conn) error
		if o.GenericPlans && !strings.Contains(dsn, "plan_cache_mode") {
			after = append(after, genericPlans)
		}
		if o.AsyncCommit && !strings.Contains(dsn, "synchronous_commit") {
			after = append(after, asyncCommit)
		}
		var opts []stdlib.OptionOpenDB
		if multiHost(pc) {
			if pc.ConnectTimeout == 0 {
				pc.ConnectTimeout = MultiHostConnectTimeout
			}
			h := newHostOrder()
			opts = append(opts, stdlib.OptionBeforeConnect(h.beforeConnect))
			after = append(after, h.afterConnect)
		}
		if len(after) > 0 {
			opts = append(opts, stdlib.OptionAfterConnect(func(ctx context.Context, c *pgx.Conn) error {
				for _, f := range after {
					if err := f(ctx, c); err != nil {
						return err
					}
				}
				return nil
			}))
		}
		return stdlib.OpenDB(*pc, opts...), nil
	default:
		return nil, fmt.Errorf("driver %q is not one of %s, %s, %s", driver, SQLite, MySQL, Postgres)
	}
}

// multiHost says whether a PostgreSQL config lists more than one host
// (pgx also adds a fallback per TLS mode of the same host).
func multiHost(pc *pgx.ConnConfig) bool {
	for _, f := range pc.Fallbacks {
		if f.Host != pc.Host || f.Port != pc.Port {
			return true
		}
	}
	return false
}

// SQLiteDSN is a SQLite DSN as a file: URI with params ("a=b&c=d") added
// to its query: the driver reads parameters only from a URI.
func SQLiteDSN(dsn, params string) string {
	if !strings.HasPrefix(dsn, "file:") {
		dsn = "file:" + dsn
	}
	if params == "" {
		return dsn
	}
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + params
}

// asyncCommit sets a new session's synchronous_commit to off
// (Options.AsyncCommit), after the startup packet for the reason
// genericPlans gives.
func asyncCommit(ctx context.Context, c *pgx.Conn) error {
	if _, err := c.Exec(ctx, "SET synchronous_commit = off"); err != nil {
		return fmt.Errorf("set synchronous_commit: %w", err)
	}
	return nil
}

// genericPlans sets a new session's plan_cache_mode to force_generic_plan
// (Options.GenericPlans) on servers that have it (12 and later): sent in
// the startup packet instead, a pooler such as PgBouncer would refuse the
// unknown parameter.
func genericPlans(ctx context.Context, c *pgx.Conn) error {
	v := c.PgConn().ParameterStatus("server_version") // "15.20 (Debian …)", "12.1"
	end := strings.IndexFunc(v, func(r rune) bool { return r < '0' || r > '9' })
	if end < 0 {
		end = len(v)
	}
	if major, err := strconv.Atoi(v[:end]); err != nil || major < 12 {
		return nil
	}
	if _, err := c.Exec(ctx, "SET plan_cache_mode = force_generic_plan"); err != nil {
		return fmt.Errorf("set plan_cache_mode: %w", err)
	}
	return nil
}
