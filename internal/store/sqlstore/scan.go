package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// The queries that must run on the scan index; sqlstore's EXPLAIN tests
// check each of them on every engine.
const (
	dueWhere     = `seg = ? AND status = ? AND due_at <= ?`
	dueOrder     = `due_at, id`
	expiredWhere = `seg = ? AND status IN (?, ?) AND lease_until < ?`
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
func nextDueOwnedQuery(t, owned, paused string) string {
	return `SELECT
		(SELECT MIN(due_at) FROM ` + t + ` WHERE seg = ? AND status = ?` + owned + paused + `),
		(SELECT MIN(lease_until) FROM ` + t + ` WHERE seg = ? AND status IN (?, ?)` + owned + `)`
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
	var due, lease sql.NullInt64
	paused, pargs := s.pausedClause()
	args := append(append([]any{it.Segment, int(task.StatusPending)}, pargs...), it.Segment, int(task.StatusClaimed), int(task.StatusRunning))
	err = s.r[it.DB].QueryRowContext(ctx, s.d.rebind(nextDueOwnedQuery(t, s.owned(it.DB), paused)), args...).Scan(&due, &lease)
	if err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("next due %v: %w", it, err)
	}
	return fromMicros(due.Int64), fromMicros(lease.Int64), nil
}
