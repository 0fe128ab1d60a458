package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"strings"
	"time"

	"github.com/ontimehq/ontime/internal/store"
)

// MariaDB's batch insert of tasks without keys: the transaction and every
// table's INSERT in one multi-statement query, "START TRANSACTION; INSERT
// …; INSERT …; COMMIT", instead of one round trip per statement (with
// READ COMMITTED set first, a 16-table batch took 20). The server runs the
// statements in order and stops at the first that fails; the driver reads
// every statement's answer, so success means the COMMIT ran. After a
// failure the transaction is still open on the connection with what ran
// before: it is rolled back there, or the connection is dropped (the
// server rolls back a closed session's transaction).
//
// Without keys no row is read back, so the isolation level does not matter
// (insertTx sets READ COMMITTED for its read-backs of keys); ON DUPLICATE
// KEY UPDATE still skips an ID inserted before. A query carries at most
// the plan's rows and bytes of variable data, like one statement, so that
// it stays within max_allowed_packet: a batch beyond goes in several
// queries on the one connection, the first opening the transaction and
// the last committing it.

// multiable reports whether the table groups of one database go in one
// multi-statement query: MariaDB, and no task has a key.
func (s *Store) multiable(gs []group, tasks []store.NewTask) bool {
	return s.ins.multi && !anyKeyed(gs, tasks)
}

// multiQuery is one query of multiInsert: statements separated by ";".
type multiQuery struct {
	q    strings.Builder
	args []any
	size int // variable bytes, as insertPlan.bytes counts them
	rows int
}

func (s *Store) multiInsert(ctx context.Context, gs []group, tasks []store.NewTask, out []store.Inserted, now time.Time) error {
	cur := &multiQuery{}
	cur.q.WriteString("START TRANSACTION")
	queries := []*multiQuery{cur}
	for _, g := range gs {
		for _, idx := range s.ins.chunks(g.idx, tasks) {
			size := 0
			for _, i := range idx {
				size += len(tasks[i].Payload) + len(tasks[i].Target) + len(tasks[i].Key)
			}
			if cur.rows > 0 && (cur.size+size > s.ins.bytes || cur.rows+len(idx) > s.ins.rows) {
				cur = &multiQuery{}
				queries = append(queries, cur)
			}
			q, args := s.insertStatement(s.names[g.table], idx, tasks, out, now)
			if cur.q.Len() > 0 {
				cur.q.WriteString(";")
			}
			cur.q.WriteString(q)
			cur.args = append(cur.args, args...)
			cur.size += size
			cur.rows += len(idx)
		}
	}
	cur.q.WriteString(";COMMIT")
	return s.runMulti(ctx, gs[0].db, queries)
}

// runMulti sends queries (a transaction opened by the first and committed
// by the last) one after another on one connection of database db. On a
// failure the transaction is rolled back there, or the connection is
// dropped; errRetryConn when nothing ran (a dead pooled connection).
func (s *Store) runMulti(ctx context.Context, db int, queries []*multiQuery) error {
	c, err := s.w[db].Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	for n, q := range queries {
		_, err := c.ExecContext(ctx, q.q.String(), q.args...)
		if err == nil {
			continue
		}
		if n == 0 && errors.Is(err, driver.ErrBadConn) {
			// Nothing ran: a pooled connection found dead. withRetry
			// does not retry that; the pool would have, for a statement.
			return errRetryConn{err}
		}
		abandonTx(ctx, c)
		return err
	}
	return nil
}

// abandonTx ends a multi-statement query's transaction that a failed
// statement may have left open on c: rolled back there, or the connection
// dropped (the server rolls back a closed session's transaction).
func abandonTx(ctx context.Context, c *sql.Conn) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := c.ExecContext(rctx, "ROLLBACK"); err != nil {
		_ = c.Raw(func(any) error { return driver.ErrBadConn })
	}
}

// runMultiRetried is runMulti run again as withConnRetry runs it.
func (s *Store) runMultiRetried(ctx context.Context, db int, queries func() []*multiQuery) error {
	return withConnRetry(ctx, func() error { return s.runMulti(ctx, db, queries()) })
}

// withConnRetry runs f again on transient conflicts (withRetry) and, up
// to three times, when it did not reach the server on a dead pooled
// connection (errRetryConn).
func withConnRetry(ctx context.Context, f func() error) error {
	return withRetry(ctx, func() error {
		var err error
		for range 3 {
			if err = f(); !errors.As(err, new(errRetryConn)) {
				return err
			}
		}
		return err
	})
}

// errRetryConn is a query that did not reach the server on a dead pooled
// connection: insertTx runs it again on another.
type errRetryConn struct{ err error }

func (e errRetryConn) Error() string { return e.err.Error() }
func (e errRetryConn) Unwrap() error { return e.err }

// MariaDB's insert of keyed tasks of one table (a keyed submit, a group
// commit of them, a batch): one INSERT … SELECT that skips the rows whose
// key is held — a live row of the key, or a final one that ended within
// the key hold, unless the task replaces final tasks — and, through ON
// DUPLICATE KEY UPDATE, those that meet a live row committed meanwhile or
// an ID that exists. It commits by itself, sent in one query after a SET
// TRANSACTION that makes its transaction READ COMMITTED, where the SELECT
// of the key's rows is a consistent read: under REPEATABLE READ it would
// lock the key's gap in the key index against every other insert there.
// The statements of insertTx took five round trips (the isolation level,
// START TRANSACTION, the key hold's SELECT, the INSERT, COMMIT): a keyed
// submit from one client went in at a quarter of the rate MariaDB commits
// single rows (971 against 3,720/s). As on PostgreSQL (insert_keyed.go),
// the keys of the rows it skipped are read back afterwards, and a key
// whose holder ended in between goes in with insertTx's statements.

// keyedMySQL reports whether the groups of one database go in
// keyedInsertMySQL's statement: MariaDB, one table, a key among the tasks,
// at most one statement's rows and bytes.
func (s *Store) keyedMySQL(gs []group, tasks []store.NewTask) bool {
	if s.d.name != "mysql" || len(gs) != 1 || len(gs[0].idx) > s.ins.rows || !keyed(gs[0].idx, tasks) {
		return false
	}
	size := 0
	for _, i := range gs[0].idx {
		size += len(tasks[i].Payload) + len(tasks[i].Target) + len(tasks[i].Key)
	}
	return size <= s.ins.bytes
}

// keyedInsertMySQL writes the tasks of g by keyedMySQL's statement, sets
// out and returns the tasks still to insert: those whose key was freed
// between the statement and the read-back of the keys it skipped.
func (s *Store) keyedInsertMySQL(ctx context.Context, g group, tasks []store.NewTask, out []store.Inserted, now time.Time) ([]int, error) {
	t := s.names[g.table]
	idx := byKey(g.idx, tasks)
	nowUs := now.UnixMicro()
	cutoff := s.holdCutoff(now)
	var b strings.Builder
	// The rows as a table value constructor named with its columns.
	row := "(" + placeholders(19) + ")"
	b.WriteString("SET TRANSACTION ISOLATION LEVEL READ COMMITTED;INSERT INTO " + t + " (" + insertCols + `)
		WITH r (id, topic, task_key, shard_hash, seg, due_at, payload, target, max_attempts, attempts, status, created_at, owner, lease_until, token,
			traceparent, retry, priority, replace_final) AS (VALUES `)
	args := make([]any, 0, len(idx)*19+1)
	for n, i := range idx {
		nt := tasks[i]
		r := newInsertRow(nt)
		if n > 0 {
			b.WriteString(", ")
		}
		b.WriteString(row)
		payload := nt.Payload
		if payload == nil {
			payload = []byte{} // NOT NULL
		}
		args = append(args, nt.ID, nt.Topic, r.key, int64(nt.ShardHash), nt.Seg, r.dueUs, payload, nt.Target, nt.MaxAttempts,
			r.attempts, int(r.status), nowUs, r.owner, r.lease, r.token, nt.Traceparent, nt.Retry, nt.Priority, nt.ReplaceFinal)
		out[i] = store.Inserted{Task: storedTask(nt, r, nowUs)}
	}
	b.WriteString(`) SELECT r.id, r.topic, r.task_key, r.shard_hash, r.seg, r.due_at, r.payload, r.target, r.max_attempts, r.attempts, r.status, '', r.created_at,
			r.created_at, r.owner, r.lease_until, r.token, r.due_at, r.traceparent, r.retry, r.priority
		FROM r WHERE r.task_key IS NULL OR NOT EXISTS (SELECT 1 FROM ` + t + ` x` + s.keyIndexHint() + ` WHERE x.topic = r.topic AND x.task_key = r.task_key
		AND (x.status < 3 OR (NOT r.replace_final AND x.updated_at > ?))) ON DUPLICATE KEY UPDATE id = ` + t + `.id`)
	args = append(args, cutoff)
	res, err := s.w[g.db].ExecContext(ctx, b.String(), args...)
	if err != nil {
		return nil, err
	}
	// MariaDB counts an untouched duplicate as 0 rows: all in, or read
	// back every key (insertRound's way).
	if n, err := res.RowsAffected(); err == nil && n == int64(len(idx)) {
		return nil, nil
	}
	var unsure []int
	for _, i := range idx {
		if tasks[i].Key != "" {
			unsure = append(unsure, i)
		}
	}
	return s.readBackKeys(ctx, s.w[g.db], t, unsure, tasks, out, now)
}
