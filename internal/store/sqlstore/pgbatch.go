package sqlstore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/ontimehq/ontime/internal/store"
)

// PostgreSQL runs the writes of a Start, a Finish or a keyed insert to one
// database, and GetMany's reads, as each table's own statement, sent
// together in one round trip (a pgx batch: every statement's Parse, Bind
// and Execute, then one Sync, so the server runs them in one implicit
// transaction and rolls all of them back if one fails). Rows are matched
// by arrays (unnest of IDs and tokens), so a table's statement has one
// text whatever the number of rows.
//
// They were one statement per database, the tables' writes as
// data-modifying CTEs: one round trip too, but the whole statement planned
// as one (a Start's CTE 0.7 ms, a Finish's 1.1–1.5 ms, a GetMany UNION 0.8
// ms to plan against 0.17 ms to run, in pg_stat_statements with
// track_planning under issue 28's latency benchmark).
//
// The statements are not prepared, on purpose. A prepared statement is
// planned for its values (a custom plan) five times, then PostgreSQL
// compares a generic plan's estimate with those and, for the one or two
// rows a table gets here, takes the generic one and keeps it for the
// connection's life: made while the table was small, that plan was a
// sequential scan of the table filtered by status (EXPLAIN EXECUTE after
// 20 one-row Starts on a new store), a scan of every row per Start once
// the table has grown — nothing re-plans it without ANALYZE. An unnamed
// statement is planned for its values on every call.

// pgStmt is one statement of a pgBatch.
type pgStmt struct {
	q    string // $n placeholders
	args []any
	// row reads each row the statement returns; nil: none read.
	row func(pgx.Rows) error
}

// pgBatch runs stmts on one connection of database db in one round trip,
// in one implicit transaction (see above), run again whole on transient
// conflicts. Each statement's row function may see its rows again on a
// retry: it must start over when it is called for a new attempt (begin,
// when set, is called before each attempt).
func (s *Store) pgBatch(ctx context.Context, db int, begin func(), stmts []pgStmt) error {
	return withRetry(ctx, func() error {
		if begin != nil {
			begin()
		}
		return pgBatchOnce(ctx, s.w[db], stmts)
	})
}

// withPgConn runs f on the pgx connection under one of pool's
// connections (what names the caller in an error).
func withPgConn(ctx context.Context, pool *sql.DB, what string, f func(*pgx.Conn) error) error {
	c, err := pool.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("%s: a PostgreSQL connection is a %T", what, dc)
		}
		return f(sc.Conn())
	})
}

// pgBatchOnce runs stmts on one connection of pool in one round trip.
func pgBatchOnce(ctx context.Context, pool *sql.DB, stmts []pgStmt) error {
	return withPgConn(ctx, pool, "batch", func(pc *pgx.Conn) error {
		var b pgx.Batch
		for _, st := range stmts {
			b.Queue(st.q, st.args...)
		}
		br := pc.SendBatch(ctx, &b)
		for _, st := range stmts {
			if err := readBatched(br, st); err != nil {
				_ = br.Close()
				return err
			}
		}
		return br.Close()
	})
}

func readBatched(br pgx.BatchResults, st pgStmt) error {
	if st.row == nil {
		_, err := br.Exec()
		return err
	}
	rows, err := br.Query()
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := st.row(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// refArrays are refs as the arrays a batched statement matches rows by:
// their IDs and, at the same index, their tokens.
func refArrays(refs []store.Ref) ([]string, []int64) {
	ids := make([]string, len(refs))
	toks := make([]int64, len(refs))
	for i, r := range refs {
		ids[i], toks[i] = r.ID, r.Token
	}
	return ids, toks
}

// refsIn is the condition of a batched statement that its row is one of
// refs' (refArrays), with ? placeholders for the two arrays.
const refsIn = `(id, token) IN (SELECT * FROM unnest(?::text[], ?::bigint[]))`
