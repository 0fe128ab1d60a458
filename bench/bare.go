package main

// The database engines alone: no ontime, no HTTP. A bare system inserts a
// row shaped like ontime's task row into one table of a fresh database,
// one INSERT per single submit (autocommit: one statement, one commit) and
// one transaction per batch of 1,000, and with keyed16 the same single
// INSERTs from 16 clients at once (no delivery, no HTTP). It is the floor
// of what the engine itself commits on this machine in this run, beside
// which the sequential, batch and keyed16 goals of ontime's service can be
// called out of reach.

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "modernc.org/sqlite" // the "sqlite" driver, as ontime's store uses
)

// bareTable is the bare systems' one table.
const bareTable = "bare_tasks"

// bareCols are its columns, in the order of every insert.
var bareCols = []string{"id", "topic", "task_key", "due", "payload", "status", "created_at"}

// bareSQLitePragmas are those ontime's SQLite writer opens its file with
// (internal/store/sqlstore connect and liteWriterPragmas), but for
// wal_autocheckpoint: ontime's writer leaves checkpoints to a connection
// of their own, the bare engine to SQLite's default (every 1,000 pages).
const bareSQLitePragmas = "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate" +
	"&_pragma=temp_store(MEMORY)&_pragma=cache_size(-32768)"

// bareSys is one database engine alone, driven by the bench process.
type bareSys struct {
	driver string // sqlite | mysql | postgres

	pool *pgxpool.Pool // postgres
	db   *sql.DB       // mysql, sqlite
	one  *sql.Stmt     // sqlite: the prepared single-row INSERT
	ins1 string        // the single-row INSERT's SQL
	drop func()
	seq  atomic.Uint64 // the IDs' counter
}

// engineName is the engine of driver as the report names it.
func engineName(driver string) string {
	switch driver {
	case "sqlite":
		return "SQLite"
	case "mysql":
		return "MariaDB"
	case "postgres":
		return "PostgreSQL"
	}
	return driver
}

// bareName is the bare system's name of an engine ("bare PostgreSQL").
func bareName(engine string) string { return "bare " + engine }

func (s *bareSys) name() string { return bareName(engineName(s.driver)) }

func (s *bareSys) path() string { return "the engine alone (no ontime, no HTTP)" }

func (s *bareSys) knobs() string {
	row := "one table shaped like ontime's task row: id (26 symbols, primary key), topic, task_key (NULL when keyless), due (bigint µs), payload (the bench's JSON, `{\"id\",\"due\"}`), status smallint, created_at bigint, " +
		"UNIQUE (topic, task_key), an index on (status, due); "
	switch s.driver {
	case "postgres":
		return row + "127.0.0.1:5432, a fresh database per run; pgx pool (pgxpool defaults, its statement cache: the single INSERT is prepared once); " +
			"single: one INSERT in autocommit; batch: one `CopyFrom` of 1,000 (COPY FROM, as River's `InsertManyFast`)"
	case "mysql":
		return row + "MariaDB 127.0.0.1:3306, a fresh database per run, InnoDB; go-sql-driver/mysql, interpolateParams (one round trip per statement, as ontime's store); " +
			"single: one INSERT in autocommit; batch: one multi-row INSERT of 1,000"
	case "sqlite":
		return row + "a file in a temp dir, WITHOUT ROWID (as ontime's), modernc.org/sqlite through database/sql, one connection, " +
			"WAL, synchronous NORMAL, busy_timeout 10s, BEGIN IMMEDIATE, temp_store MEMORY, cache_size 32 MiB (ontime's writer's pragmas; checkpoints SQLite's automatic ones); " +
			"single: one prepared INSERT in autocommit; batch: one transaction of 1,000 executions of the prepared INSERT"
	}
	return ""
}

// bareSchema is the table and its indexes in driver's dialect.
func bareSchema(driver string) []string {
	t := bareTable
	switch driver {
	case "postgres":
		return []string{
			`CREATE TABLE ` + t + ` (
				id TEXT COLLATE "C" NOT NULL PRIMARY KEY,
				topic TEXT COLLATE "C" NOT NULL,
				task_key TEXT COLLATE "C" NULL,
				due BIGINT NOT NULL,
				payload TEXT NOT NULL,
				status SMALLINT NOT NULL,
				created_at BIGINT NOT NULL,
				UNIQUE (topic, task_key)
			)`,
			`CREATE INDEX ` + t + `_status_due ON ` + t + ` (status, due)`,
		}
	case "mysql":
		return []string{`CREATE TABLE ` + t + ` (
				id CHAR(26) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
				topic VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
				task_key VARBINARY(255) NULL,
				due BIGINT NOT NULL,
				payload TEXT NOT NULL,
				status SMALLINT NOT NULL,
				created_at BIGINT NOT NULL,
				PRIMARY KEY (id),
				UNIQUE KEY topic_key (topic, task_key),
				KEY status_due (status, due)
			) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`}
	case "sqlite":
		return []string{
			`CREATE TABLE ` + t + ` (
				id TEXT NOT NULL PRIMARY KEY,
				topic TEXT NOT NULL,
				task_key TEXT NULL,
				due INTEGER NOT NULL,
				payload TEXT NOT NULL,
				status INTEGER NOT NULL,
				created_at INTEGER NOT NULL,
				UNIQUE (topic, task_key)
			) WITHOUT ROWID`,
			`CREATE INDEX ` + t + `_status_due ON ` + t + ` (status, due)`,
		}
	}
	return nil
}

// bareInsert is an INSERT of rows rows in driver's placeholders.
func bareInsert(driver string, rows int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "INSERT INTO %s (%s) VALUES ", bareTable, strings.Join(bareCols, ", "))
	n := 0
	for r := range rows {
		if r > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(")
		for c := range bareCols {
			if c > 0 {
				b.WriteString(", ")
			}
			n++
			if driver == "postgres" {
				fmt.Fprintf(&b, "$%d", n)
			} else {
				b.WriteString("?")
			}
		}
		b.WriteString(")")
	}
	return b.String()
}

func (s *bareSys) start(ctx context.Context, _ func(string, time.Time)) error {
	var schema func(q string) error
	switch s.driver {
	case "postgres":
		dsn, drop, err := freshPG()
		if err != nil {
			return err
		}
		s.drop = drop
		pc, err := pgxpool.ParseConfig(dsn)
		if err != nil {
			return err
		}
		// A connection per client of the 16-client floor (pgxpool's
		// default is 4 on this machine).
		pc.MaxConns = 16
		if s.pool, err = pgxpool.NewWithConfig(ctx, pc); err != nil {
			return err
		}
		schema = func(q string) error { _, err := s.pool.Exec(ctx, q); return err }
	case "mysql":
		dsn, drop, err := freshMySQL()
		if err != nil {
			return err
		}
		s.drop = drop
		if s.db, err = sql.Open("mysql", dsn+"?interpolateParams=true"); err != nil {
			return err
		}
		schema = func(q string) error { _, err := s.db.ExecContext(ctx, q); return err }
	case "sqlite":
		dir, err := os.MkdirTemp("", "ontime-bench-bare")
		if err != nil {
			return err
		}
		s.drop = func() { os.RemoveAll(dir) }
		if s.db, err = sql.Open("sqlite", "file:"+filepath.Join(dir, "bare.db")+"?"+bareSQLitePragmas); err != nil {
			return err
		}
		s.db.SetMaxOpenConns(1) // SQLite has one writer
		schema = func(q string) error { _, err := s.db.ExecContext(ctx, q); return err }
	default:
		return fmt.Errorf("bare: unknown driver %q", s.driver)
	}
	s.ins1 = bareInsert(s.driver, 1)
	for _, q := range bareSchema(s.driver) {
		if err := schema(q); err != nil {
			return fmt.Errorf("%s schema: %w", s.name(), err)
		}
	}
	if s.driver == "sqlite" {
		st, err := s.db.PrepareContext(ctx, s.ins1)
		if err != nil {
			return err
		}
		s.one = st
	}
	return nil
}

// row is j's values in bareCols' order: an ID of ontime's length,
// increasing as ontime's (time-ordered) are, the job's ID as its key when
// keyed, its due time in microseconds and the bench's JSON payload.
func (s *bareSys) row(j job, now int64) []any {
	p, _ := json.Marshal(j)
	var key any // NULL
	if j.Keyed {
		key = j.ID
	}
	id := fmt.Sprintf("%012X%014X", now/1000, s.seq.Add(1))
	return []any{id, "bench", key, j.Due.UnixMicro(), string(p), int16(0), now}
}

func (s *bareSys) enqueueOne(ctx context.Context, j job) error {
	r := s.row(j, time.Now().UnixMicro())
	var err error
	switch s.driver {
	case "postgres":
		_, err = s.pool.Exec(ctx, s.ins1, r...)
	case "mysql":
		_, err = s.db.ExecContext(ctx, s.ins1, r...)
	case "sqlite":
		_, err = s.one.ExecContext(ctx, r...)
	}
	return err
}

// enqueue writes jobs in one transaction: PostgreSQL COPY FROM, MariaDB
// one multi-row INSERT (both one statement in autocommit), SQLite the
// prepared INSERT once per row between BEGIN IMMEDIATE and COMMIT.
func (s *bareSys) enqueue(ctx context.Context, jobs []job) error {
	now := time.Now().UnixMicro()
	rows := make([][]any, len(jobs))
	for i, j := range jobs {
		rows[i] = s.row(j, now)
	}
	switch s.driver {
	case "postgres":
		n, err := s.pool.CopyFrom(ctx, pgx.Identifier{bareTable}, bareCols, pgx.CopyFromRows(rows))
		if err == nil && n != int64(len(rows)) {
			err = fmt.Errorf("COPY wrote %d rows of %d", n, len(rows))
		}
		return err
	case "mysql":
		args := make([]any, 0, len(rows)*len(bareCols))
		for _, r := range rows {
			args = append(args, r...)
		}
		_, err := s.db.ExecContext(ctx, bareInsert(s.driver, len(rows)), args...)
		return err
	case "sqlite":
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		st := tx.StmtContext(ctx, s.one)
		for _, r := range rows {
			if _, err := st.ExecContext(ctx, r...); err != nil {
				return errors.Join(err, tx.Rollback())
			}
		}
		return tx.Commit()
	}
	return fmt.Errorf("bare: unknown driver %q", s.driver)
}

func (s *bareSys) stop() {
	if s.one != nil {
		s.one.Close()
	}
	if s.pool != nil {
		s.pool.Close()
	}
	if s.db != nil {
		s.db.Close()
	}
	if s.drop != nil {
		s.drop()
	}
	s.pool, s.db, s.one, s.drop = nil, nil, nil, nil
}

// intakeOnly says whether sys runs the intake workloads (sequential,
// batch) and nothing else: the bare engines, which deliver nothing.
func intakeOnly(sys system) bool {
	_, ok := sys.(*bareSys)
	return ok
}
