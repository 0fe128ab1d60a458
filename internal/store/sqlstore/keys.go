package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ontimehq/ontime/internal/router"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// Schema version 3: keys name live tasks only, and final rows can be found
// by when they ended.
//
//	(topic, task_key)                 GetByKey and the key hold: every row
//	                                  of a key, live or final (no longer unique)
//	UNIQUE (topic, task_key) of live  at most one live task per key, also
//	rows only                         under concurrent submits
//	(seg, status, ended) of final     retention: an index range per item and
//	rows only                         final status, oldest first
//
// SQLite and PostgreSQL have partial indexes (WHERE status < 3, WHERE
// status >= 3). MariaDB has none, so it indexes two virtual generated
// columns instead: live_key (the key while live, NULL once final: NULLs
// never collide in a unique index) and ended_at (updated_at once final,
// NULL while live). Either way live rows are not in the retention index,
// so claims and lease extensions, which rewrite updated_at, do not touch
// it. On MariaDB the retention index leads with (status, ended_at), not
// (seg, status): with the scan index's prefix MariaDB chose it for claims
// (then sorted, locking every pending row of the segment, so concurrent
// SKIP LOCKED claimers found nothing); a cleaner's range then spans the
// table's segments, filtered in the index by seg.
func (s *Store) migrateKeys(ctx context.Context, c *sql.Conn) error {
	var stmts []string
	for _, t := range s.names {
		switch s.d.name {
		case "mysql":
			// One ALTER per table: one rebuild, atomic, so "has the
			// column" says whether it ran.
			var n int
			if err := c.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.columns
				WHERE table_schema = DATABASE() AND table_name = ? AND column_name = 'live_key'`, t).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				continue
			}
			stmts = append(stmts, `ALTER TABLE `+t+`
				ADD COLUMN live_key VARBINARY(255) AS (IF(status < 3, task_key, NULL)) VIRTUAL,
				ADD COLUMN ended_at BIGINT AS (IF(status >= 3, updated_at, NULL)) VIRTUAL,
				DROP INDEX topic_key,
				ADD KEY task_key (topic, task_key),
				ADD UNIQUE KEY live_key (topic, live_key),
				ADD KEY ended (status, ended_at, seg)`)
		default:
			// The live unique index first: while both exist the old one
			// still holds.
			stmts = append(stmts,
				`CREATE UNIQUE INDEX IF NOT EXISTS `+t+`_live_key ON `+t+` (topic, task_key) WHERE status < 3`,
				`CREATE INDEX IF NOT EXISTS `+t+`_key ON `+t+` (topic, task_key)`,
				`DROP INDEX IF EXISTS `+t+`_topic_key`,
				`CREATE INDEX IF NOT EXISTS `+t+`_ended ON `+t+` (seg, status, updated_at) WHERE status >= 3`)
		}
	}
	for _, stmt := range stmts {
		if _, err := c.ExecContext(ctx, stmt); err != nil {
			return err
		}
	}
	return nil
}

// keyIndexHint makes MariaDB read a key's rows through (topic, task_key):
// with few rows it may pick the live-key index on its topic prefix alone.
func (s *Store) keyIndexHint() string {
	if s.d.name == "mysql" {
		return ` FORCE INDEX (task_key)`
	}
	return ""
}

// keyRowsQuery reads every row of n keys of one topic in table t; its
// arguments are keyRowsArgs'. SQLite and PostgreSQL index a key's live
// rows and its final ones apart (endedkeys.go): one SELECT through each,
// each naming its index's status term. MariaDB reads its (topic,
// task_key) index of every row.
func (s *Store) keyRowsQuery(t string, n int) string {
	if s.d.name == "mysql" {
		return `SELECT ` + cols + ` FROM ` + t + s.keyIndexHint() + ` WHERE topic = ? AND task_key IN (` + placeholders(n) + `)`
	}
	one := `SELECT ` + cols + ` FROM ` + t + ` WHERE topic = ? AND task_key IN (` + placeholders(n) + `) AND status `
	return one + `< 3 UNION ALL ` + one + `>= 3`
}

// keyRowsArgs are keyRowsQuery's arguments: the topic and the keys, for
// each of its SELECTs.
func (s *Store) keyRowsArgs(topic string, keys []string) []any {
	selects := 2
	if s.d.name == "mysql" {
		selects = 1
	}
	args := make([]any, 0, selects*(len(keys)+1))
	for range selects {
		args = append(args, topic)
		for _, k := range keys {
			args = append(args, k)
		}
	}
	return args
}

// keyRows reads every row of these keys of one topic in one table.
func (s *Store) keyRows(ctx context.Context, db querier, t, topic string, keys []string) (map[string][]*task.Task, error) {
	rows, err := s.queryTasks(ctx, db, s.keyRowsQuery(t, len(keys)), s.keyRowsArgs(topic, keys)...)
	if err != nil {
		return nil, err
	}
	out := make(map[string][]*task.Task, len(keys))
	for _, r := range rows {
		out[r.Key] = append(out[r.Key], r)
	}
	return out, nil
}

// keyOwner picks the task a key names among its rows: the live one, else
// the final one that ended last (nil when there are no rows).
func keyOwner(rows []*task.Task) *task.Task {
	var best *task.Task
	for _, r := range rows {
		switch {
		case store.Live(r.Status):
			return r
		case best == nil, r.UpdatedAt.After(best.UpdatedAt),
			r.UpdatedAt.Equal(best.UpdatedAt) && r.ID > best.ID:
			best = r
		}
	}
	return best
}

// holds reports whether the task a key names keeps it from nt at now: it
// is live, or it ended less than the key hold ago and nt does not replace
// final tasks.
func (s *Store) holds(owner *task.Task, nt *store.NewTask, now time.Time) bool {
	if owner == nil {
		return false
	}
	if store.Live(owner.Status) {
		return true
	}
	return !nt.ReplaceFinal && now.Sub(owner.UpdatedAt) < s.cfg.KeyHold
}

// holdCutoff is the time, in microseconds, after which a final row that
// ended still holds its key at now (no key hold: none does).
func (s *Store) holdCutoff(now time.Time) int64 {
	if s.cfg.KeyHold <= 0 {
		return math.MaxInt64
	}
	return now.Add(-s.cfg.KeyHold).UnixMicro()
}

// heldBy is the answer of a task whose key owner holds.
func (s *Store) heldBy(owner *task.Task) store.Inserted {
	in := store.Inserted{Task: owner, Existing: true}
	if !store.Live(owner.Status) {
		in.HeldUntil = owner.UpdatedAt.Add(s.cfg.KeyHold)
	}
	return in
}

// resolveKeys finds, among the keyed tasks of idx, those whose key is held
// by a stored task, sets their out to that task (Existing) and returns the
// positions still to insert. Tasks of one batch with the same key are left
// to the insert: the first goes in, the rest meet it.
func (s *Store) resolveKeys(ctx context.Context, db querier, t string, idx []int, tasks []store.NewTask, out []store.Inserted, now time.Time) ([]int, error) {
	if s.cfg.KeyHold <= 0 {
		// Only live tasks hold keys: the live-key index refuses those, and
		// the insert reads back who won.
		return idx, nil
	}
	byTopic := map[string][]string{}
	for _, i := range idx {
		if k := tasks[i].Key; k != "" {
			byTopic[tasks[i].Topic] = append(byTopic[tasks[i].Topic], k)
		}
	}
	if len(byTopic) == 0 {
		return idx, nil
	}
	owners := map[[2]string]*task.Task{}
	for topic, keys := range byTopic {
		rows, err := s.keyRows(ctx, db, t, topic, keys)
		if err != nil {
			return nil, err
		}
		for k, rs := range rows {
			owners[[2]string{topic, k}] = keyOwner(rs)
		}
	}
	rest := idx[:0:0]
	for _, i := range idx {
		if o := owners[[2]string{tasks[i].Topic, tasks[i].Key}]; tasks[i].Key != "" && s.holds(o, &tasks[i], now) {
			out[i] = s.heldBy(o)
			continue
		}
		rest = append(rest, i)
	}
	return rest, nil
}

// GetByKey returns the task a key names.
func (s *Store) GetByKey(ctx context.Context, topic, key string) (_ *task.Task, err error) {
	defer classify(&err)
	if key == "" {
		return nil, fmt.Errorf("%w: empty key", store.ErrNotFound)
	}
	db, table := s.topo.Locate(router.HashKey(key))
	rows, err := s.keyRows(ctx, s.r[db], s.names[table], topic, []string{key})
	if err != nil {
		return nil, fmt.Errorf("get by key: %w", err)
	}
	if o := keyOwner(rows[key]); o != nil {
		return o, nil
	}
	return nil, fmt.Errorf("%w: key %q of topic %s", store.ErrNotFound, key, topic)
}

// Update changes a pending or claimed task.
func (s *Store) Update(ctx context.Context, id string, p store.Patch) (_ *task.Task, err error) {
	defer classify(&err)
	if err := s.fenced(); err != nil {
		return nil, err
	}
	db, table, err := s.locate(id)
	if err != nil {
		return nil, err
	}
	t := s.names[table]
	now := time.Now().UnixMicro()
	var set []string
	var args []any
	add := func(col string, v any) {
		set = append(set, col+` = ?`)
		args = append(args, v)
	}
	if p.DueAt != nil {
		add(`due_at`, micros(*p.DueAt))
		set = append(set, setMovedUpdate)
		if c := p.Claim; c != nil {
			add(`status`, int(task.StatusClaimed))
			add(`owner`, c.Owner)
			add(`lease_until`, micros(c.Until))
			add(`token`, c.Token)
		} else {
			add(`status`, int(task.StatusPending))
			set = append(set, `owner = NULL`)
			add(`lease_until`, 0)
			add(`token`, 0)
		}
	}
	if p.Payload != nil {
		add(`payload`, p.Payload)
	}
	if p.Target != nil {
		add(`target`, *p.Target)
	}
	if p.MaxAttempts != nil {
		add(`max_attempts`, *p.MaxAttempts)
	}
	if p.Retry != nil {
		add(`retry`, *p.Retry)
	}
	add(`updated_at`, now)
	q := `UPDATE ` + t + ` SET ` + strings.Join(set, ", ") + ` WHERE id = ? AND status IN (?, ?)`
	args = append(args, id, int(task.StatusPending), int(task.StatusClaimed))
	if s.d.returning {
		var rows []*task.Task
		err := withRetry(ctx, func() error {
			var err error
			rows, err = s.queryTasks(ctx, s.w[db], q+` RETURNING `+cols, args...)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("update %s: %w", id, err)
		}
		if len(rows) == 1 {
			return rows[0], nil
		}
	} else {
		n, err := s.execRetried(ctx, db, s.d.rebind(q), args...)
		if err != nil {
			return nil, fmt.Errorf("update %s: %w", id, err)
		}
		if n == 1 {
			return s.getW(ctx, id)
		}
		// MariaDB counts a matched row whose values did not change as 0:
		// updated_at always changes, so 0 means no row matched.
	}
	cur, err := s.getW(ctx, id)
	if err != nil {
		return nil, err
	}
	return nil, &store.ConflictError{ID: id, Status: cur.Status, Op: "update"}
}

// uniqueViolation reports a write refused by a unique index: the live-key
// index, when a requeue would give a reused key a second live task.
func uniqueViolation(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number == 1062
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "23505"
	}
	return strings.Contains(err.Error(), "UNIQUE constraint failed")
}
