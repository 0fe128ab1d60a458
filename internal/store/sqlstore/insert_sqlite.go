package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"time"

	"github.com/ontimehq/ontime/internal/store"
)

// SQLite's insert path. Parsing the SQL text of the multi-row INSERTs
// built per call was 15–17 % of a batch insert's CPU (and of the service's
// under submit load), so every statement is prepared once per table and row count and
// kept. Row counts are powers of two up to liteMaxRows: a table's rows go
// in as the binary decomposition of their number (62 rows: 32 + 16 + 8 +
// 4 + 2), so a handful of statements per table serve every batch size.
//
// SQLite has one writer, so nothing commits under a write transaction:
// rows need no key order (no deadlocks to avoid), and a statement that
// inserted fewer rows than it carried met a row of its own ID or live key,
// which the read-back below finds. The count comes from sqlite3_changes,
// so the statements need no RETURNING.

// liteMaxRows is the largest statement, in rows; liteClasses statements per
// table (1, 2, 4 … liteMaxRows rows). A prepared statement holds its
// program and a register per value: about 1.5 KiB per row, so a table's
// statements take some 200 KiB (3 MiB for the default 16 tables). Larger
// statements would save little: binding and inserting cost the same per
// row in any statement; only the few calls per statement are saved.
const (
	liteMaxRows = 64
	liteClasses = 7
)

// liteStmts holds the prepared INSERTs of one store, per database. They are
// prepared on the writer pool (database/sql re-prepares them if the writer
// connection is replaced) and closed by Store.Close. SQLite re-prepares a
// statement by itself when the schema changes under it.
type liteStmts = stmtCache[liteKey]

// liteKey names one prepared INSERT; hold: the statement that also skips
// the rows whose key a final task holds (liteHoldQuery).
type liteKey struct {
	db, table, rows int
	hold            bool
}

func newLiteStmts() *liteStmts { return newStmtCache[liteKey](0) }

// liteInsertQuery inserts n rows into t: every column but last_error (a
// constant) bound per row; created_at and updated_at take the
// time of the insert, first_due_at the due time.
func liteInsertQuery(t string, n int) string {
	const row = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '', ?, ?, ?, ?, ?, ?, ?, ?, ?)"
	var b strings.Builder
	b.Grow(len(t) + len(insertCols) + 64 + n*(len(row)+2))
	b.WriteString("INSERT INTO " + t + " (" + insertCols + ") VALUES ")
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(row)
	}
	b.WriteString(" ON CONFLICT DO NOTHING")
	return b.String()
}

// liteHoldQuery is liteInsertQuery for keyed rows under a key hold: each
// row carries one more value, the cutoff after which a final row of its
// key that ended holds the key (math.MaxInt64 for a task that replaces
// final tasks), and a row whose key such a final row holds is skipped
// (NOT EXISTS through the index of final keyed rows, endedkeys.go), as ON
// CONFLICT skips one that meets a live key. It replaces
// a SELECT of the keys' rows before the INSERT (resolveKeys): in a CPU
// profile of ontime serve under 16 keyed HTTP clients with delivery
// running, that SELECT took 14 % of the process and the INSERT 6 %. The
// keyed rows it skips are read back afterwards, as those ON CONFLICT
// skips are (readBackKeys), and answer their key's holder. SQLite reads
// the SELECT whole before it inserts (it reads the table it writes), so
// two rows of one statement with the same key both pass NOT EXISTS and
// the live-key index keeps the second out, as in one VALUES list.
func liteHoldQuery(t string, n int) string {
	const row = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
	var b strings.Builder
	b.Grow(len(t)*2 + len(insertCols) + 512 + n*(len(row)+2))
	b.WriteString("INSERT INTO " + t + " (" + insertCols + ") SELECT ")
	for c := 1; c <= nInsertCols; c++ {
		if c > 1 {
			b.WriteString(", ")
		}
		b.WriteString("column" + strconv.Itoa(c))
	}
	b.WriteString(" FROM (VALUES ")
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(row)
	}
	b.WriteString(") WHERE column3 IS NULL OR NOT EXISTS (SELECT 1 FROM " + t + " x WHERE x.topic = column2 AND x.task_key = column3" +
		" AND x.status >= 3 AND x.updated_at > column22) ON CONFLICT DO NOTHING")
	return b.String()
}

// prepareLite makes sure table's statements of database db exist, before
// the write transaction (see stmtCache): the plain ones, or with hold the
// key hold's.
func (s *Store) prepareLite(ctx context.Context, db, table int, hold bool) error {
	keys := make([]liteKey, liteClasses)
	for k := range liteClasses {
		keys[k] = liteKey{db, table, 1 << k, hold}
	}
	return s.lite.ensure(ctx, keys, func(ctx context.Context, k liteKey) (*sql.Stmt, error) {
		q := liteInsertQuery(s.names[k.table], k.rows)
		if k.hold {
			q = liteHoldQuery(s.names[k.table], k.rows)
		}
		st, err := s.w[k.db].PrepareContext(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("prepare insert into %s: %w", s.names[k.table], err)
		}
		return st, nil
	})
}

// liteChunks splits n rows into statement sizes, largest first.
func liteChunks(n int) []int {
	var out []int
	for ; n >= liteMaxRows; n -= liteMaxRows {
		out = append(out, liteMaxRows)
	}
	for n > 0 {
		k := 1 << (bits.Len(uint(n)) - 1)
		out = append(out, k)
		n -= k
	}
	return out
}

// insertTxLite is insertTx for SQLite: the table groups of one database
// in one transaction, each through its prepared statements.
func (s *Store) insertTxLite(ctx context.Context, gs []group, tasks []store.NewTask, out []store.Inserted) error {
	for _, g := range gs {
		if err := s.prepareLite(ctx, g.db, g.table, s.liteHold(g.idx, tasks)); err != nil {
			return err
		}
	}
	if len(gs) == 1 && len(liteChunks(len(gs[0].idx))) == 1 && !keyed(gs[0].idx, tasks) {
		// One statement of keyless rows: atomic by itself, and BEGIN and
		// COMMIT would be two more statements for a lone submit to run.
		return withRetry(ctx, func() error {
			_, err := s.insertRoundLite(ctx, &liteTx{s: s}, gs[0], gs[0].idx, tasks, out, time.Now())
			return err
		})
	}
	return s.retryTx(ctx, gs[0].db, nil, func(tx *sql.Tx) error {
		now := time.Now()
		lt := &liteTx{s: s, tx: tx, stmts: map[liteKey]*sql.Stmt{}}
		defer lt.close()
		for _, g := range gs {
			round := func(idx []int) ([]int, error) {
				return s.insertRoundLite(ctx, lt, g, idx, tasks, out, now)
			}
			var err error
			if s.liteHold(g.idx, tasks) {
				// The statements skip the held keys themselves.
				err = rounds(tasks, g.idx, round)
			} else {
				err = s.insertChunk(ctx, tx, s.names[g.table], g.idx, tasks, out, now, round)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// liteHold reports whether the tasks of idx go in through liteHoldQuery:
// some have a key, and final tasks hold keys.
func (s *Store) liteHold(idx []int, tasks []store.NewTask) bool {
	return s.ins.hold && s.cfg.KeyHold > 0 && keyed(idx, tasks)
}

// rounds runs round until every task of idx is placed, as insertChunk
// does without reading the keys first.
func rounds(tasks []store.NewTask, idx []int, round func(idx []int) ([]int, error)) error {
	for n := 0; len(idx) > 0; n++ {
		if n == 3 {
			return fmt.Errorf("task %s/%q: its key kept changing hands", tasks[idx[0]].Topic, tasks[idx[0]].Key)
		}
		var err error
		if idx, err = round(idx); err != nil {
			return err
		}
	}
	return nil
}

// liteTx is one insert transaction and the statements bound to it; with
// tx nil, one statement run on its own (keyless rows only: it reads
// nothing back).
type liteTx struct {
	s     *Store
	tx    *sql.Tx
	stmts map[liteKey]*sql.Stmt
}

func (lt *liteTx) stmt(ctx context.Context, k liteKey) *sql.Stmt {
	if st := lt.stmts[k]; st != nil {
		return st
	}
	st := lt.s.lite.get(k)
	if st == nil || lt.tx == nil {
		return st
	}
	st = lt.tx.StmtContext(ctx, st)
	lt.stmts[k] = st
	return st
}

func (lt *liteTx) close() {
	for _, st := range lt.stmts {
		st.Close()
	}
}

// insertRoundLite writes the tasks of idx (one table) and returns the
// keyed tasks it could not place, as insertRound does.
func (s *Store) insertRoundLite(ctx context.Context, lt *liteTx, g group, idx []int, tasks []store.NewTask, out []store.Inserted, now time.Time) ([]int, error) {
	nowUs := now.UnixMicro()
	nowArg := any(nowUs)
	hold := s.liteHold(g.idx, tasks)
	var cutoff, noHold any = nil, int64(math.MaxInt64)
	if hold {
		cutoff = now.Add(-s.cfg.KeyHold).UnixMicro()
	}
	var unsure []int // keyed tasks of statements that skipped a row
	args := make([]any, 0, min(len(idx), liteMaxRows)*20)
	off := 0
	for _, n := range liteChunks(len(idx)) {
		part := idx[off : off+n]
		off += n
		args = args[:0]
		for _, i := range part {
			nt := tasks[i]
			r := newInsertRow(nt)
			payload := nt.Payload
			if payload == nil {
				payload = []byte{} // a nil []byte binds NULL; the column is NOT NULL
			}
			due := any(r.dueUs)
			args = append(args, nt.ID, nt.Topic, r.key, int64(nt.ShardHash), int64(nt.Seg), due, payload, nt.Target,
				int64(nt.MaxAttempts), int64(r.attempts), int64(r.status), nowArg, nowArg, r.owner, r.lease, r.token, due, nt.Traceparent, nt.Retry, int64(nt.Priority))
			if hold {
				if nt.ReplaceFinal {
					args = append(args, noHold)
				} else {
					args = append(args, cutoff)
				}
			}
			out[i] = store.Inserted{Task: storedTask(nt, r, nowUs)}
		}
		st := lt.stmt(ctx, liteKey{g.db, g.table, n, hold})
		if st == nil {
			// insertTxLite prepared every statement of the table: only
			// Close removes them.
			return nil, errors.New("store closed")
		}
		res, err := st.ExecContext(ctx, args...)
		if err != nil {
			return nil, err
		}
		if got, err := res.RowsAffected(); err != nil || got != int64(n) {
			for _, i := range part {
				if tasks[i].Key != "" {
					unsure = append(unsure, i)
				}
			}
		}
	}
	return s.readBackKeys(ctx, lt.tx, s.names[g.table], unsure, tasks, out, now)
}

// liteWriterPragmas tune the writer connection for inserts:
//
//   - temp_store(MEMORY): a statement of a multi-statement transaction
//     keeps a statement journal (to undo itself alone); past 64 KiB SQLite
//     spills it to a temporary file, a write syscall per page, 13 % of a
//     batch insert's CPU;
//   - cache_size: at the default 2 MiB a batch's dirty pages overflowed the
//     page cache and were written to the WAL in the middle of the
//     transaction, then read back. The cache grows only as pages are used.
const liteWriterPragmas = "&_pragma=temp_store(MEMORY)&_pragma=cache_size(-32768)"
