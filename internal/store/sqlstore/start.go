package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
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
		var err error
		switch {
		case !s.writeAsOne(gs):
			got, err = s.startTx(ctx, gs, refs, leaseUntil)
		case s.d.name == "postgres":
			got, err = s.startOne(ctx, gs, refs, leaseUntil)
		default:
			got, err = s.startMulti(ctx, gs, refs, leaseUntil)
		}
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

// startTx starts the refs of one database's groups gs in a transaction, a
// statement (MariaDB: a read and a statement) per table and batchLimit
// rows.
func (s *Store) startTx(ctx context.Context, gs []group, refs []store.Ref, leaseUntil time.Time) ([]*task.Task, error) {
	var got []*task.Task
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
	return got, err
}

// startOne starts them in one statement (PostgreSQL, onestatement.go).
func (s *Store) startOne(ctx context.Context, gs []group, refs []store.Ref, leaseUntil time.Time) ([]*task.Task, error) {
	parts := make([]stmtPart, len(gs))
	for i, g := range gs {
		set, setArgs, _ := startSet(leaseUntil)
		where, wargs := startWhere(pick(refs, g.idx))
		parts[i] = stmtPart{q: `UPDATE ` + s.names[g.table] + ` SET ` + set + ` WHERE ` + where + ` RETURNING ` + cols, args: append(setArgs, wargs...)}
	}
	q, args := joinParts(parts, true)
	var got []*task.Task
	err := withRetry(ctx, func() error {
		var err error
		got, err = s.queryTasks(ctx, s.w[gs[0].db], q, args...)
		return err
	})
	return got, err
}

// startMulti starts them in one multi-statement query (MariaDB):
// "START TRANSACTION; SELECT … FOR UPDATE; UPDATE …; …; COMMIT", each
// table's rows read (locked) before its UPDATE, as startChunk does in
// a transaction of a round trip per statement.
func (s *Store) startMulti(ctx context.Context, gs []group, refs []store.Ref, leaseUntil time.Time) ([]*task.Task, error) {
	var got []*task.Task
	err := withConnRetry(ctx, func() error {
		var err error
		got, err = s.startMultiOnce(ctx, gs, refs, leaseUntil)
		return err
	})
	return got, err
}

func (s *Store) startMultiOnce(ctx context.Context, gs []group, refs []store.Ref, leaseUntil time.Time) ([]*task.Task, error) {
	var q strings.Builder
	var args []any
	set, setArgs, now := startSet(leaseUntil)
	q.WriteString("START TRANSACTION")
	for _, g := range gs {
		t := s.names[g.table]
		where, wargs := startWhere(pick(refs, g.idx))
		q.WriteString(`;` + s.startLock(t, where) + `;UPDATE ` + s.byID(t) + ` SET ` + set + ` WHERE ` + where)
		args = append(append(append(args, wargs...), setArgs...), wargs...)
	}
	q.WriteString(";COMMIT")
	c, err := s.w[gs[0].db].Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var got []*task.Task
	rows, err := c.QueryContext(ctx, q.String(), args...)
	if err == nil {
		for {
			for rows.Next() {
				tk, serr := scanTask(rows)
				if serr != nil {
					err = serr
					break
				}
				got = append(got, tk)
			}
			if err != nil || !rows.NextResultSet() {
				break
			}
		}
		if cerr := rows.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = rows.Err()
		}
	} else if errors.Is(err, driver.ErrBadConn) {
		// Nothing ran: a pooled connection found dead.
		return nil, errRetryConn{err}
	}
	if err != nil {
		abandonTx(ctx, c)
		return nil, err
	}
	for _, tk := range got {
		tk.Status, tk.Attempts, tk.LeaseUntil, tk.UpdatedAt = task.StatusRunning, tk.Attempts+1, fromMicros(micros(leaseUntil)), fromMicros(now)
	}
	return got, nil
}

// started gathers the tasks a Start moved to running, from the
// transactions of its databases, which run at once. A task added again
// replaces the first: SQLite's transaction (liteTxRuns) adds as it reads,
// and a transaction retried whole after SQLITE_BUSY reads its tasks anew.
type started struct {
	mu    sync.Mutex
	tasks map[string]*task.Task
}

func (c *started) add(ts []*task.Task) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tasks == nil {
		c.tasks = make(map[string]*task.Task, len(ts))
	}
	for _, t := range ts {
		c.tasks[t.ID] = t
	}
}

// byDue is the tasks in due order, the order Start answers in.
func (c *started) byDue() []*task.Task { return byDue(slices.Collect(maps.Values(c.tasks))) }

// startSet is the SET of a Start's UPDATE, its values, and its now.
func startSet(leaseUntil time.Time) (string, []any, int64) {
	now := time.Now().UnixMicro()
	return `status = ?, attempts = attempts + 1, lease_until = ?, updated_at = ?`, []any{int(task.StatusRunning), micros(leaseUntil), now}, now
}

// startLock reads and locks the rows of table t that where matches, before
// a Start's UPDATE of them (engines without RETURNING on UPDATE).
func (s *Store) startLock(t, where string) string {
	return `SELECT ` + cols + ` FROM ` + s.byID(t) + ` WHERE ` + where + ` FOR UPDATE`
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
	out, err := s.queryTasks(ctx, tx, s.startLock(t, where), wargs...)
	if err != nil || len(out) == 0 {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE `+s.byID(t)+` SET `+set+` WHERE `+where, append(setArgs, wargs...)...); err != nil {
		return nil, err
	}
	for _, tk := range out {
		tk.Status, tk.Attempts, tk.LeaseUntil, tk.UpdatedAt = task.StatusRunning, tk.Attempts+1, fromMicros(micros(leaseUntil)), fromMicros(now)
	}
	return out, nil
}
