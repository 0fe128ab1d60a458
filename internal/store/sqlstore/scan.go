package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// The queries that must run on the scan index (the expired leases: on the
// leases index, schema21.go, which reads the leases that ended, not every
// lease held); sqlstore's EXPLAIN tests check each of them on every engine.
const (
	dueWhere     = `seg = ? AND status = ? AND due_at <= ?`
	dueOrder     = `due_at, id`
	expiredWhere = `seg = ? AND ` + leaseHeld + ` AND lease_until < ?`
	expiredOrder = `lease_until`
)

func scanQuery(t string, cursor bool, paused string) string {
	q := `SELECT ` + cols + ` FROM ` + t + ` WHERE ` + dueWhere + paused
	if cursor {
		// Not (due_at, id) > (?, ?): MariaDB uses no index for row values;
		// and not "due_at > ? OR (due_at = ? AND id > ?)": SQLite and
		// PostgreSQL turn that OR into two index lookups and a sort. A range
		// on due_at plus a residual filter reads the index in order.
		q += ` AND due_at >= ? AND (due_at > ? OR id > ?)`
	}
	return q + ` ORDER BY ` + dueOrder + ` LIMIT ?`
}

func nextDueQuery(t, paused string) string { return nextDueOwnedQuery(t, "", paused) }

// nextDueOwnedQuery is nextDueQuery over the rows owned passes (ownedClause).
// The earliest lease end is read per status, each the first entry of its
// range of the leases index (schema21.go): MIN over status IN (1, 2) would
// read every lease held on MariaDB.
//
// With a residual filter (the rows a cleanup keeps, paused topics) the
// earliest due time is the first row of the scan index's range in order,
// not a MIN: MariaDB answers a MIN with a filter on a column outside the
// index by reading the whole range (every pending row of the segment:
// 2,500,000 rows a query in the cleanup of a 10,000,000-row store, whose
// queries then piled up by the hundred), where ORDER BY … LIMIT 1 stops
// at the first row that passes. The leases' ranges hold the tasks in
// flight only: a MIN over them stays cheap, and keeps SQLite from sorting
// (its index walks status IN (1, 2) as two ranges).
//
// PostgreSQL takes every earliest value in order (nextDueText): NextDue is a
// prepared statement there, and after five plans for their values
// PostgreSQL keeps one generic plan for the connection's life. For a MIN
// that plan, made while the table was small, aggregated every pending
// entry of the segment's range in the scan index (EXPLAIN EXECUTE after 30
// NextDue calls on a new store: 5 custom, then generic) — every pending
// row of a burst per call, once the table had grown. ORDER BY … LIMIT 1
// reads the range's first entry in any plan; so for the lease ends.
func nextDueOwnedQuery(t, owned, paused string) string {
	return nextDueText(t, owned, paused, false)
}

// nextDueText is NextDue's query, in PostgreSQL's form when pg: every
// earliest value read in order (see above; the held leases of a burst,
// claimed ahead by the hundred thousand, are a range a generic plan's MIN
// would read whole).
func nextDueText(t, owned, paused string, pg bool) string {
	due := `(SELECT MIN(due_at) FROM ` + t + ` WHERE seg = ? AND status = ?` + owned + paused + `)`
	if pg || owned != "" || paused != "" {
		due = `(SELECT due_at FROM ` + t + ` WHERE seg = ? AND status = ?` + owned + paused + ` ORDER BY due_at LIMIT 1)`
	}
	lease := `(SELECT MIN(lease_until) FROM ` + t + ` WHERE seg = ? AND ` + leaseHeld + ` AND status = ?` + owned + `)`
	if pg {
		lease = `(SELECT lease_until FROM ` + t + ` WHERE seg = ? AND ` + leaseHeld + ` AND status = ?` + owned + ` ORDER BY lease_until LIMIT 1)`
	}
	return `SELECT
		` + due + `,
		` + lease + `,
		` + lease
}

// Scan reads pending tasks of an item after a keyset cursor. The cursor
// predicate is spelled out because MariaDB does not use an index for a
// row-value comparison such as (due_at, id) > (?, ?).
func (s *Store) Scan(ctx context.Context, it store.Item, horizon time.Time, after store.Cursor, limit int) (_ []*task.Task, err error) {
	defer classify(&err)
	if err := s.checkItem(it); err != nil {
		return nil, err
	}
	limit = clampLimit(limit)
	cursor := !after.DueAt.IsZero() || after.ID != ""
	paused, pargs := s.pausedClause()
	q := scanQuery(s.names[it.Table], cursor, s.owned(it.DB)+paused)
	args := append([]any{it.Segment, int(task.StatusPending), micros(horizon)}, pargs...)
	if cursor {
		c := micros(after.DueAt)
		args = append(args, c, c, after.ID)
	}
	args = append(args, limit)
	out, err := s.queryTasks(ctx, s.r[it.DB], q, args...)
	if err != nil {
		return nil, fmt.Errorf("scan %v: %w", it, err)
	}
	return out, nil
}

func clampLimit(n int) int {
	if n < 1 {
		return 1
	}
	return min(n, 10000)
}

func (s *Store) checkItem(it store.Item) error {
	if it.DB < 0 || it.DB >= len(s.w) || it.Table < 0 || it.Table >= len(s.names) || it.Segment < 0 || it.Segment >= s.cfg.Segments {
		return fmt.Errorf("store: item %+v outside the topology", it)
	}
	return nil
}

// NextDue returns the earliest pending due time and lease end of an item.
func (s *Store) NextDue(ctx context.Context, it store.Item) (_ time.Time, _ time.Time, err error) {
	defer classify(&err)
	if err := s.checkItem(it); err != nil {
		return time.Time{}, time.Time{}, err
	}
	t := s.names[it.Table]
	var due, claimed, running sql.NullInt64
	paused, pargs := s.pausedClause()
	args := append(append([]any{it.Segment, int(task.StatusPending)}, pargs...), it.Segment, int(task.StatusClaimed), it.Segment, int(task.StatusRunning))
	pg := s.d.name == "postgres"
	if pg {
		// Prepared once per connection: its three subqueries over a table
		// of nine indexes took 0.3–2 ms to plan and 0.2 ms to run, and
		// every idle scanner asks it, and the cluster view once per item
		// (64 items: 42 ms a view at 10 M rows).
		args = append([]any{pgx.QueryExecModeCacheStatement}, args...)
	}
	err = s.r[it.DB].QueryRowContext(ctx, s.d.rebind(nextDueText(t, s.owned(it.DB), paused, pg)), args...).Scan(&due, &claimed, &running)
	if err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("next due %v: %w", it, err)
	}
	lease := claimed
	if running.Valid && (!lease.Valid || running.Int64 < lease.Int64) {
		lease = running
	}
	return fromMicros(due.Int64), fromMicros(lease.Int64), nil
}
