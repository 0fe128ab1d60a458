package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// deleteExpiredQuery deletes up to a limit of one item's final rows of one
// status that ended before a time, through the retention index (keys.go).
// SQLite uses a partial index only when the query repeats its predicate
// word for word, hence "status >= 3" beside "status = ?". MariaDB has
// DELETE … LIMIT but no LIMIT in an IN subquery; the others the reverse.
func (s *Store) deleteExpiredQuery(t, keep string) string {
	if s.d.name == "mysql" {
		return `DELETE FROM ` + t + ` WHERE seg = ? AND status = ? AND ended_at < ?` + keep + ` LIMIT ?`
	}
	return `DELETE FROM ` + t + ` WHERE id IN (SELECT id FROM ` + t +
		` WHERE seg = ? AND status = ? AND status >= 3 AND updated_at < ?` + keep + ` LIMIT ?)`
}

// DeleteExpired deletes up to limit final rows of item that ended before
// before. One short statement: final rows are never locked by claims, so
// it waits on nothing and holds little. On MariaDB it runs at READ
// COMMITTED, which takes no gap locks, so rows that end meanwhile (their
// index entries land past the range) are never held up by it.
func (s *Store) DeleteExpired(ctx context.Context, it store.Item, st task.Status, before time.Time, limit int) (_ int64, err error) {
	defer classify(&err)
	if err := s.checkItem(it); err != nil {
		return 0, err
	}
	if store.Live(st) {
		return 0, fmt.Errorf("delete expired: %s is not a final status", st)
	}
	limit = clampLimit(limit)
	if err := s.refreshCopy(ctx); err != nil {
		return 0, err
	}
	keep, ok := s.retentionFilter()
	if !ok {
		return 0, nil // the next pass, once the expansion's state is known
	}
	q := s.d.rebind(s.deleteExpiredQuery(s.names[it.Table], keep))
	args := []any{it.Segment, int(st), micros(before), limit}
	var n int64
	err = withRetry(ctx, func() error {
		var res sql.Result
		var err error
		if s.d.name == "mysql" {
			err = s.writeTx(ctx, it.DB, &sql.TxOptions{Isolation: sql.LevelReadCommitted}, func(tx *sql.Tx) error {
				res, err = tx.ExecContext(ctx, q, args...)
				return err
			})
		} else {
			res, err = s.w[it.DB].ExecContext(ctx, q, args...)
		}
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("delete expired %v: %w", it, err)
	}
	return n, nil
}
