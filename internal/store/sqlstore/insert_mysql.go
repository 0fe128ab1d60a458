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
