// Package sqlstore implements the task store over database/sql for SQLite
// (modernc.org/sqlite, pure Go: `go install` needs no C toolchain),
// MariaDB/MySQL (go-sql-driver/mysql) and PostgreSQL (pgx). One
// implementation; the differences are in dialect.go.
//
// Each database holds N tables ontime_tasks_0000 … and ontime_meta (schema
// version, the table and segment counts the tables were made with, and the
// recorded topology: topology.go),
// and the database coordinator's tables (coord.go).
// Indexes, and why:
//
//	PRIMARY KEY (id)                   Get, and every update by ID
//	(topic, task_key), UNIQUE (topic,  by key, idempotent submit, key hold;
//	task_key) of live rows             see keys.go (schema version 3); keyed
//	                                   rows only (SQLite, PostgreSQL: schema8.go),
//	                                   the first of final rows only
//	                                   (endedkeys.go)
//	(seg, status, ended) of final rows retention (keys.go, retention.go)
//	(seg, status, due_at, id)          the claim and the keyset scan: an index
//	                                   range per (segment, status) in due order;
//	                                   it also serves expired-lease claims and
//	                                   NextDue, since claimed rows are few (only
//	                                   those within the preheat window)
//	(status, id); SQLite, PostgreSQL:  lease extensions, requeues of dead rows,
//	of rows not done (schema8.go)      List by status in ID order
//
// No index for topic-only listing: it is an operator's query, and every
// index costs every insert.
package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ontimehq/ontime/internal/router"
	"github.com/ontimehq/ontime/internal/sqldb"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// Config configures a store.
type Config struct {
	Driver string   // "sqlite" | "mysql" | "postgres"
	DSNs   []string // one per database (M); sqlite: a file path
	// Tables is N, the task tables per database; 0: as many as the
	// store was created with, DefaultTables for a new store.
	Tables   int
	Segments int // scan segments per table
	// KeyHold is how long a final task keeps its key from a new task
	// (retention.key_hold): until then Insert returns it. 0: free at once.
	KeyHold time.Duration
	// MaxConns bounds the pool of each server database (store.max_connections);
	// 0: DefaultMaxConns. SQLite's pools are sized by its one writer.
	MaxConns int
	Logger   *slog.Logger
	// walRestartPages overrides checkpointRestartBytes' pages (tests).
	walRestartPages int
}

// liteBusyTimeout is how long a SQLite connection waits for a lock another
// connection or process holds (busy_timeout).
const liteBusyTimeout = 10 * time.Second

// DefaultMaxConns is a server database's pool size when Config.MaxConns is 0.
const DefaultMaxConns = 32

// DefaultTables is the task tables a new store gets when Config.Tables
// is 0, on every engine. More tables bring a database no parallelism that
// its rows do not already have, and each costs: SQLite writes through one
// connection, so a commit of keyed tasks spread over 16 tables dirtied
// each table's index pages (one table took 1.6× the keyed submits of 16
// clients); PostgreSQL pays for every table a statement names — opened
// and locked with its indexes, its count triggers fired — and a keyed
// group commit named all 16, a Start or a Finish of a few tasks most of
// them (one table: 1.9–2.2× the keyed submits, 1.2–1.3× the batches, an
// outbox's commit → delivery p99 46–67 → 14–32 ms); MariaDB's group
// commit, Start and Finish are a statement per table in one transaction
// (one table: 2.0–2.3× the keyed submits, a burst of 50,000 drained
// 1.1× faster once its Starts and heartbeats lock rows by primary key,
// byID and extendMySQL). BENCHMARKS.md, "The workloads users run".
const DefaultTables = 1

// Store is the SQL task store.
type Store struct {
	cfg  Config
	d    *dialect
	topo router.Topology
	// w are the connection pools that write; r those that read. They are
	// the same pools except for SQLite, whose single writer connection
	// would otherwise also queue every read.
	w, r []*sql.DB
	// kw are PostgreSQL's pools of the keyed insert statement alone, whose
	// sessions plan it once (insert_keyed.go, keyedPool); nil elsewhere.
	kw  []*sql.DB
	log *slog.Logger
	// names[t] is the name of task table t.
	names []string
	ckpt  []*checkpointer // SQLite only
	// paused is the claim filter (topics.go): topics whose pending tasks
	// Claim, Scan and NextDue pass over.
	paused atomic.Pointer[[]string]
	// ins is how Insert writes (insert_dialect.go).
	ins insertPlan
	// lite holds SQLite's prepared inserts (insert_sqlite.go); nil on
	// the other engines.
	lite *liteStmts
	// liteOps holds SQLite's prepared Start and Finish statements
	// (start_sqlite.go); nil on the other engines.
	liteOps *liteOpStmts
	// cleanupFrom is M while the copies an expansion of M databases left
	// behind are being deleted (expand.go, owned); 0 otherwise. Read at
	// Open: a node started before the cleanup ended keeps filtering, which
	// costs a little and changes no answer.
	cleanupFrom int
	// epoch is the topology epoch the store was opened at (MarkInUse).
	epoch int64
	// fence is the write fence of an online cutover (fence.go).
	fence fence
	// ahead is the oldest pending dues' last look-ahead (counts.go).
	ahead aheadCache
	// dueSwept is when each database's spent due counters were last
	// dropped (duecounts.go).
	dueSwept dueSweeps
}

var _ store.Store = (*Store)(nil)

func tableName(i int) string { return fmt.Sprintf("ontime_tasks_%04d", i) }

// Open validates cfg, connects to every database, checks it answers, and
// migrates its schema.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	d, ok := dialects[cfg.Driver]
	if !ok {
		return nil, fmt.Errorf("store.driver: %q is not one of sqlite, mysql, postgres", cfg.Driver)
	}
	if len(cfg.DSNs) == 0 {
		return nil, errors.New("store.databases: at least one database is required")
	}
	if cfg.Segments < 1 || cfg.Segments > router.MaxSegments {
		return nil, fmt.Errorf("store.segments: %d is out of range 1..%d", cfg.Segments, router.MaxSegments)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Store{cfg: cfg, d: d, log: cfg.Logger, ins: planFor(d)}
	s.fence.born = time.Now()
	// Unset (0), the tables are settled by the first migrate, which reads
	// what databases[0] records.
	if cfg.Tables != 0 {
		if err := s.setTables(cfg.Tables); err != nil {
			return nil, err
		}
	}
	if d.name == "sqlite" {
		s.lite = newLiteStmts()
		s.liteOps = newLiteOpStmts()
	}
	for i, dsn := range cfg.DSNs {
		w, r, err := s.connect(ctx, dsn)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("store.databases[%d]: %w", i, err)
		}
		s.w, s.r = append(s.w, w), append(s.r, r)
		if _, keyed := s.poolSizes(); keyed > 0 {
			k, err := s.keyedPool(dsn, keyed)
			if err != nil {
				s.Close()
				return nil, fmt.Errorf("store.databases[%d]: %w", i, err)
			}
			s.kw = append(s.kw, k)
		}
		err = ping(ctx, w)
		if err != nil {
			s.Close()
			// One line: pgx lists every address it tried on lines of its own.
			msg := strings.Join(strings.Fields(err.Error()), " ")
			return nil, fmt.Errorf("store.databases[%d]: cannot reach the %s database: %s", i, cfg.Driver, msg)
		}
		if err := whileBusy(ctx, startBusyWait, func() error {
			return withRetry(ctx, func() error { return s.migrate(ctx, w) })
		}); err != nil {
			s.Close()
			return nil, fmt.Errorf("store.databases[%d]: %w", i, err)
		}
	}
	if err := s.checkTopology(ctx); err != nil {
		s.Close()
		return nil, err
	}
	phase, from, _, _, err := s.loadExpansion(ctx)
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("store.databases[0]: %w", err)
	}
	if phase == PhaseCleanup && len(s.w) == 2*from {
		s.cleanupFrom = from
	}
	first, err := readIdentity(ctx, s.w[0])
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("store.databases[0]: %w", err)
	}
	s.epoch = first.epoch
	return s, nil
}

// setTables sets the topology to n tables per database.
func (s *Store) setTables(n int) error {
	topo := router.Topology{Databases: len(s.cfg.DSNs), Tables: n}
	if err := topo.Validate(); err != nil {
		return err
	}
	s.cfg.Tables, s.topo, s.names = n, topo, nil
	for i := range n {
		s.names = append(s.names, tableName(i))
	}
	return nil
}

// Tables is N, the task tables per database the store was opened with.
func (s *Store) Tables() int { return s.cfg.Tables }

// startBusyWait is how long Open waits for a server that is at its
// connection limit or still starting: both pass on their own (other
// clients close connections, recovery ends), so a node started beside
// busy neighbours waits its turn instead of exiting.
const startBusyWait = 30 * time.Second

// ping checks a database answers. A server refusing connections is
// reported at once; one at its connection limit is waited for.
func ping(ctx context.Context, db *sql.DB) error {
	return whileBusy(ctx, startBusyWait, func() error {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		// Retried: SQLite answers "busy" while another process switches
		// the file to WAL mode, without waiting on busy_timeout.
		return withRetry(pctx, func() error { return db.PingContext(pctx) })
	})
}

// whileBusy runs f until it succeeds, fails for another reason than
// serverBusy, or wait has passed.
func whileBusy(ctx context.Context, wait time.Duration, f func() error) error {
	deadline := time.Now().Add(wait)
	pause := 100 * time.Millisecond
	for {
		err := f()
		if err == nil || !serverBusy(err) || time.Now().Add(pause).After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(pause):
		}
		pause = min(2*pause, time.Second)
	}
}

func (s *Store) connect(ctx context.Context, dsn string) (w, r *sql.DB, err error) {
	if s.cfg.Driver != sqldb.SQLite {
		// MultiStatements: MariaDB's batch inserts send a transaction in one
		// query (insert_mysql.go). Every statement's SQL is built here,
		// never from input, and interpolated values are escaped.
		db, err := sqldb.Open(s.cfg.Driver, dsn, sqldb.Options{MultiStatements: true})
		if err != nil {
			return nil, nil, err
		}
		main, _ := s.poolSizes()
		poolLimits(db, main)
		return db, db, nil
	}
	if err := liteCreate(ctx, dsn); err != nil {
		return nil, nil, err
	}
	// WAL lets readers run beside the writer; synchronous=NORMAL is
	// durable across process crashes in WAL mode (only an OS crash can
	// lose the last transactions); BEGIN IMMEDIATE takes the write lock
	// up front so transactions never fail to upgrade it.
	opts := "_pragma=busy_timeout(" + strconv.FormatInt(liteBusyTimeout.Milliseconds(), 10) + ")&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"
	// The writer's commits never checkpoint (wal_autocheckpoint 0): the
	// checkpointer does, on a connection and a core of its own (only its
	// rare RESTART takes the writer's connection, checkpoint.go). Nor does
	// it truncate the WAL file (journal_size_limit -1): with a limit, the
	// first commit after a checkpoint that emptied the WAL cut the file
	// down to the limit while holding the only write lock, an ftruncate of
	// tens of megabytes that held every Start back 100-280 ms (the steady
	// benchmark's late tail, seen when the submits stopped and the
	// checkpoint could finish). The file keeps the size its busiest moment
	// gave it, bounded by the checkpointer's RESTART; the last connection
	// to close removes it.
	w, err = sqldb.Open(sqldb.SQLite, dsn, sqldb.Options{SQLite: opts + "&_txlock=immediate&_pragma=wal_autocheckpoint(0)&_pragma=journal_size_limit(-1)" + liteWriterPragmas})
	if err != nil {
		return nil, nil, err
	}
	w.SetMaxOpenConns(1) // SQLite has one writer: queue here, not on SQLITE_BUSY
	r, err = sqldb.Open(sqldb.SQLite, dsn, sqldb.Options{SQLite: opts + "&_pragma=query_only(1)"})
	if err != nil {
		w.Close()
		return nil, nil, err
	}
	r.SetMaxOpenConns(4)
	c, err := sqldb.Open(sqldb.SQLite, dsn, sqldb.Options{SQLite: opts})
	if err != nil {
		w.Close()
		r.Close()
		return nil, nil, err
	}
	c.SetMaxOpenConns(1)
	var pageSize int
	if err := c.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&pageSize); err != nil || pageSize <= 0 {
		w.Close()
		r.Close()
		c.Close()
		return nil, nil, fmt.Errorf("page size: %d %w", pageSize, err)
	}
	// The checkpointer lives until Close, not as long as Open's context.
	s.ckpt = append(s.ckpt, startCheckpointer(context.Background(), c, w, s.log, cmp.Or(s.cfg.walRestartPages, checkpointRestartBytes/pageSize)))
	return w, r, nil
}

// SchemaVersion is the version migrate brings a database to.
//
//	1  the task tables
//	2  the database coordinator's tables (coord.go)
//	3  keys unique among live tasks only; the retention index (keys.go)
//	4  the topics table: paused flags (topics.go)
//	5  schedules (schedules.go)
//	6  the scan jobs' state: flags, items, runs (jobs.go)
//	7  first_due_at on the task tables: the due time a task was submitted
//	   with, kept when retries move due_at
//	8  SQLite, PostgreSQL: the key indexes hold keyed rows only (schema8.go)
//	9  created_at on the scan jobs' items: the first take, the lower bound
//	   of the fire times an item may have missed (jobs_created.go)
//	10 moved_by on the task tables: what last moved due_at (task.Move)
//	11 the topics each node handles with Go handlers, and the handoffs of
//	   tasks without a target to a node that handles them (handoff.go)
//	12 incarnation on ontime_nodes: the ID of each node's current process,
//	   which its claim tokens carry (store.Incarnation)
//	13 traceparent on the task tables: the W3C trace context of the
//	   submit, continued by the task's deliveries ('' when not traced)
//	14 retry on the task tables: the task's own retry policy ('' none);
//	   the topics' settings (topic_settings.go)
//	15 priority on the task tables: 0 to task.MaxPriority (task.Rank)
//	16 bulk operations (operations.go) and result on the task tables:
//	   what the delivery that made a task done answered (NULL: nothing)
//	17 the recorded topology (topology.go: each database's identity and
//	   the store's list, in ontime_meta) and the expansion's state
//	   (expand.go)
//	18 zone on ontime_nodes: the node's cluster.zone ('' for none), which
//	   the leader's assignment prefers for items of that zone's databases
//	19 version on ontime_nodes: each node's build version, shown in the
//	   cluster view ('' from nodes of earlier versions)
//	20 SQLite, PostgreSQL: the tasks per topic and status, maintained by
//	   triggers on the task tables (counts.go)
//	21 SQLite, PostgreSQL: the dead rows by topic, a partial index
//	   (deadindex.go)
//	22 the leases index on the task tables: (seg, status, lease_until) of
//	   claimed and running rows (schema22.go)
//	23 ontime_expand_gone: the moving rows deleted while an expansion
//	   copies, so that the copy deletes them from the twins (expand.go)
//	24 SQLite, PostgreSQL: every row by topic, for the lists of one topic
//	   (topicindex.go)
//	25 SQLite, PostgreSQL: the pending tasks per topic and hour of due
//	   time, maintained by the writes (duecounts.go)
//	26 SQLite, PostgreSQL: the index of keyed rows holds the final ones
//	   only (endedkeys.go)
const SchemaVersion = 26

// migrateTo runs the step that brings a database from version v-1 to v.
// Every statement is idempotent (IF NOT EXISTS, insert-if-absent), so a
// step cut short — MySQL commits each DDL statement on its own — runs
// again whole; migrate records the version after each step.
func (s *Store) migrateTo(ctx context.Context, c *sql.Conn, v int) error {
	var stmts []string
	switch v {
	case 1:
		for _, t := range s.names {
			stmts = append(stmts, s.d.createTable(t)...)
		}
	case 2:
		// In every database, so that one version means one schema; the
		// coordinator uses the first database's.
		stmts = s.d.createCoord
	case 3:
		return s.migrateKeys(ctx, c)
	case 4:
		// In every database like the coordinator's tables; the first one's is used.
		stmts = createTopics[s.d.name]
	case 5:
		// In every database like version 2; schedules use the first's.
		stmts = createSchedules[s.d.name]
	case 6:
		stmts = createJobs[s.d.name]
	case 7:
		for _, t := range s.names {
			if err := s.addColumn(ctx, c, t, "first_due_at", "BIGINT NOT NULL DEFAULT 0"); err != nil {
				return err
			}
			// Rows from before: their first due time is lost; the current
			// one is the best there is.
			stmts = append(stmts, `UPDATE `+t+` SET first_due_at = due_at WHERE first_due_at = 0`)
		}
	case 8:
		return s.migrateKeyed(ctx, c)
	case 9:
		return s.migrateJobCreated(ctx, c)
	case 10:
		// Rows from before keep 0 (task.MovedNone): what moved them was
		// not recorded.
		for _, t := range s.names {
			if err := s.addColumn(ctx, c, t, "moved_by", "SMALLINT NOT NULL DEFAULT 0"); err != nil {
				return err
			}
		}
	case 11:
		return s.migrateHandlers(ctx, c)
	case 12:
		// Registrations from before keep 0: incarnation unknown, their
		// restarts told by started_at as before.
		return s.addColumn(ctx, c, "ontime_nodes", "incarnation", "BIGINT NOT NULL DEFAULT 0")
	case 13:
		// Rows from before were not traced: ''. A traceparent of version
		// 00 is 55 characters; 64 leaves room for a later version's.
		for _, t := range s.names {
			if err := s.addColumn(ctx, c, t, "traceparent", "VARCHAR(64) NOT NULL DEFAULT ''"); err != nil {
				return err
			}
		}
	case 14:
		// Rows from before have no policy of their own: ''. The stored
		// form is bounded by task.MaxRetrySchedule to fit.
		for _, t := range s.names {
			if err := s.addColumn(ctx, c, t, "retry", "VARCHAR(512) NOT NULL DEFAULT ''"); err != nil {
				return err
			}
		}
		// In every database like the topics table; the first one's is used.
		stmts = createTopicSettings[s.d.name]
	case 15:
		// Rows from before are of priority 0, the default. No index: the
		// claim keeps its due order (task.Rank orders what is claimed).
		for _, t := range s.names {
			if err := s.addColumn(ctx, c, t, "priority", "SMALLINT NOT NULL DEFAULT 0"); err != nil {
				return err
			}
		}
	case 16:
		return s.migrateOperations(ctx, c)
	case 17:
		stmts = append(append([]string{}, createExpansion[s.d.name]...), createUsers[s.d.name]...)
	case 18:
		// Registrations from before keep '': no zone, any item.
		return s.addColumn(ctx, c, "ontime_nodes", "zone", "VARCHAR(32) NOT NULL DEFAULT ''")
	case 19:
		// Registrations from before keep '': version unknown.
		return s.addColumn(ctx, c, "ontime_nodes", "version", "VARCHAR(128) NOT NULL DEFAULT ''")
	case 20:
		return s.migrateCounts(ctx, c)
	case 21:
		return s.migrateDeadIndex(ctx, c)
	case 22:
		return s.migrateLeases(ctx, c)
	case 23:
		stmts = createExpandGone[s.d.name]
	case 24:
		return s.migrateTopicIndex(ctx, c)
	case 25:
		return s.migrateDueCounts(ctx, c)
	case 26:
		return s.migrateEndedKeys(ctx, c)
	default:
		return fmt.Errorf("no migration to schema version %d", v)
	}
	for _, stmt := range stmts {
		if _, err := c.ExecContext(ctx, stmt); err != nil {
			return err
		}
	}
	return nil
}

// addColumn adds a column unless the table has it already: a step cut
// short (MySQL commits each ALTER on its own) runs again whole, and SQLite
// stores opened at once in one process take no common migration lock. The
// probe is a query of the column, which every engine refuses when it is
// absent.
func (s *Store) addColumn(ctx context.Context, c *sql.Conn, table, column, def string) error {
	has := func() bool {
		rows, err := c.QueryContext(ctx, `SELECT `+column+` FROM `+table+` WHERE 1 = 0`)
		if err != nil {
			return false
		}
		return rows.Close() == nil
	}
	if has() {
		return nil
	}
	if _, err := c.ExecContext(ctx, `ALTER TABLE `+table+` ADD COLUMN `+column+` `+def); err != nil && !has() {
		return err
	}
	return nil
}

// migrate brings one database to SchemaVersion under an engine lock so that
// nodes starting together migrate once.
func (s *Store) migrate(ctx context.Context, db *sql.DB) error {
	return s.migrateUpTo(ctx, db, SchemaVersion)
}

// migrateUpTo brings one database to version target; tests make the
// databases of earlier versions with it, by the steps that made them.
func (s *Store) migrateUpTo(ctx context.Context, db *sql.DB, target int) error {
	c, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer c.Close()
	unlock, err := s.d.lock(ctx, c)
	if err != nil {
		return fmt.Errorf("migrate: lock: %w", err)
	}
	defer unlock()
	if _, err := c.ExecContext(ctx, s.d.createMeta); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	meta := map[string]string{}
	rows, err := c.QueryContext(ctx, `SELECT k, v FROM ontime_meta`)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			rows.Close()
			return fmt.Errorf("migrate: %w", err)
		}
		meta[k] = v
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	setMeta := func(k, v string) error {
		if _, err := c.ExecContext(ctx, s.d.rebind(s.d.upsertMeta), k, v); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		return nil
	}
	if s.cfg.Tables == 0 {
		// store.tables unset: the count the store was created with, or
		// a new store's.
		n := DefaultTables
		if t, ok := meta["tables"]; ok {
			if n, err = strconv.Atoi(t); err != nil || n < 1 {
				return fmt.Errorf("migrate: ontime_meta records %q tables", t)
			}
		}
		if err := s.setTables(n); err != nil {
			return err
		}
	}
	from := 0
	if v, ok := meta["schema_version"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return fmt.Errorf("migrate: ontime_meta holds schema version %q", v)
		}
		if n > SchemaVersion {
			return fmt.Errorf("schema version %d is newer than this ontime (%d): upgrade ontime", n, SchemaVersion)
		}
		if t := meta["tables"]; t != strconv.Itoa(s.cfg.Tables) {
			return fmt.Errorf("store.tables: the database was created with %s tables, the config says %d", t, s.cfg.Tables)
		}
		if sg := meta["segments"]; sg != strconv.Itoa(s.cfg.Segments) {
			return fmt.Errorf("store.segments: the database was created with %s segments, the config says %d", sg, s.cfg.Segments)
		}
		from = n
	} else {
		if err := setMeta("tables", strconv.Itoa(s.cfg.Tables)); err != nil {
			return err
		}
		if err := setMeta("segments", strconv.Itoa(s.cfg.Segments)); err != nil {
			return err
		}
	}
	for v := from + 1; v <= target; v++ {
		if err := s.migrateTo(ctx, c, v); err != nil {
			return fmt.Errorf("migrate to version %d: %w", v, err)
		}
		if err := setMeta("schema_version", strconv.Itoa(v)); err != nil {
			return err
		}
	}
	if from < target {
		s.log.Info("store migrated", "driver", s.cfg.Driver, "from", from, "version", target, "tables", s.cfg.Tables)
	}
	return nil
}

// Close closes every pool.
func (s *Store) Close() error {
	var errs []error
	if s.lite != nil {
		errs = append(errs, s.lite.close())
	}
	if s.liteOps != nil {
		errs = append(errs, s.liteOps.close())
	}
	for _, c := range s.ckpt {
		errs = append(errs, c.close())
	}
	seen := map[*sql.DB]bool{}
	for _, db := range slices.Concat(s.w, s.r, s.kw) {
		if db != nil && !seen[db] {
			seen[db] = true
			errs = append(errs, db.Close())
		}
	}
	return errors.Join(errs...)
}

// Ping checks every database.
func (s *Store) Ping(ctx context.Context) (err error) {
	defer classify(&err)
	for i, db := range s.w {
		if err := db.PingContext(ctx); err != nil {
			return fmt.Errorf("store.databases[%d]: %w", i, err)
		}
	}
	return nil
}

// Items lists every (database, table, segment).
func (s *Store) Items() []store.Item {
	items := make([]store.Item, 0, s.topo.Slots()*s.cfg.Segments)
	for db := range s.topo.Databases {
		for t := range s.topo.Tables {
			for seg := range s.cfg.Segments {
				items = append(items, store.Item{DB: db, Table: t, Segment: seg})
			}
		}
	}
	return items
}

// locate routes a task ID.
func (s *Store) locate(id string) (db, table int, err error) {
	p, err := router.ParseID(id)
	if err != nil {
		return 0, 0, fmt.Errorf("%w: %w", store.ErrNotFound, err)
	}
	db, table = s.topo.Locate(p.ShardHash)
	return db, table, nil
}

// ---- rows ----

// cols are the columns a task is read from (scanTask); result is NULL
// until the task is done with one.
const cols = insertCols + `, moved_by, result`

// insertCols are the columns an insert writes; a new row keeps moved_by's
// default.
const insertCols = `id, topic, task_key, shard_hash, seg, due_at, payload, target, max_attempts, attempts, status, last_error, created_at, updated_at, owner, lease_until, token, first_due_at, traceparent, retry, priority`

// nInsertCols is the number of columns in insertCols.
const nInsertCols = 21

// The SET terms that record what moved due_at (task.Move), beside it.
const (
	setMovedRetry   = `moved_by = 1`
	setMovedUpdate  = `moved_by = 2`
	setMovedRequeue = `moved_by = 3`
)

func micros(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

func fromMicros(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMicro(v).UTC()
}

type scanner interface{ Scan(dest ...any) error }

func scanTask(sc scanner) (*task.Task, error) {
	var t task.Task
	var key, owner sql.NullString
	var hash, due, created, updated, lease, firstDue int64
	var status, moved int64
	if err := sc.Scan(&t.ID, &t.Topic, &key, &hash, &t.Seg, &due, &t.Payload, &t.Target, &t.MaxAttempts, &t.Attempts,
		&status, &t.LastError, &created, &updated, &owner, &lease, &t.Token, &firstDue, &t.Traceparent, &t.Retry, &t.Priority, &moved, &t.Result); err != nil {
		return nil, err
	}
	t.MovedBy = task.Move(moved)
	t.Key, t.Owner = key.String, owner.String
	t.ShardHash = uint32(hash)
	t.Status = task.Status(status)
	t.DueAt, t.CreatedAt, t.UpdatedAt, t.LeaseUntil = fromMicros(due), fromMicros(created), fromMicros(updated), fromMicros(lease)
	t.FirstDueAt = fromMicros(firstDue)
	return &t, nil
}

// querier is a pool or a transaction.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func (s *Store) queryTasks(ctx context.Context, db querier, q string, args ...any) ([]*task.Task, error) {
	rows, err := db.QueryContext(ctx, s.d.rebind(q), args...)
	if err != nil {
		return nil, err
	}
	return scanTasks(rows)
}

// scanTasks reads every row of rows as a task, and closes rows.
func scanTasks(rows *sql.Rows) ([]*task.Task, error) {
	defer rows.Close()
	var out []*task.Task
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// segIn is "seg IN (0, 1, …)" over n segments: the term that lets a
// read walk the scan index (seg, status, due_at) segment by segment.
func segIn(n int) string {
	segs := make([]string, n)
	for i := range segs {
		segs[i] = strconv.Itoa(i)
	}
	return `seg IN (` + strings.Join(segs, ", ") + `)`
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// poolSizes splits a server database's connections (Config.MaxConns)
// between the main pool and PostgreSQL's keyed-insert pool (keyedPool):
// a quarter to the keyed pool from 16 connections on, none below (the
// keyed statement then runs on the main pool, planned per call), so a
// node opens no more than MaxConns to a database either way. A small
// pool is left whole: writes that wait on a server (a synchronous
// standby lost with its zone) can hold every connection of a pool, and
// the cluster's rounds need one to let a fenced node's items go
// (TestChaosZoneLoss with max_connections 8: 6 were not enough).
func (s *Store) poolSizes() (main, keyed int) {
	n := s.cfg.MaxConns
	if n <= 0 {
		n = DefaultMaxConns
	}
	if !s.ins.keyed || n < 16 {
		return n, 0
	}
	return n - n/4, n / 4
}

// poolLimits sizes a server engine's pool: up to n connections (a share
// of poolSizes) while they are used (group commit writes several tables
// at once), closed after idleConnTTL unused, so a burst's connections do
// not stay held against the server's max_connections (PostgreSQL's default
// is 100, shared by every node and client).
func poolLimits(db *sql.DB, n int) {
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	db.SetConnMaxIdleTime(idleConnTTL)
	db.SetConnMaxLifetime(time.Hour)
}

// idleConnTTL is how long an unused pooled connection is kept.
const idleConnTTL = 30 * time.Second
