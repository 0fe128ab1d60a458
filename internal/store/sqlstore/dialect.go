package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
)

// dialect holds what differs between engines. Everything else in this
// package is one implementation over database/sql.
type dialect struct {
	name string
	// returning: UPDATE … RETURNING exists (SQLite, PostgreSQL); MariaDB
	// gets a transaction with SELECT … FOR UPDATE instead.
	returning bool
	// numbered: placeholders are $1, $2 … (PostgreSQL).
	numbered bool
	// onConflict is the clause that makes an INSERT skip rows whose
	// (topic, task_key) exists.
	onConflict  string
	createTable func(table string) []string
	createMeta  string
	upsertMeta  string
	lock        func(ctx context.Context, c *sql.Conn) (unlock func(), err error)
	// createCoord makes the database coordinator's tables and their one
	// leader row (schema version 2, coord.go). The leader row is inserted
	// only when absent: databases that dbcoord migrated on its own before
	// version 2 already have it, with the current term.
	createCoord []string
	// upsertNode registers a node or refreshes its heartbeat (and its
	// topics, schema version 11); upsertGrant writes one item's
	// assignment.
	upsertNode, upsertGrant string
}

const migrateLockKey = 7_406_612_020 // arbitrary, fixed: "ontime migrate"

var dialects = map[string]*dialect{
	"sqlite": {
		name:       "sqlite",
		returning:  true,
		onConflict: " ON CONFLICT DO NOTHING",
		// WITHOUT ROWID: the text primary key is the table's b-tree, saving
		// a second index on id.
		createTable: func(t string) []string {
			return append([]string{
				`CREATE TABLE IF NOT EXISTS ` + t + ` (
					id TEXT NOT NULL PRIMARY KEY,
					topic TEXT NOT NULL,
					task_key TEXT NULL,
					shard_hash INTEGER NOT NULL,
					seg INTEGER NOT NULL,
					due_at INTEGER NOT NULL,
					payload BLOB NOT NULL,
					target TEXT NOT NULL,
					max_attempts INTEGER NOT NULL,
					attempts INTEGER NOT NULL DEFAULT 0,
					status INTEGER NOT NULL,
					last_error TEXT NOT NULL DEFAULT '',
					created_at INTEGER NOT NULL,
					updated_at INTEGER NOT NULL,
					owner TEXT NULL,
					lease_until INTEGER NOT NULL DEFAULT 0,
					token INTEGER NOT NULL DEFAULT 0
				) WITHOUT ROWID`,
			}, taskIndexes(t)...)
		},
		createMeta: createMetaText,
		upsertMeta: upsertMetaExcluded,
		createCoord: []string{
			`CREATE TABLE IF NOT EXISTS ontime_nodes (node_id TEXT NOT NULL PRIMARY KEY, addr TEXT NOT NULL, heartbeat_at INTEGER NOT NULL, started_at INTEGER NOT NULL)`,
			`CREATE TABLE IF NOT EXISTS ontime_leader (id INTEGER NOT NULL PRIMARY KEY, node_id TEXT NOT NULL, term INTEGER NOT NULL, lease_until INTEGER NOT NULL, version INTEGER NOT NULL DEFAULT 0)`,
			`CREATE TABLE IF NOT EXISTS ontime_assignment (item TEXT NOT NULL PRIMARY KEY, node_id TEXT NOT NULL, term INTEGER NOT NULL, since INTEGER NOT NULL)`,
			`INSERT INTO ontime_leader (id, node_id, term, lease_until) VALUES (1, '', 0, 0) ON CONFLICT (id) DO NOTHING`,
		},
		upsertNode:  upsertNodeExcluded,
		upsertGrant: upsertGrantExcluded,
		lock: func(ctx context.Context, c *sql.Conn) (func(), error) {
			// The write connection opens transactions with BEGIN IMMEDIATE;
			// a single connection already serialises every writer of this
			// process, and busy_timeout waits for other processes.
			return func() {}, nil
		},
	},
	"mysql": {
		name:       "mysql",
		onConflict: " ON DUPLICATE KEY UPDATE id = id",
		createTable: func(t string) []string {
			return []string{`CREATE TABLE IF NOT EXISTS ` + t + ` (
				id CHAR(26) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
				topic VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
				task_key VARBINARY(255) NULL,
				shard_hash BIGINT NOT NULL,
				seg SMALLINT NOT NULL,
				due_at BIGINT NOT NULL,
				payload MEDIUMBLOB NOT NULL,
				target VARCHAR(2048) NOT NULL,
				max_attempts INT NOT NULL,
				attempts INT NOT NULL DEFAULT 0,
				status TINYINT NOT NULL,
				last_error VARCHAR(1024) NOT NULL DEFAULT '',
				created_at BIGINT NOT NULL,
				updated_at BIGINT NOT NULL,
				owner VARCHAR(128) NULL,
				lease_until BIGINT NOT NULL DEFAULT 0,
				token BIGINT NOT NULL DEFAULT 0,
				PRIMARY KEY (id),
				UNIQUE KEY topic_key (topic, task_key),
				KEY scan (seg, status, due_at, id),
				KEY status_id (status, id)
			) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`}
		},
		createMeta: `CREATE TABLE IF NOT EXISTS ontime_meta (k VARCHAR(64) NOT NULL PRIMARY KEY, v VARCHAR(255) NOT NULL) ENGINE=InnoDB`,
		upsertMeta: `INSERT INTO ontime_meta (k, v) VALUES (?, ?) ON DUPLICATE KEY UPDATE v = VALUES(v)`,
		createCoord: []string{
			`CREATE TABLE IF NOT EXISTS ontime_nodes (node_id VARCHAR(128) NOT NULL PRIMARY KEY, addr VARCHAR(255) NOT NULL, heartbeat_at BIGINT NOT NULL, started_at BIGINT NOT NULL)
				ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`,
			`CREATE TABLE IF NOT EXISTS ontime_leader (id INT NOT NULL PRIMARY KEY, node_id VARCHAR(128) NOT NULL, term BIGINT NOT NULL, lease_until BIGINT NOT NULL, version BIGINT NOT NULL DEFAULT 0)
				ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`,
			`CREATE TABLE IF NOT EXISTS ontime_assignment (item VARCHAR(128) NOT NULL PRIMARY KEY, node_id VARCHAR(128) NOT NULL, term BIGINT NOT NULL, since BIGINT NOT NULL)
				ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`,
			`INSERT INTO ontime_leader (id, node_id, term, lease_until) VALUES (1, '', 0, 0) ON DUPLICATE KEY UPDATE id = id`,
		},
		upsertNode: `INSERT INTO ontime_nodes (node_id, addr, heartbeat_at, started_at, topics, incarnation, version, zone) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
			ON DUPLICATE KEY UPDATE addr = VALUES(addr), heartbeat_at = VALUES(heartbeat_at), started_at = VALUES(started_at), topics = VALUES(topics),
			incarnation = VALUES(incarnation), version = VALUES(version), zone = VALUES(zone)`,
		upsertGrant: `INSERT INTO ontime_assignment (item, node_id, term, since) VALUES (?, ?, ?, ?)
			ON DUPLICATE KEY UPDATE node_id = VALUES(node_id), term = VALUES(term), since = VALUES(since)`,
		lock: func(ctx context.Context, c *sql.Conn) (func(), error) {
			var got sql.NullInt64
			if err := c.QueryRowContext(ctx, `SELECT GET_LOCK('ontime_migrate', 60)`).Scan(&got); err != nil {
				return nil, err
			}
			if got.Int64 != 1 {
				return nil, errors.New("timed out waiting for the migration lock held by another node")
			}
			return func() { _, _ = c.ExecContext(context.Background(), `SELECT RELEASE_LOCK('ontime_migrate')`) }, nil
		},
	},
	"postgres": {
		name:       "postgres",
		returning:  true,
		numbered:   true,
		onConflict: " ON CONFLICT DO NOTHING",
		createTable: func(t string) []string {
			return append([]string{
				`CREATE TABLE IF NOT EXISTS ` + t + ` (
					id TEXT COLLATE "C" NOT NULL PRIMARY KEY,
					topic TEXT COLLATE "C" NOT NULL,
					task_key TEXT COLLATE "C" NULL,
					shard_hash BIGINT NOT NULL,
					seg SMALLINT NOT NULL,
					due_at BIGINT NOT NULL,
					payload BYTEA NOT NULL,
					target TEXT NOT NULL,
					max_attempts INT NOT NULL,
					attempts INT NOT NULL DEFAULT 0,
					status SMALLINT NOT NULL,
					last_error TEXT NOT NULL DEFAULT '',
					created_at BIGINT NOT NULL,
					updated_at BIGINT NOT NULL,
					owner TEXT NULL,
					lease_until BIGINT NOT NULL DEFAULT 0,
					token BIGINT NOT NULL DEFAULT 0
				)`,
			}, taskIndexes(t)...)
		},
		createMeta: createMetaText,
		upsertMeta: upsertMetaExcluded,
		createCoord: []string{
			`CREATE TABLE IF NOT EXISTS ontime_nodes (node_id TEXT COLLATE "C" NOT NULL PRIMARY KEY, addr TEXT NOT NULL, heartbeat_at BIGINT NOT NULL, started_at BIGINT NOT NULL)`,
			`CREATE TABLE IF NOT EXISTS ontime_leader (id INT NOT NULL PRIMARY KEY, node_id TEXT COLLATE "C" NOT NULL, term BIGINT NOT NULL, lease_until BIGINT NOT NULL, version BIGINT NOT NULL DEFAULT 0)`,
			`CREATE TABLE IF NOT EXISTS ontime_assignment (item TEXT COLLATE "C" NOT NULL PRIMARY KEY, node_id TEXT COLLATE "C" NOT NULL, term BIGINT NOT NULL, since BIGINT NOT NULL)`,
			`INSERT INTO ontime_leader (id, node_id, term, lease_until) VALUES (1, '', 0, 0) ON CONFLICT (id) DO NOTHING`,
		},
		upsertNode:  upsertNodeExcluded,
		upsertGrant: upsertGrantExcluded,
		lock: func(ctx context.Context, c *sql.Conn) (func(), error) {
			if _, err := c.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, migrateLockKey); err != nil {
				return nil, err
			}
			return func() { _, _ = c.ExecContext(context.Background(), `SELECT pg_advisory_unlock($1)`, migrateLockKey) }, nil
		},
	},
}

// What SQLite and PostgreSQL spell alike: the text-typed meta table, and
// upserts by ON CONFLICT … excluded.
const (
	createMetaText     = `CREATE TABLE IF NOT EXISTS ontime_meta (k TEXT NOT NULL PRIMARY KEY, v TEXT NOT NULL)`
	upsertMetaExcluded = `INSERT INTO ontime_meta (k, v) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET v = excluded.v`
	upsertNodeExcluded = `INSERT INTO ontime_nodes (node_id, addr, heartbeat_at, started_at, topics, incarnation, version, zone) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (node_id) DO UPDATE SET addr = excluded.addr, heartbeat_at = excluded.heartbeat_at, started_at = excluded.started_at, topics = excluded.topics,
		incarnation = excluded.incarnation, version = excluded.version, zone = excluded.zone`
	upsertGrantExcluded = `INSERT INTO ontime_assignment (item, node_id, term, since) VALUES (?, ?, ?, ?)
		ON CONFLICT (item) DO UPDATE SET node_id = excluded.node_id, term = excluded.term, since = excluded.since`
)

// taskIndexes are the indexes of task table t on SQLite and PostgreSQL at
// schema version 1 (keys.go and schema8.go replace some); MariaDB declares
// its own inside CREATE TABLE.
func taskIndexes(t string) []string {
	return []string{
		`CREATE UNIQUE INDEX IF NOT EXISTS ` + t + `_topic_key ON ` + t + ` (topic, task_key)`,
		`CREATE INDEX IF NOT EXISTS ` + t + `_scan ON ` + t + ` (seg, status, due_at, id)`,
		`CREATE INDEX IF NOT EXISTS ` + t + `_status ON ` + t + ` (status, id)`,
	}
}

// rebind turns ? placeholders into $n for PostgreSQL. Our SQL never has a
// literal question mark.
func (d *dialect) rebind(q string) string {
	if !d.numbered {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + 16)
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(q[i])
	}
	return b.String()
}

// retryable reports transient conflicts worth running again: deadlocks and
// lock-wait timeouts (MariaDB under concurrent upserts), serialization
// failures, SQLite busy.
func retryable(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number == 1213 || me.Number == 1205
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "40P01" || pe.Code == "40001"
	}
	s := err.Error()
	return strings.Contains(s, "SQLITE_BUSY") || strings.Contains(s, "database is locked")
}

// withRetry runs f again on transient conflicts, a few times.
func withRetry(ctx context.Context, f func() error) error {
	var err error
	for attempt := 0; attempt < 8; attempt++ {
		if err = f(); err == nil || !retryable(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(attempt+1) * 5 * time.Millisecond):
		}
	}
	return fmt.Errorf("still conflicting after retries: %w", err)
}
