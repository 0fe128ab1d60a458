package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// batchLimit bounds the rows of one statement (placeholders stay far below
// every engine's limit: 17 × 500).
const batchLimit = 500

// Insert writes tasks idempotently on (topic, task_key). The rows bound
// for one database are written in one transaction: one commit (one sync)
// per database and call, however many tables and chunks they span, and on
// failure none of them is written. Databases are written in parallel; a
// call spanning several can fail on one after another committed (each
// database answers for its own rows).
func (s *Store) Insert(ctx context.Context, tasks []store.NewTask) (_ []store.Inserted, err error) {
	defer classify(&err)
	out := make([]store.Inserted, len(tasks))
	ids := make([]string, len(tasks))
	for i, t := range tasks {
		ids[i] = t.ID
	}
	groups := s.groupIDs(ids)
	placed := 0
	for _, g := range groups {
		placed += len(g.idx)
	}
	if placed != len(tasks) {
		return nil, fmt.Errorf("insert: a task has a malformed ID")
	}
	err = forEachDB(groups, func(gs []group) error {
		return s.insertTx(ctx, gs, tasks, out)
	})
	if err != nil {
		return nil, fmt.Errorf("insert: %w", err)
	}
	return out, nil
}

// insertTx writes the table groups of one database in one transaction,
// retried as a whole on transient conflicts (a deadlock between two
// transactions inserting the same keys in different orders, SQLite busy):
// a statement that failed inside a transaction cannot be retried alone
// (PostgreSQL aborts the transaction, MariaDB rolls it back on deadlock).
//
// MariaDB runs it READ COMMITTED: under its default REPEATABLE READ the
// read-back of a key that met a row committed meanwhile would see the
// snapshot of the transaction's first read, miss that row and take the key
// for freed. PostgreSQL's default is READ COMMITTED already; SQLite has one
// writer, so nothing commits under a write transaction.
func (s *Store) insertTx(ctx context.Context, gs []group, tasks []store.NewTask, out []store.Inserted) error {
	if s.lite != nil {
		return s.insertTxLite(ctx, gs, tasks, out)
	}
	if s.copyable(gs, tasks) {
		err := withRetry(ctx, func() error { return s.copyInsert(ctx, gs, tasks, out, time.Now()) })
		if err == nil || !uniqueViolation(err) {
			return err
		}
		// An ID exists: the statements below skip it.
	}
	if len(gs) == 1 && len(s.ins.chunks(gs[0].idx, tasks)) == 1 && !keyed(gs[0].idx, tasks) {
		// One INSERT of keyless rows and nothing else: the statement is
		// atomic by itself, and BEGIN and COMMIT would cost two more round
		// trips (what a lone submit of one task pays on a server engine).
		return withRetry(ctx, func() error {
			_, err := s.insertRound(ctx, s.w[gs[0].db], gs[0], gs[0].idx, tasks, out, time.Now())
			return err
		})
	}
	if s.multiable(gs, tasks) {
		return withRetry(ctx, func() error {
			var err error
			for range 3 {
				if err = s.multiInsert(ctx, gs, tasks, out, time.Now()); !errors.As(err, new(errRetryConn)) {
					return err
				}
			}
			return err
		})
	}
	var opts *sql.TxOptions
	if s.d.name == "mysql" {
		opts = &sql.TxOptions{Isolation: sql.LevelReadCommitted}
	}
	return withRetry(ctx, func() error {
		now := time.Now()
		tx, err := s.w[gs[0].db].BeginTx(ctx, opts)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		for _, g := range gs {
			for _, idx := range s.ins.chunks(g.idx, tasks) {
				if err := s.insertChunk(ctx, tx, g, idx, tasks, out, now); err != nil {
					return err
				}
			}
		}
		return tx.Commit()
	})
}

// keyed reports whether any task of idx has a key.
func keyed(idx []int, tasks []store.NewTask) bool {
	for _, i := range idx {
		if tasks[i].Key != "" {
			return true
		}
	}
	return false
}

// forEachDB runs f on the table groups of each database, databases in
// parallel (up to 8 at a time).
func forEachDB(groups []group, f func(gs []group) error) error {
	byDB := map[int][]group{}
	var dbs []group // the first group of each database, in order
	for _, g := range groups {
		if _, ok := byDB[g.db]; !ok {
			dbs = append(dbs, g)
		}
		byDB[g.db] = append(byDB[g.db], g)
	}
	// Tables in one order in every transaction, for the reason rows are
	// in key order (insertStatement).
	for _, gs := range byDB {
		slices.SortFunc(gs, func(a, b group) int { return a.table - b.table })
	}
	return forEachGroup(dbs, func(g group) error { return f(byDB[g.db]) })
}

// txQuerier is the write transaction of one database an insert runs in
// (or its pool, for a lone statement).
type txQuerier interface {
	querier
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// insertChunk inserts the tasks of idx (one table) and fills out. A
// keyed task whose key is held by a stored task (keys.go) is not written;
// a keyed task that loses the race for its key to a concurrent insert
// finds the winner; one whose key was freed meanwhile (the winner ended,
// with no key hold) is inserted in the next round.
func (s *Store) insertChunk(ctx context.Context, tx txQuerier, g group, idx []int, tasks []store.NewTask, out []store.Inserted, now time.Time) error {
	for round := 0; len(idx) > 0; round++ {
		if round == 3 {
			return fmt.Errorf("task %s/%q: its key kept changing hands", tasks[idx[0]].Topic, tasks[idx[0]].Key)
		}
		var err error
		if idx, err = s.resolveKeys(ctx, tx, s.names[g.table], idx, tasks, out, now); err != nil {
			return err
		}
		if len(idx) == 0 {
			return nil
		}
		if idx, err = s.insertRound(ctx, tx, g, idx, tasks, out, now); err != nil {
			return err
		}
	}
	return nil
}

// insertRound writes one INSERT of idx in tx and returns the keyed tasks
// it could not place: neither inserted nor finding a task that holds the
// key.
func (s *Store) insertRound(ctx context.Context, tx txQuerier, g group, idx []int, tasks []store.NewTask, out []store.Inserted, now time.Time) ([]int, error) {
	db, t := tx, s.names[g.table]
	q, args := s.insertStatement(t, idx, tasks, out, now)
	// Learn which rows went in, so that only keys that met an existing row
	// are read back: RETURNING where the engine has it; elsewhere (MariaDB,
	// which counts an untouched duplicate as 0 affected rows) the count
	// tells whether any row was skipped at all.
	var inserted map[string]bool
	// Not retried here: insertTx retries the whole transaction.
	err := func() error {
		if !s.d.returning {
			res, err := db.ExecContext(ctx, q, args...)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err == nil && n == int64(len(idx)) {
				inserted = make(map[string]bool, len(idx))
				for _, i := range idx {
					inserted[tasks[i].ID] = true
				}
			}
			return nil
		}
		rows, err := db.QueryContext(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		inserted = make(map[string]bool, len(idx))
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			inserted[id] = true
		}
		return rows.Err()
	}()
	if err != nil {
		return nil, err
	}
	// Keyed tasks that were not inserted met a live row of their key: read
	// back who holds each key (inserted == nil means "unknown": read back
	// every key).
	byTopic := map[string][]int{}
	for _, i := range idx {
		if tasks[i].Key != "" && !inserted[tasks[i].ID] {
			byTopic[tasks[i].Topic] = append(byTopic[tasks[i].Topic], i)
		}
	}
	var again []int
	for topic, is := range byTopic {
		keys := make([]string, len(is))
		for j, i := range is {
			keys[j] = tasks[i].Key
		}
		found, err := s.keyRows(ctx, db, t, topic, keys)
		if err != nil {
			return nil, err
		}
		for _, i := range is {
			rows := found[tasks[i].Key]
			if slices.ContainsFunc(rows, func(r *task.Task) bool { return r.ID == tasks[i].ID }) {
				continue // inserted after all
			}
			if o := keyOwner(rows); s.holds(o, now) {
				out[i] = store.Inserted{Task: o, Existing: true}
				continue
			}
			again = append(again, i)
		}
	}
	return again, nil
}

// Get returns one task.
func (s *Store) Get(ctx context.Context, id string) (_ *task.Task, err error) {
	defer classify(&err)
	return s.get(ctx, s.r, id)
}

// getW reads through the writer pool: right after a write, SQLite's reader
// connections may not have seen it yet.
func (s *Store) getW(ctx context.Context, id string) (*task.Task, error) {
	return s.get(ctx, s.w, id)
}

func (s *Store) get(ctx context.Context, pools []*sql.DB, id string) (*task.Task, error) {
	db, t, err := s.locate(id)
	if err != nil {
		return nil, err
	}
	rows, err := s.queryTasks(ctx, pools[db], `SELECT `+cols+` FROM `+s.names[t]+` WHERE id = ?`, id)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", id, err)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%w: %s", store.ErrNotFound, id)
	}
	return rows[0], nil
}

// Cancel cancels a pending or claimed task.
func (s *Store) Cancel(ctx context.Context, id string) (_ *task.Task, err error) {
	defer classify(&err)
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

// Requeue moves a dead task back to pending.
func (s *Store) Requeue(ctx context.Context, id string, dueAt time.Time) (_ *task.Task, err error) {
	defer classify(&err)
	db, t, err := s.locate(id)
	if err != nil {
		return nil, err
	}
	res, err := s.w[db].ExecContext(ctx, s.d.rebind(`UPDATE `+s.names[t]+` SET status = ?, attempts = 0, due_at = ?, owner = NULL, lease_until = 0, token = 0, updated_at = ?
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

// The queries that must run on the scan index; sqlstore's EXPLAIN tests
// check each of them on every engine.
const (
	dueWhere     = `seg = ? AND status = ? AND due_at <= ?`
	dueOrder     = `due_at, id`
	expiredWhere = `seg = ? AND status IN (?, ?) AND lease_until < ?`
	expiredOrder = `lease_until`
)

func claimSelect(t, where, order string) string {
	return `SELECT id FROM ` + t + ` WHERE ` + where + ` ORDER BY ` + order + ` LIMIT ?`
}

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

func nextDueQuery(t, paused string) string {
	return `SELECT
		(SELECT MIN(due_at) FROM ` + t + ` WHERE seg = ? AND status = ?` + paused + `),
		(SELECT MIN(lease_until) FROM ` + t + ` WHERE seg = ? AND status IN (?, ?))`
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
	q := scanQuery(s.names[it.Table], cursor, paused)
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

// Claim leases due pending tasks and tasks whose lease ended.
func (s *Store) Claim(ctx context.Context, it store.Item, horizon, now time.Time, lease store.Lease, limit int) (_ []store.Ref, err error) {
	defer classify(&err)
	if err := s.checkItem(it); err != nil {
		return nil, err
	}
	limit = clampLimit(limit)
	t := s.names[it.Table]
	// Expired leases first: those tasks are overdue.
	expired, err := s.claimWhere(ctx, it.DB, t, expiredWhere,
		[]any{it.Segment, int(task.StatusClaimed), int(task.StatusRunning), micros(now)}, expiredOrder, lease, limit)
	if err != nil {
		return nil, fmt.Errorf("claim expired %v: %w", it, err)
	}
	if len(expired) >= limit {
		return expired, nil
	}
	paused, pargs := s.pausedClause()
	due, err := s.claimWhere(ctx, it.DB, t, dueWhere+paused,
		append([]any{it.Segment, int(task.StatusPending), micros(horizon)}, pargs...), dueOrder, lease, limit-len(expired))
	if err != nil {
		return expired, fmt.Errorf("claim %v: %w", it, err)
	}
	return append(expired, due...), nil
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
				` FROM c WHERE ` + t + `.id = c.id RETURNING ` + t + `.id, ` + t + `.topic, ` + t + `.due_at`
			return s.collectRefs(ctx, s.w[db], q, append(append(append([]any{}, args...), limit), setArgs...), lease.Token, &refs, true)
		case "sqlite":
			q := `UPDATE ` + t + ` SET ` + set + ` WHERE id IN (` + sel + `) RETURNING id, topic, due_at`
			return s.collectRefsLite(ctx, db, q, append(append(append([]any{}, setArgs...), args...), limit), lease.Token, &refs)
		default:
			tx, err := s.w[db].BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer tx.Rollback()
			rows, err := tx.QueryContext(ctx, `SELECT id, topic, due_at FROM `+t+` WHERE `+where+` ORDER BY `+order+` LIMIT ? FOR UPDATE SKIP LOCKED`, append(append([]any{}, args...), limit)...)
			if err != nil {
				return err
			}
			ids := []any{}
			for rows.Next() {
				var r store.Ref
				var due int64
				if err := rows.Scan(&r.ID, &r.Topic, &due); err != nil {
					rows.Close()
					return err
				}
				r.DueAt, r.Token = fromMicros(due), lease.Token
				refs = append(refs, r)
				ids = append(ids, r.ID)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			if len(ids) == 0 {
				return nil
			}
			if _, err := tx.ExecContext(ctx, `UPDATE `+t+` SET `+set+` WHERE id IN (`+placeholders(len(ids))+`)`, append(setArgs, ids...)...); err != nil {
				return err
			}
			return tx.Commit()
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

func (s *Store) collectRefs(ctx context.Context, db *sql.DB, q string, args []any, token int64, refs *[]store.Ref, numbered bool) error {
	if numbered {
		q = s.d.rebind(q)
	}
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var r store.Ref
		var due int64
		if err := rows.Scan(&r.ID, &r.Topic, &due); err != nil {
			return err
		}
		r.DueAt, r.Token = fromMicros(due), token
		*refs = append(*refs, r)
	}
	return rows.Err()
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
	err = s.r[it.DB].QueryRowContext(ctx, s.d.rebind(nextDueQuery(t, paused)), args...).Scan(&due, &lease)
	if err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("next due %v: %w", it, err)
	}
	return fromMicros(due.Int64), fromMicros(lease.Int64), nil
}

// refGroups splits refs by table.
func (s *Store) refGroups(refs []store.Ref) []group {
	ids := make([]string, len(refs))
	for i, r := range refs {
		ids[i] = r.ID
	}
	return s.groupIDs(ids)
}

func pick(refs []store.Ref, idx []int) []store.Ref {
	out := make([]store.Ref, len(idx))
	for i, j := range idx {
		out[i] = refs[j]
	}
	return out
}

// Start moves claimed tasks to running under their tokens: one
// transaction per database, one statement per table.
func (s *Store) Start(ctx context.Context, refs []store.Ref, leaseUntil time.Time) (_ []*task.Task, err error) {
	defer classify(&err)
	if s.liteOps != nil {
		return s.startLite(ctx, refs, leaseUntil)
	}
	var mu sync.Mutex
	var out []*task.Task
	err = s.perDBTx(ctx, s.refGroups(refs), func(tx *sql.Tx, groups []group) error {
		var got []*task.Task
		for _, g := range groups {
			for start := 0; start < len(g.idx); start += batchLimit {
				part := pick(refs, g.idx[start:min(start+batchLimit, len(g.idx))])
				ts, err := s.startChunk(ctx, tx, s.names[g.table], part, leaseUntil)
				if err != nil {
					return err
				}
				got = append(got, ts...)
			}
		}
		mu.Lock()
		out = append(out, got...)
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	slices.SortFunc(out, func(a, b *task.Task) int { return a.DueAt.Compare(b.DueAt) })
	return out, nil
}

// perDBTx runs f once per database that groups touch, in parallel across
// databases, each inside one transaction (retried whole on a transient
// conflict): one commit per database instead of one per table.
func (s *Store) perDBTx(ctx context.Context, groups []group, f func(tx *sql.Tx, groups []group) error) error {
	byDB := map[int][]group{}
	var dbs []int
	for _, g := range groups {
		if _, ok := byDB[g.db]; !ok {
			dbs = append(dbs, g.db)
		}
		byDB[g.db] = append(byDB[g.db], g)
	}
	perDB := make([]group, len(dbs)) // forEachGroup's unit: one per database
	for i, db := range dbs {
		perDB[i] = group{db: db}
	}
	return forEachGroup(perDB, func(d group) error {
		return withRetry(ctx, func() error {
			tx, err := s.w[d.db].BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer tx.Rollback()
			if err := f(tx, byDB[d.db]); err != nil {
				return err
			}
			return tx.Commit()
		})
	})
}

func (s *Store) startChunk(ctx context.Context, tx *sql.Tx, t string, refs []store.Ref, leaseUntil time.Time) ([]*task.Task, error) {
	match, margs := refMatch(refs)
	now := time.Now().UnixMicro()
	set := `status = ?, attempts = attempts + 1, lease_until = ?, updated_at = ?`
	setArgs := []any{int(task.StatusRunning), micros(leaseUntil), now}
	where := `status = ? AND ` + match
	wargs := append([]any{int(task.StatusClaimed)}, margs...)
	if s.d.returning {
		return s.queryTasks(ctx, tx, `UPDATE `+t+` SET `+set+` WHERE `+where+` RETURNING `+cols, append(append([]any{}, setArgs...), wargs...)...)
	}
	out, err := s.queryTasks(ctx, tx, `SELECT `+cols+` FROM `+t+` WHERE `+where+` FOR UPDATE`, wargs...)
	if err != nil || len(out) == 0 {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE `+t+` SET `+set+` WHERE `+where, append(append([]any{}, setArgs...), wargs...)...); err != nil {
		return nil, err
	}
	for _, tk := range out {
		tk.Status, tk.Attempts, tk.LeaseUntil, tk.UpdatedAt = task.StatusRunning, tk.Attempts+1, fromMicros(micros(leaseUntil)), fromMicros(now)
	}
	return out, nil
}

// Finish records delivery outcomes under their tokens: one transaction per
// database; done rows in one statement per table.
func (s *Store) Finish(ctx context.Context, outcomes []store.Outcome) (err error) {
	defer classify(&err)
	if s.liteOps != nil {
		return s.finishLite(ctx, outcomes)
	}
	refs := make([]store.Ref, len(outcomes))
	for i, o := range outcomes {
		refs[i] = o.Ref
	}
	err = s.perDBTx(ctx, s.refGroups(refs), func(tx *sql.Tx, groups []group) error {
		for _, g := range groups {
			if err := s.finishGroup(ctx, tx, g, outcomes); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("finish: %w", err)
	}
	return nil
}

func (s *Store) finishGroup(ctx context.Context, tx *sql.Tx, g group, outcomes []store.Outcome) error {
	t := s.names[g.table]
	now := time.Now().UnixMicro()
	var done []store.Ref
	retries := map[retryKey][]store.Ref{}
	var keys []retryKey // in first-seen order
	for _, i := range g.idx {
		o := outcomes[i]
		switch {
		case o.Done:
			done = append(done, o.Ref)
		case o.Dead, o.Cancelled:
			final := task.StatusDead
			if o.Cancelled {
				final = task.StatusCancelled
			}
			if _, err := tx.ExecContext(ctx, s.d.rebind(`UPDATE `+t+` SET status = ?, last_error = ?, owner = NULL, lease_until = 0, updated_at = ?
				WHERE id = ? AND token = ? AND status = ?`), int(final), truncate(o.Error), now, o.ID, o.Token, int(task.StatusRunning)); err != nil {
				return err
			}
		default:
			k := retryKeyOf(o)
			if _, ok := retries[k]; !ok {
				keys = append(keys, k)
			}
			retries[k] = append(retries[k], o.Ref)
		}
	}
	// Retries that share their new state — the tasks one refusal of an
	// open breaker deferred to the same instant, with the same error — in
	// one statement per batchLimit rows, not one each.
	for _, k := range keys {
		refs := retries[k]
		var owner any
		if k.owner != "" {
			owner = k.owner
		}
		for start := 0; start < len(refs); start += batchLimit {
			match, margs := refMatch(refs[start:min(start+batchLimit, len(refs))])
			if _, err := tx.ExecContext(ctx, s.d.rebind(`UPDATE `+t+` SET status = ?, due_at = ?, last_error = ?, attempts = attempts - ?, owner = ?, lease_until = ?, token = ?, updated_at = ?
				WHERE status = ? AND `+match), append([]any{int(k.status), k.due, k.err, k.undo, owner, k.lease, k.token, now, int(task.StatusRunning)}, margs...)...); err != nil {
				return err
			}
		}
	}
	for start := 0; start < len(done); start += batchLimit {
		match, margs := refMatch(done[start:min(start+batchLimit, len(done))])
		if _, err := tx.ExecContext(ctx, s.d.rebind(`UPDATE `+t+` SET status = ?, owner = NULL, lease_until = 0, updated_at = ? WHERE status = ? AND `+match),
			append([]any{int(task.StatusDone), now, int(task.StatusRunning)}, margs...)...); err != nil {
			return err
		}
	}
	return nil
}

// retryKey is the new state of a retried task (Finish).
type retryKey struct {
	status       task.Status
	due          int64
	err          string
	undo         int
	owner        string
	lease, token int64
}

// retryKeyOf is the new state of a retried outcome: pending at its retry
// time, or, due within the window, claimed under the caller's new lease
// (it puts it in the hot tier).
func retryKeyOf(o store.Outcome) retryKey {
	k := retryKey{status: task.StatusPending, due: micros(o.RetryAt), err: truncate(o.Error)}
	if o.NotAttempted {
		k.undo = 1
	}
	if o.Claim != nil {
		k.status, k.owner, k.lease, k.token = task.StatusClaimed, o.Claim.Owner, micros(o.Claim.Until), o.Claim.Token
	}
	return k
}

func truncate(s string) string { return store.ErrorText(s) }

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
			q := s.d.rebind(`UPDATE ` + s.names[g.table] + ` SET ` + set + ` WHERE ` + cond + ` AND ` + match)
			args := append(append(append([]any{}, setArgs...), condArgs...), margs...)
			if err := withRetry(ctx, func() error { _, err := s.w[g.db].ExecContext(ctx, q, args...); return err }); err != nil {
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

// List merges per-table pages in ID order.
func (s *Store) List(ctx context.Context, f store.ListFilter) (_ []*task.Task, err error) {
	defer classify(&err)
	limit := f.Limit
	if limit == 0 {
		limit = store.DefaultListLimit
	}
	if limit < 1 || limit > store.MaxListLimit {
		return nil, &task.FieldError{Field: "limit", Message: fmt.Sprintf("%d is out of range 1..%d", f.Limit, store.MaxListLimit)}
	}
	// The page is merged across every table by ID: IDs first (index
	// only), then the rows of the IDs that made the page, so a page reads
	// at most limit payloads however many tables there are.
	q := `SELECT id FROM %s WHERE id > ?`
	args := []any{f.After}
	if f.Topic != "" {
		q += ` AND topic = ?`
		args = append(args, f.Topic)
	}
	if f.Status != nil {
		q += ` AND status = ?`
		args = append(args, int(*f.Status))
		if *f.Status != task.StatusDone {
			q += notDone
		}
	}
	ids, err := s.listIDs(ctx, q, args, limit)
	if err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	all, err := s.getMany(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	return all, nil
}

// Count counts tasks per status.
func (s *Store) Count(ctx context.Context) (_ map[task.Status]int64, err error) {
	defer classify(&err)
	out := map[task.Status]int64{}
	for db := range s.r {
		for _, t := range s.names {
			// By (seg, status), the scan index's order: SQLite counts in one
			// pass over it, where GROUP BY status alone would sort every row
			// (since version 8 no index leads with status for done rows).
			rows, err := s.r[db].QueryContext(ctx, `SELECT status, COUNT(*) FROM `+t+` GROUP BY seg, status`)
			if err != nil {
				return nil, fmt.Errorf("count: %w", err)
			}
			for rows.Next() {
				var st, n int64
				if err := rows.Scan(&st, &n); err != nil {
					rows.Close()
					return nil, fmt.Errorf("count: %w", err)
				}
				out[task.Status(st)] += n
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return nil, fmt.Errorf("count: %w", err)
			}
		}
	}
	return out, nil
}
