package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// claimSelect selects the IDs of up to LIMIT rows matching where, in
// order: the rows a claim takes.
func claimSelect(t, where, order string) string {
	return `SELECT id FROM ` + t + ` WHERE ` + where + ` ORDER BY ` + order + ` LIMIT ?`
}

// Claim leases due pending tasks and tasks whose lease ended.
func (s *Store) Claim(ctx context.Context, it store.Item, horizon, now time.Time, lease store.Lease, limit int) (_ []store.Ref, err error) {
	defer classify(&err)
	return s.claim(ctx, it, horizon, now, lease, limit, false)
}

// ClaimAhead is Claim of the pending tasks not due yet at now (and of
// every task whose lease ended): the pending ones due already go to
// ClaimRunning, straight to delivery, rather than through the hot tier.
func (s *Store) ClaimAhead(ctx context.Context, it store.Item, horizon, now time.Time, lease store.Lease, limit int) (_ []store.Ref, err error) {
	defer classify(&err)
	return s.claim(ctx, it, horizon, now, lease, limit, true)
}

// claimable checks a claim of item it may run and returns its table.
func (s *Store) claimable(it store.Item) (string, error) {
	if err := s.fenced(); err != nil {
		return "", err
	}
	if err := s.checkItem(it); err != nil {
		return "", err
	}
	return s.names[it.Table], nil
}

func (s *Store) claim(ctx context.Context, it store.Item, horizon, now time.Time, lease store.Lease, limit int, ahead bool) ([]store.Ref, error) {
	t, err := s.claimable(it)
	if err != nil {
		return nil, err
	}
	limit = clampLimit(limit)
	var notDue string
	var nargs []any
	if ahead {
		notDue, nargs = ` AND due_at > ?`, []any{micros(now)}
	}
	// Expired leases first: those tasks are overdue. Also with ahead:
	// ClaimRunning leaves those of paused topics, and those it had no
	// room for, which the hot tier takes (the fire stage hands a paused
	// topic's back, pending).
	expired, err := s.claimWhere(ctx, it.DB, t, expiredWhere+s.owned(it.DB),
		[]any{it.Segment, micros(now)}, expiredOrder, lease, limit)
	if err != nil {
		return nil, fmt.Errorf("claim expired %v: %w", it, err)
	}
	if len(expired) >= limit {
		return expired, nil
	}
	paused, pargs := s.pausedClause()
	due, err := s.claimWhere(ctx, it.DB, t, dueWhere+notDue+s.owned(it.DB)+paused,
		append(append([]any{it.Segment, int(task.StatusPending), micros(horizon)}, nargs...), pargs...), dueOrder, lease, limit-len(expired))
	if err != nil {
		return expired, fmt.Errorf("claim %v: %w", it, err)
	}
	return append(expired, due...), nil
}

// ClaimRunning claims up to limit tasks of it that are due by now (those
// whose lease ended, then pending ones; of topics not paused) straight to
// running under lease, their attempt counted, and returns them: overdue
// tasks that a node with room delivers at once, without the hot tier and
// a Start, one write of their rows fewer (a burst's drain is the store's
// writes).
func (s *Store) ClaimRunning(ctx context.Context, it store.Item, now time.Time, lease store.Lease, limit int) (_ []*task.Task, err error) {
	defer classify(&err)
	t, err := s.claimable(it)
	if err != nil {
		return nil, err
	}
	limit = clampLimit(limit)
	paused, pargs := s.pausedClause()
	expired, err := s.claimRunningWhere(ctx, it.DB, t, s.leaseIndexHint(t), expiredWhere+` AND due_at <= ?`+s.owned(it.DB)+paused,
		append([]any{it.Segment, micros(now), micros(now)}, pargs...), expiredOrder, lease, limit)
	if err != nil {
		return nil, fmt.Errorf("claim running, expired %v: %w", it, err)
	}
	if len(expired) >= limit {
		return byDue(expired), nil
	}
	due, err := s.claimRunningWhere(ctx, it.DB, t, "", dueWhere+s.owned(it.DB)+paused,
		append([]any{it.Segment, int(task.StatusPending), micros(now)}, pargs...), dueOrder, lease, limit-len(expired))
	if err != nil {
		// The expired ones are running, committed: the caller delivers them.
		return byDue(expired), fmt.Errorf("claim running %v: %w", it, err)
	}
	return byDue(append(expired, due...)), nil
}

// byDue sorts tasks by due time, then ID.
func byDue(tasks []*task.Task) []*task.Task {
	slices.SortFunc(tasks, func(a, b *task.Task) int {
		if c := a.DueAt.Compare(b.DueAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return tasks
}

// leaseIndexHint keeps MariaDB's locking read of the lapsed leases of
// ClaimRunning on the leases index. Its `due_at <= ?` makes the scan
// index, (seg, status, due_at), a candidate too; through it, a burst past
// its instant would be every claimed row of the segment read FOR UPDATE
// and sorted by lease end, while the fire stage starts those rows. (The
// 47 s MariaDB burst of 2026-12-06 was the scans' room reservations, not
// this: its EXPLAIN with the hint chose the same index.)
func (s *Store) leaseIndexHint(t string) string {
	if s.d.name == "mysql" {
		return ` FORCE INDEX (` + t + `_lease)`
	}
	return ""
}

// byID is table t as the target of a statement that matches rows by ID
// (refMatch) and status: on MariaDB with its primary key forced. Its
// optimizer may read such rows through an index on status instead
// ((status, id), or ended when few rows are open), whose range read
// takes gap locks too; a keyed insert waiting for such a gap while the
// Start that held it waited for a row the insert had written was a
// deadlock (InnoDB's report, keyed submits with deliveries running), and
// the insert's whole group commit was rolled back and retried. By primary
// key each row is locked alone (TestStatusQueriesUseOpenIndex).
func (s *Store) byID(t string) string {
	if s.d.name == "mysql" {
		return t + ` FORCE INDEX (PRIMARY)`
	}
	return t
}

// claimRunningWhere claims up to limit rows matching where, in order,
// as running, and returns them as they are now. hint follows the table's
// name in MariaDB's locking read.
func (s *Store) claimRunningWhere(ctx context.Context, db int, t, hint, where string, args []any, order string, lease store.Lease, limit int) ([]*task.Task, error) {
	nowUs := time.Now().UnixMicro()
	set := `status = ?, attempts = attempts + 1, owner = ?, lease_until = ?, token = ?, updated_at = ?`
	setArgs := []any{int(task.StatusRunning), lease.Owner, micros(lease.Until), lease.Token, nowUs}
	sel := claimSelect(t, where, order)
	var out []*task.Task
	err := withRetry(ctx, func() error {
		var err error
		switch s.d.name {
		case "postgres":
			q := `WITH c AS MATERIALIZED (` + sel + ` FOR UPDATE SKIP LOCKED) UPDATE ` + t + ` SET ` + set +
				` FROM c WHERE ` + t + `.id = c.id RETURNING ` + qualifiedCols(t)
			out, err = s.queryTasks(ctx, s.w[db], q, append(append(append([]any{}, args...), limit), setArgs...)...)
		case "sqlite":
			q := `UPDATE ` + t + ` SET ` + set + ` WHERE id IN (` + sel + `) RETURNING ` + cols
			out, err = s.queryTasks(ctx, s.w[db], q, append(append(append([]any{}, setArgs...), args...), limit)...)
		default:
			err = s.writeTx(ctx, db, nil, func(tx *sql.Tx) error {
				got, err := s.queryTasks(ctx, tx, `SELECT `+cols+` FROM `+t+hint+` WHERE `+where+` ORDER BY `+order+` LIMIT ? FOR UPDATE SKIP LOCKED`, append(append([]any{}, args...), limit)...)
				if err != nil || len(got) == 0 {
					out = nil
					return err
				}
				ids := make([]any, len(got))
				for i, tk := range got {
					ids[i] = tk.ID
				}
				if _, err := tx.ExecContext(ctx, `UPDATE `+t+` SET `+set+` WHERE id IN (`+placeholders(len(ids))+`)`, append(setArgs, ids...)...); err != nil {
					return err
				}
				for _, tk := range got {
					tk.Status, tk.Attempts, tk.Owner = task.StatusRunning, tk.Attempts+1, lease.Owner
					tk.LeaseUntil, tk.Token, tk.UpdatedAt = fromMicros(micros(lease.Until)), lease.Token, fromMicros(nowUs)
				}
				out = got
				return nil
			})
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// qualifiedCols is cols, each named with table t (an UPDATE … FROM names
// id twice).
func qualifiedCols(t string) string {
	parts := strings.Split(cols, ", ")
	for i, c := range parts {
		parts[i] = t + "." + c
	}
	return strings.Join(parts, ", ")
}

// claimWhere claims up to limit rows matching where, in order.
func (s *Store) claimWhere(ctx context.Context, db int, t, where string, args []any, order string, lease store.Lease, limit int) ([]store.Ref, error) {
	set := `status = ?, owner = ?, lease_until = ?, token = ?, updated_at = ?`
	setArgs := []any{int(task.StatusClaimed), lease.Owner, micros(lease.Until), lease.Token, time.Now().UnixMicro()}
	sel := claimSelect(t, where, order)
	var refs []store.Ref
	err := withRetry(ctx, func() error {
		refs = refs[:0]
		switch s.d.name {
		case "postgres":
			// MATERIALIZED: without it the planner may re-run the subquery
			// per row and claim more than limit rows.
			q := `WITH c AS MATERIALIZED (` + sel + ` FOR UPDATE SKIP LOCKED) UPDATE ` + t + ` SET ` + set +
				` FROM c WHERE ` + t + `.id = c.id RETURNING ` + t + `.id, ` + t + `.topic, ` + t + `.due_at, ` + t + `.priority`
			return s.collectRefs(ctx, s.w[db], q, append(append(append([]any{}, args...), limit), setArgs...), lease.Token, &refs, true)
		case "sqlite":
			q := `UPDATE ` + t + ` SET ` + set + ` WHERE id IN (` + sel + `) RETURNING id, topic, due_at, priority`
			return s.collectRefsLite(ctx, db, q, append(append(append([]any{}, setArgs...), args...), limit), lease.Token, &refs)
		default:
			return s.writeTx(ctx, db, nil, func(tx *sql.Tx) error {
				rows, err := tx.QueryContext(ctx, `SELECT id, topic, due_at, priority FROM `+t+` WHERE `+where+` ORDER BY `+order+` LIMIT ? FOR UPDATE SKIP LOCKED`, append(append([]any{}, args...), limit)...)
				if err != nil {
					return err
				}
				if err := scanRefs(rows, lease.Token, &refs); err != nil || len(refs) == 0 {
					return err
				}
				ids := make([]any, len(refs))
				for i, r := range refs {
					ids[i] = r.ID
				}
				_, err = tx.ExecContext(ctx, `UPDATE `+t+` SET `+set+` WHERE id IN (`+placeholders(len(ids))+`)`, append(setArgs, ids...)...)
				return err
			})
		}
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(refs, func(a, b store.Ref) int {
		if c := a.DueAt.Compare(b.DueAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return refs, nil
}

// collectRefs runs q, a claim that answers the claimed rows' id, topic,
// due_at and priority, and appends their refs under token to refs.
func (s *Store) collectRefs(ctx context.Context, db *sql.DB, q string, args []any, token int64, refs *[]store.Ref, numbered bool) error {
	if numbered {
		q = s.d.rebind(q)
	}
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	return scanRefs(rows, token, refs)
}

// scanRefs appends the refs of rows (id, topic, due_at, priority), claimed under
// token, to refs, and closes rows.
func scanRefs(rows *sql.Rows, token int64, refs *[]store.Ref) error {
	defer rows.Close()
	for rows.Next() {
		var r store.Ref
		var due int64
		if err := rows.Scan(&r.ID, &r.Topic, &due, &r.Priority); err != nil {
			return err
		}
		r.DueAt, r.Token = fromMicros(due), token
		*refs = append(*refs, r)
	}
	return rows.Err()
}

// Release returns claimed tasks to pending.
func (s *Store) Release(ctx context.Context, refs []store.Ref) (err error) {
	defer classify(&err)
	return s.updateRefs(ctx, "release", refs, `status = ?, owner = NULL, lease_until = 0, token = 0, updated_at = ?`,
		[]any{int(task.StatusPending), time.Now().UnixMicro()}, `status = ?`, []any{int(task.StatusClaimed)})
}

func (s *Store) updateRefs(ctx context.Context, op string, refs []store.Ref, set string, setArgs []any, cond string, condArgs []any) error {
	err := forEachGroup(s.refGroups(refs), func(g group) error {
		for start := 0; start < len(g.idx); start += batchLimit {
			match, margs := refMatch(pick(refs, g.idx[start:min(start+batchLimit, len(g.idx))]))
			q := s.d.rebind(`UPDATE ` + s.byID(s.names[g.table]) + ` SET ` + set + ` WHERE ` + cond + ` AND ` + match)
			args := append(append(append([]any{}, setArgs...), condArgs...), margs...)
			if _, err := s.execRetried(ctx, g.db, q, args...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}
