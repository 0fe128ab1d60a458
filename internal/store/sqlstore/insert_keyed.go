package sqlstore

import (
	"context"
	"database/sql"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ontimehq/ontime/internal/sqldb"
	"github.com/ontimehq/ontime/internal/store"
)

// PostgreSQL's insert of a batch with keys: every table's rows of one
// database in one statement, one data-modifying CTE per table, each an
// INSERT … SELECT FROM unnest(…) that skips the rows whose key is held
// (a live row of the key, or a final one that ended within the key hold,
// unless the task replaces final tasks) and, through ON CONFLICT DO
// NOTHING, those that meet a live row committed meanwhile or an ID that
// exists. A statement is atomic by itself and commits alone, so a group
// commit of keyed submits spread over 16 tables is one round trip instead
// of 34 (BEGIN, then per table the key hold's SELECT and the INSERT, then
// COMMIT): the statements path's cost was waiting, not CPU (4 % of wall
// time on the client in a CPU profile of BenchmarkInsertSmallKeyed). The
// statement's planning grows with its tables (EXPLAIN ANALYZE: 0.35 ms
// for one table, 15–23 ms for 9–16 under load), as the statements' does.
//
// The statement runs on a pool of its own (keyedPool) whose sessions plan
// prepared statements generically, once: PostgreSQL otherwise plans it
// anew on every call, for its values — it compares the generic plan, which
// assumes 100 rows per unnest, with custom ones that see each array's
// length, and keeps the custom plans however often it runs. Planning was
// as much as running it (0.36–0.9 ms a call in pg_stat_statements under
// the outbox benchmark's load), and every group commit of keyed submits
// paid it. A statement over more than one table names every table, the
// others with empty arrays, so that one statement per store is prepared
// and planned once per connection whatever tables a group touches (with
// custom plans, naming every table cost more than it saved below three
// quarters of them). BenchmarkInsertSmallKeyed/postgres, test binaries
// before and after alternated: 1 task 1.15–1.36× (synchronous_commit off
// 1.26–1.54×), 16 tasks 1.96–2.66× (2.0–2.7×), 100 tasks 1.37–1.63×
// (1.56–2.49×).
//
// Only the keyed rows the statement skipped are read back, afterwards, on
// the writer: whoever holds the key answers them (Existing). A key whose
// holder ended in between and no longer holds it (rare: the holder was
// live when the statement ran) goes in with the statements of insertTx,
// in a transaction of its own.

// keyedArrayTypes are arrayTypes and the replace_final flag.
var keyedArrayTypes = append(slices.Clone(arrayTypes), "bool")

// oneStatement reports whether the table groups of one database go in
// one keyed statement: PostgreSQL's plan, a key among the tasks (without,
// COPY takes them), and within one statement's rows and bytes. One table
// too: a server engine's group commit is per table, so a keyed submit, or
// a group of them, is one table's rows, and the statements of insertTx
// cost it four round trips and a transaction (BEGIN, the key hold's
// SELECT, the INSERT, COMMIT) where the statement is one round trip that
// commits by itself. Under 16 keyed HTTP clients with delivery running,
// the node waited on those round trips (6.6 % of one core busy in a CPU
// profile of ontime serve, every handler in a query).
func (s *Store) oneStatement(gs []group, tasks []store.NewTask) bool {
	if !s.ins.keyed || !anyKeyed(gs, tasks) {
		return false
	}
	rows, size := 0, 0
	for _, g := range gs {
		for _, i := range g.idx {
			rows++
			size += len(tasks[i].Payload) + len(tasks[i].Target) + len(tasks[i].Key)
		}
	}
	return rows <= s.ins.rows && size <= s.ins.bytes
}

// keyedInsertQuery inserts into each table of tables the rows of its
// arrays: $1 is the time of the insert, $2 the key hold's cutoff (a final
// row that ended after it holds its key), then keyedArrayTypes' arrays per
// table. It returns the IDs inserted. A row whose key a live task holds,
// or a final one within the hold, is skipped: two NOT EXISTS, one through
// each partial key index (endedkeys.go), under the statement's one
// snapshot — a holder live in it and ended by the time of the insert is
// seen by the first, where the live-key index that ON CONFLICT consults
// (the rows as they are now) would no longer hold it and a second task
// of the key would be made (TestChaosOutboxKill under load saw two).
// ON CONFLICT skips a live holder committed after the snapshot. Each
// subquery names an outer column outside an equality (x.id <> r.id, the
// flag): one correlated by equalities alone PostgreSQL may turn into a
// hashed subplan, which a generic plan made over empty tables keeps — a
// read of every live or final row per statement.
func keyedInsertQuery(tables []string) string {
	var b strings.Builder
	b.WriteString("WITH ")
	for n, t := range tables {
		if n > 0 {
			b.WriteString(", ")
		}
		first := 3 + n*len(keyedArrayTypes)
		b.WriteString("i" + strconv.Itoa(n) + ` AS (INSERT INTO ` + t + ` (` + insertCols + `)
		SELECT id, topic, task_key, shard_hash, seg, due_at, payload, target, max_attempts, ` + attemptsOfStatus + `, status, '', $1, $1, owner, lease_until, token, due_at, traceparent, retry, priority
		FROM unnest(`)
		for j, typ := range keyedArrayTypes {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString("$" + strconv.Itoa(first+j) + "::" + typ + "[]")
		}
		b.WriteString(`) AS r(id, topic, task_key, shard_hash, seg, due_at, payload, target, max_attempts, status, owner, lease_until, token, traceparent, retry, priority, replace_final)
		WHERE r.task_key IS NULL OR NOT EXISTS (SELECT 1 FROM ` + t + ` x WHERE x.topic = r.topic AND x.task_key = r.task_key
				AND x.status < 3 AND x.id <> r.id)
			AND NOT EXISTS (SELECT 1 FROM ` + t + ` x WHERE x.topic = r.topic AND x.task_key = r.task_key
				AND x.status >= 3 AND NOT r.replace_final AND x.updated_at > $2)
		ON CONFLICT DO NOTHING RETURNING id)`)
	}
	for n := range tables {
		if n == 0 {
			b.WriteString(" SELECT id FROM i0")
			continue
		}
		b.WriteString(" UNION ALL SELECT id FROM i" + strconv.Itoa(n))
	}
	return b.String()
}

// allTables reports whether a keyed statement over n of the database's
// tables names them all: over more than one (see above).
func (s *Store) allTables(n int) bool {
	return s.ins.keyedAll && n > 1
}

// keyedPool opens the pool of the keyed statement for dsn: its sessions
// plan prepared statements generically (sqldb.Options.GenericPlans). The
// statement's plan does not depend on its values (each table's rows are
// found by the key index, whatever the arrays hold), and nothing else runs
// on the pool: the store's other statements are planned for their values
// (a lease or due-time range, an IN list), as they were. Its size is taken
// from the store's connections (poolSizes).
func (s *Store) keyedPool(dsn string, size int) (*sql.DB, error) {
	db, err := sqldb.Open(s.cfg.Driver, dsn, sqldb.Options{GenericPlans: true})
	if err != nil {
		return nil, err
	}
	poolLimits(db, size)
	return db, nil
}

// keyedInsert writes gs (one database) in one keyedInsertQuery, sets out
// and returns the groups of the keyed tasks still to insert (see above).
func (s *Store) keyedInsert(ctx context.Context, gs []group, tasks []store.NewTask, out []store.Inserted, now time.Time) ([]group, error) {
	nowUs := now.UnixMicro()
	cutoff := s.holdCutoff(now)
	// Prepared once per connection: one table's statement (a keyed single
	// submit, or a group commit of them: 16 statements in all), or the one
	// naming every table (allTables). Naming only the tables with rows
	// would make one of thousands of table sets, each missing the cache
	// and paying a prepare round trip.
	mode := s.ins.mode
	tables := make([][]int, 0, len(gs)) // per statement table: its rows
	var names []string
	switch {
	case len(gs) == 1:
		mode = pgx.QueryExecModeCacheStatement
		names, tables = []string{s.names[gs[0].table]}, append(tables, gs[0].idx)
	case s.allTables(len(gs)):
		mode = pgx.QueryExecModeCacheStatement
		names, tables = s.names, make([][]int, len(s.names))
		for _, g := range gs {
			tables[g.table] = g.idx
		}
	default:
		for _, g := range gs {
			names, tables = append(names, s.names[g.table]), append(tables, g.idx)
		}
	}
	args := make([]any, 0, 3+len(tables)*len(keyedArrayTypes))
	args = append(args, mode, nowUs, cutoff)
	for _, rows := range tables {
		idx := byKey(rows, tasks)
		repl := make([]bool, len(idx))
		for j, i := range idx {
			repl[j] = tasks[i].ReplaceFinal
		}
		args = append(args, arrayColumns(idx, tasks, out, nowUs)...)
		args = append(args, repl)
	}
	db := s.w[gs[0].db]
	ins := db
	if s.kw != nil {
		ins = s.kw[gs[0].db]
	}
	inserted := map[string]bool{}
	err := func() error {
		rows, err := ins.QueryContext(ctx, keyedInsertQuery(names), args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			inserted[id] = true
		}
		return rows.Err()
	}()
	if err != nil {
		return nil, err
	}
	var again []group
	for _, g := range gs {
		var unsure []int
		for _, i := range g.idx {
			if tasks[i].Key != "" && !inserted[tasks[i].ID] {
				unsure = append(unsure, i)
			}
		}
		rest, err := s.readBackKeys(ctx, db, s.names[g.table], unsure, tasks, out, now)
		if err != nil {
			return nil, err
		}
		if len(rest) > 0 {
			again = append(again, group{db: g.db, table: g.table, idx: rest})
		}
	}
	return again, nil
}
