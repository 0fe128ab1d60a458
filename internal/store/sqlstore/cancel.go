package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// Cancel cancels a pending or claimed task.
func (s *Store) Cancel(ctx context.Context, id string) (_ *task.Task, err error) {
	defer classify(&err)
	if err := s.fenced(); err != nil {
		return nil, err
	}
	db, t, err := s.locate(id)
	if err != nil {
		return nil, err
	}
	res, err := s.w[db].ExecContext(ctx, s.d.rebind(`UPDATE `+s.names[t]+` SET status = ?, owner = NULL, lease_until = 0, token = 0, updated_at = ?
		WHERE id = ? AND status IN (?, ?)`), int(task.StatusCancelled), time.Now().UnixMicro(), id, int(task.StatusPending), int(task.StatusClaimed))
	if err != nil {
		return nil, fmt.Errorf("cancel %s: %w", id, err)
	}
	n, _ := res.RowsAffected()
	cur, err := s.getW(ctx, id)
	if err != nil {
		return nil, err
	}
	if n == 1 || cur.Status == task.StatusCancelled {
		return cur, nil
	}
	return nil, &store.ConflictError{ID: id, Status: cur.Status, Op: "cancel"}
}

// Purge deletes a final task's row. Final rows are never written again
// except by a requeue, which the status condition excludes: the task
// read before the DELETE is the one deleted.
func (s *Store) Purge(ctx context.Context, id string) (_ *task.Task, err error) {
	defer classify(&err)
	if err := s.fenced(); err != nil {
		return nil, err
	}
	db, t, err := s.locate(id)
	if err != nil {
		return nil, err
	}
	cur, err := s.getW(ctx, id)
	if err != nil {
		return nil, err
	}
	if store.Live(cur.Status) {
		return nil, &store.ConflictError{ID: id, Status: cur.Status, Op: "purge"}
	}
	gone, err := s.goneFilter(ctx)
	if err != nil {
		return nil, err
	}
	var res sql.Result
	err = s.writeTx(ctx, db, nil, func(tx *sql.Tx) error {
		args := []any{id, int(task.StatusDone), int(task.StatusDead), int(task.StatusCancelled)}
		if gone != "" {
			// An expansion copies: the copy deletes it from the twin.
			if _, err := tx.ExecContext(ctx, s.d.rebind(`INSERT INTO ontime_expand_gone (id) SELECT id FROM `+s.names[t]+` WHERE id = ? AND status IN (?, ?, ?) AND `+gone), args...); err != nil {
				return err
			}
		}
		var err error
		res, err = tx.ExecContext(ctx, s.d.rebind(`DELETE FROM `+s.names[t]+` WHERE id = ? AND status IN (?, ?, ?)`), args...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("purge %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return cur, nil
	}
	// Requeued (live again) or purged by another caller meanwhile.
	now, err := s.getW(ctx, id)
	if err != nil {
		return nil, err
	}
	return nil, &store.ConflictError{ID: id, Status: now.Status, Op: "purge"}
}

// Requeue moves a dead task back to pending.
func (s *Store) Requeue(ctx context.Context, id string, dueAt time.Time) (_ *task.Task, err error) {
	defer classify(&err)
	db, t, err := s.locate(id)
	if err != nil {
		return nil, err
	}
	res, err := s.w[db].ExecContext(ctx, s.d.rebind(`UPDATE `+s.names[t]+` SET status = ?, attempts = 0, due_at = ?, `+setMovedRequeue+`, owner = NULL, lease_until = 0, token = 0, updated_at = ?
		WHERE id = ? AND status = ?`), int(task.StatusPending), micros(dueAt), time.Now().UnixMicro(), id, int(task.StatusDead))
	if err != nil && uniqueViolation(err) {
		if cur, gerr := s.getW(ctx, id); gerr == nil {
			return nil, &store.KeyConflictError{ID: id, Topic: cur.Topic, Key: cur.Key, Op: "requeue"}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("requeue %s: %w", id, err)
	}
	n, _ := res.RowsAffected()
	cur, err := s.getW(ctx, id)
	if err != nil {
		return nil, err
	}
	if n != 1 {
		return nil, &store.ConflictError{ID: id, Status: cur.Status, Op: "requeue"}
	}
	return cur, nil
}
