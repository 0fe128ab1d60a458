package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// Start moves claimed tasks to running under their tokens: one
// transaction per database, one statement per table (PostgreSQL: one
// statement per database, onestatement.go).
func (s *Store) Start(ctx context.Context, refs []store.Ref, leaseUntil time.Time) (_ []*task.Task, err error) {
	defer classify(&err)
	if err := s.fenced(); err != nil {
		return nil, err
	}
	if s.liteOps != nil {
		return s.startLite(ctx, refs, leaseUntil)
	}
	var out started
	err = forEachDB(s.refGroups(refs), func(gs []group) error {
		var got []*task.Task
		if s.d.name == "postgres" && s.writeAsOne(gs) {
			parts := make([]stmtPart, len(gs))
			for i, g := range gs {
				set, setArgs, _ := startSet(leaseUntil)
				where, wargs := startWhere(pick(refs, g.idx))
				parts[i] = stmtPart{q: `UPDATE ` + s.names[g.table] + ` SET ` + set + ` WHERE ` + where + ` RETURNING ` + cols, args: append(setArgs, wargs...)}
			}
			q, args := joinParts(parts, true)
			err := withRetry(ctx, func() error {
				var err error
				got, err = s.queryTasks(ctx, s.w[gs[0].db], q, args...)
				return err
			})
			if err != nil {
				return err
			}
			out.add(got)
			return nil
		}
		err := s.retryTx(ctx, gs[0].db, nil, func(tx *sql.Tx) error {
			got = got[:0]
			for _, g := range gs {
				for start := 0; start < len(g.idx); start += batchLimit {
					part := pick(refs, g.idx[start:min(start+batchLimit, len(g.idx))])
					ts, err := s.startChunk(ctx, tx, s.names[g.table], part, leaseUntil)
					if err != nil {
						return err
					}
					got = append(got, ts...)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		// Added once committed: a transaction retried whole would
		// otherwise add its tasks twice.
		out.add(got)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	return out.byDue(), nil
}

// started gathers the tasks a Start moved to running, from the
// transactions of its databases, which run at once.
type started struct {
	mu    sync.Mutex
	tasks []*task.Task
}

func (c *started) add(ts []*task.Task) {
	c.mu.Lock()
	c.tasks = append(c.tasks, ts...)
	c.mu.Unlock()
}

// byDue is the tasks in due order, the order Start answers in.
func (c *started) byDue() []*task.Task {
	slices.SortFunc(c.tasks, func(a, b *task.Task) int { return a.DueAt.Compare(b.DueAt) })
	return c.tasks
}

// startSet is the SET of a Start's UPDATE, its values, and its now.
func startSet(leaseUntil time.Time) (string, []any, int64) {
	now := time.Now().UnixMicro()
	return `status = ?, attempts = attempts + 1, lease_until = ?, updated_at = ?`, []any{int(task.StatusRunning), micros(leaseUntil), now}, now
}

// startWhere matches the claimed rows of refs.
func startWhere(refs []store.Ref) (string, []any) {
	match, margs := refMatch(refs)
	return `status = ? AND ` + match, append([]any{int(task.StatusClaimed)}, margs...)
}

func (s *Store) startChunk(ctx context.Context, tx *sql.Tx, t string, refs []store.Ref, leaseUntil time.Time) ([]*task.Task, error) {
	set, setArgs, now := startSet(leaseUntil)
	where, wargs := startWhere(refs)
	if s.d.returning {
		return s.queryTasks(ctx, tx, `UPDATE `+t+` SET `+set+` WHERE `+where+` RETURNING `+cols, append(setArgs, wargs...)...)
	}
	out, err := s.queryTasks(ctx, tx, `SELECT `+cols+` FROM `+t+` WHERE `+where+` FOR UPDATE`, wargs...)
	if err != nil || len(out) == 0 {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE `+t+` SET `+set+` WHERE `+where, append(setArgs, wargs...)...); err != nil {
		return nil, err
	}
	for _, tk := range out {
		tk.Status, tk.Attempts, tk.LeaseUntil, tk.UpdatedAt = task.StatusRunning, tk.Attempts+1, fromMicros(micros(leaseUntil)), fromMicros(now)
	}
	return out, nil
}
