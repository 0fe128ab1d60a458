package sqlstore

// Counts maintained by the writes (schema version 20): the tasks per topic
// and status that GET /v1/topics, the console and the leader's gauges
// show, kept in each database by triggers on its task tables, so that
// reading them costs a few hundred rows instead of a COUNT(*) over every
// task (28 % of a core on a SQLite node at ten million rows, and counts
// many seconds old).
//
//   - SQLite has one writer: a row trigger upserts the counter row of the
//     (topic, status) a row enters and decrements the one it leaves. The
//     counter table is small and always cached; no lock is contended.
//   - PostgreSQL: statement triggers with transition tables append one
//     aggregated delta per (topic, status) and statement to an insert-only
//     table (ontime_count_deltas), so concurrent writers never wait on a
//     hot counter row. A reader sums totals and unfolded deltas in one
//     snapshot (exact as of the read); FoldCounts moves the deltas into
//     the totals (a node service, every second) to keep that sum short.
//     COPY fires the INSERT statement trigger too.
//   - MariaDB keeps counting in the background (COUNT(*) per table): its
//     triggers are row triggers only, and a counter row updated per task
//     row would hold an InnoDB row lock on the hot (topic, status) row
//     until each writer's commit, serializing the claim and insert
//     transactions of every node; a delta row per task row would double
//     every write.
//
// The counts are recounted from the tables when the step is taken and by
// RecountTopics (a repair: it blocks writes to the database while it
// counts). While an expansion's cleanup runs, an old database holds
// copies that its triggers counted; its counts are then read by COUNT(*)
// over the rows it keeps, as before.

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// countsFoldLockKey is the advisory lock a PostgreSQL fold holds for its
// transaction: one node folds at a time, the others skip that round.
const countsFoldLockKey = 7_406_612_026

// maintainsCounts reports whether this engine keeps ontime_counts.
func (s *Store) maintainsCounts() bool { return s.d.name == "sqlite" || s.d.name == "postgres" }

// migrateCounts is schema step 20: the counts tables, the triggers on
// every task table, and a first count, in one transaction (writes to the
// task tables wait for it, so none is missed or counted twice).
func (s *Store) migrateCounts(ctx context.Context, c *sql.Conn) error {
	if !s.maintainsCounts() {
		return nil
	}
	var stmts []string
	switch s.d.name {
	case "sqlite":
		stmts = append(stmts, `CREATE TABLE IF NOT EXISTS ontime_counts (topic TEXT NOT NULL, status INTEGER NOT NULL, n INTEGER NOT NULL, PRIMARY KEY (topic, status)) WITHOUT ROWID`)
		for _, t := range s.names {
			stmts = append(stmts, liteCountTriggers(t)...)
		}
	case "postgres":
		stmts = append(stmts,
			`CREATE TABLE IF NOT EXISTS ontime_counts (topic TEXT COLLATE "C" NOT NULL, status SMALLINT NOT NULL, n BIGINT NOT NULL, PRIMARY KEY (topic, status))`,
			`CREATE TABLE IF NOT EXISTS ontime_count_deltas (id BIGSERIAL PRIMARY KEY, topic TEXT COLLATE "C" NOT NULL, status SMALLINT NOT NULL, d BIGINT NOT NULL)`,
			`CREATE OR REPLACE FUNCTION ontime_count_ins() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
				INSERT INTO ontime_count_deltas (topic, status, d) SELECT topic, status, COUNT(*) FROM ontime_new GROUP BY topic, status;
				RETURN NULL; END $$`,
			`CREATE OR REPLACE FUNCTION ontime_count_del() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
				INSERT INTO ontime_count_deltas (topic, status, d) SELECT topic, status, -COUNT(*) FROM ontime_old GROUP BY topic, status;
				RETURN NULL; END $$`,
			// An UPDATE that moves no row between statuses (a lease
			// renewal, a reschedule) appends nothing.
			`CREATE OR REPLACE FUNCTION ontime_count_upd() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
				INSERT INTO ontime_count_deltas (topic, status, d)
					SELECT topic, status, SUM(d) FROM (SELECT topic, status, 1 AS d FROM ontime_new UNION ALL SELECT topic, status, -1 FROM ontime_old) x
					GROUP BY topic, status HAVING SUM(d) <> 0;
				RETURN NULL; END $$`)
		for _, t := range s.names {
			stmts = append(stmts,
				`DROP TRIGGER IF EXISTS `+t+`_count_ins ON `+t,
				`CREATE TRIGGER `+t+`_count_ins AFTER INSERT ON `+t+` REFERENCING NEW TABLE AS ontime_new FOR EACH STATEMENT EXECUTE FUNCTION ontime_count_ins()`,
				`DROP TRIGGER IF EXISTS `+t+`_count_del ON `+t,
				`CREATE TRIGGER `+t+`_count_del AFTER DELETE ON `+t+` REFERENCING OLD TABLE AS ontime_old FOR EACH STATEMENT EXECUTE FUNCTION ontime_count_del()`,
				`DROP TRIGGER IF EXISTS `+t+`_count_upd ON `+t,
				`CREATE TRIGGER `+t+`_count_upd AFTER UPDATE ON `+t+` REFERENCING OLD TABLE AS ontime_old NEW TABLE AS ontime_new FOR EACH STATEMENT EXECUTE FUNCTION ontime_count_upd()`)
		}
	}
	return migrateCounting(ctx, c, "counts", stmts, s.recountTx)
}

// migrateCounting runs a counting step's statements and its first count
// in one transaction: writes to the task tables wait for it, so none is
// missed or counted twice.
func migrateCounting(ctx context.Context, c *sql.Conn, what string, stmts []string, recount func(context.Context, *sql.Tx) error) error {
	tx, err := c.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	for _, q := range stmts {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	if err := recount(ctx, tx); err != nil {
		return err
	}
	return tx.Commit()
}

// liteCountTriggers are SQLite's row triggers on task table t. The update
// trigger fires only for statements that set status or topic, and only
// for rows whose status or topic changed.
func liteCountTriggers(t string) []string {
	return []string{
		`CREATE TRIGGER IF NOT EXISTS ` + t + `_count_ins AFTER INSERT ON ` + t + ` BEGIN
			INSERT INTO ontime_counts (topic, status, n) VALUES (new.topic, new.status, 1)
			ON CONFLICT (topic, status) DO UPDATE SET n = n + excluded.n; END`,
		`CREATE TRIGGER IF NOT EXISTS ` + t + `_count_del AFTER DELETE ON ` + t + ` BEGIN
			UPDATE ontime_counts SET n = n - 1 WHERE topic = old.topic AND status = old.status; END`,
		// One statement for both counters: a statement per row is what
		// the trigger costs.
		`CREATE TRIGGER IF NOT EXISTS ` + t + `_count_upd AFTER UPDATE OF status, topic ON ` + t + `
			WHEN old.status <> new.status OR old.topic <> new.topic BEGIN
			INSERT INTO ontime_counts (topic, status, n) VALUES (new.topic, new.status, 1), (old.topic, old.status, -1)
			ON CONFLICT (topic, status) DO UPDATE SET n = n + excluded.n; END`,
	}
}

// recountTx replaces the counts of tx's database by a count of its task
// tables. The caller's transaction keeps writers out: SQLite's is the
// writer's, PostgreSQL's locks the task tables in SHARE mode (reads go on).
func (s *Store) recountTx(ctx context.Context, tx *sql.Tx) error {
	var stmts []string
	if s.d.name == "postgres" {
		stmts = append(stmts, `LOCK TABLE `+strings.Join(s.names, ", ")+` IN SHARE MODE`, `DELETE FROM ontime_count_deltas`)
	}
	stmts = append(stmts, `DELETE FROM ontime_counts`)
	for _, t := range s.names {
		stmts = append(stmts, `INSERT INTO ontime_counts (topic, status, n) SELECT topic, status, COUNT(*) FROM `+t+` WHERE true GROUP BY topic, status
			ON CONFLICT (topic, status) DO UPDATE SET n = ontime_counts.n + excluded.n`)
	}
	for _, q := range stmts {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("recount: %w", err)
		}
	}
	return nil
}

// RecountTopics recounts the maintained counts of every database from its
// task tables: a repair, should they ever drift. It blocks the
// database's writes while it counts (seconds at millions of rows). A
// no-op on MariaDB, which counts when asked.
func (s *Store) RecountTopics(ctx context.Context) (err error) {
	defer classify(&err)
	if !s.maintainsCounts() {
		return nil
	}
	for db := range s.w {
		tx, err := s.w[db].BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("recount: %w", err)
		}
		if err := s.recountTx(ctx, tx); err != nil {
			_ = tx.Rollback()
			return err
		}
		if err := s.recountDueTx(ctx, tx); err != nil {
			_ = tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("recount: %w", err)
		}
	}
	return nil
}

// FoldCounts moves PostgreSQL's unfolded deltas (topic counts and due
// counts) into the totals, in each database, and returns how many deltas
// it folded; on SQLite and PostgreSQL it drops the due counters of past
// hours that reached 0 (sweepDue). The DELETE takes the
// deltas its snapshot sees; those committed meanwhile wait for the next
// fold, so none is lost or folded twice. One node folds at a time (an
// advisory lock for the transaction; another node's fold skips). A no-op
// on MariaDB.
func (s *Store) FoldCounts(ctx context.Context) (_ int64, err error) {
	defer classify(&err)
	switch s.d.name {
	case "sqlite":
		if err := s.sweepLite(ctx); err != nil {
			return 0, fmt.Errorf("fold counts: %w", err)
		}
		return 0, nil
	case "postgres":
	default:
		return 0, nil
	}
	var total int64
	for db := range s.w {
		n, err := s.foldCounts(ctx, db)
		if err != nil {
			return total, fmt.Errorf("fold counts: %w", err)
		}
		total += n
	}
	return total, nil
}

func (s *Store) foldCounts(ctx context.Context, db int) (int64, error) {
	tx, err := s.w[db].BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	var got bool
	if err := tx.QueryRowContext(ctx, `SELECT pg_try_advisory_xact_lock($1)`, countsFoldLockKey).Scan(&got); err != nil {
		return 0, err
	}
	if !got {
		return 0, nil
	}
	var n int64
	err = tx.QueryRowContext(ctx, `WITH gone AS (DELETE FROM ontime_count_deltas RETURNING topic, status, d),
		summed AS (SELECT topic, status, SUM(d) AS d, COUNT(*) AS c FROM gone GROUP BY topic, status),
		folded AS (INSERT INTO ontime_counts (topic, status, n) SELECT topic, status, d FROM summed
			ON CONFLICT (topic, status) DO UPDATE SET n = ontime_counts.n + excluded.n)
		SELECT COALESCE(SUM(c), 0) FROM summed`).Scan(&n)
	if err != nil {
		return 0, err
	}
	if n > 0 {
		// Counters of a (topic, status) that emptied: drop them, so the
		// table holds what exists.
		if _, err := tx.ExecContext(ctx, `DELETE FROM ontime_counts WHERE n = 0`); err != nil {
			return 0, err
		}
	}
	due, err := foldDueTx(ctx, tx)
	if err != nil {
		return 0, err
	}
	if err := s.sweepDue(ctx, db, tx, time.Now()); err != nil {
		return 0, err
	}
	return n + due, tx.Commit()
}

// maintainedCounts reads database db's counts per (topic, status): the
// totals plus the unfolded deltas, in one snapshot. ok is false when db's
// counts must be counted instead (MariaDB, a cleanup under way).
func (s *Store) maintainedCounts(ctx context.Context, db int, add func(topic string, st task.Status, n int64)) (ok bool, err error) {
	if !s.maintainsCounts() || s.owned(db) != "" {
		return false, nil
	}
	q := `SELECT topic, status, n FROM ontime_counts WHERE n <> 0`
	if s.d.name == "postgres" {
		q = `SELECT topic, status, SUM(n) FROM (SELECT topic, status, n FROM ontime_counts UNION ALL SELECT topic, status, d FROM ontime_count_deltas) x
			GROUP BY topic, status HAVING SUM(n) <> 0`
	}
	rows, err := s.r[db].QueryContext(ctx, q)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	for rows.Next() {
		var topic string
		var st, n int64
		if err := rows.Scan(&topic, &st, &n); err != nil {
			return false, err
		}
		add(topic, task.Status(st), n)
	}
	return true, rows.Err()
}

// lookAhead is how many pending tasks oldestPending reads per table
// segment past the overdue ones; lookAheadEvery how long it keeps what
// they said.
const (
	lookAhead      = 64
	lookAheadEvery = 30 * time.Second
)

// aheadCache is the last look-ahead past the overdue tasks: per topic the
// earliest due it vouches for.
type aheadCache struct {
	mu   sync.Mutex
	at   time.Time
	best map[string]int64
}

// inserted drops the look-ahead when a task inserted is due before its
// topic's earliest there (or its topic is not there): the next read walks
// again. Tasks due later, the usual case, change nothing.
func (c *aheadCache) inserted(tasks []store.NewTask) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.best == nil {
		return
	}
	for _, t := range tasks {
		if due, ok := c.best[t.Topic]; !ok || micros(t.DueAt) < due {
			c.best = nil
			return
		}
	}
}

// oldestPending finds the earliest due time of the pending tasks of each
// topic in want: overdue ones by oldestOverdue (overdue.go), each time;
// then, for the topics without one, the next lookAhead pending tasks of
// each segment through the scan index (seg, status, due_at), read at
// most every lookAheadEvery (a segment walk per table segment is most of
// the read's cost, and a future due time changes little in that while: a
// task submitted meanwhile with an earlier due shows that much later). A
// topic whose earliest task lies past what the look-ahead can vouch for
// (another segment's walk stopped before it) is left out: its
// OldestDueAt is zero. rows holds each topic's stored tasks, all
// statuses (oldestOverdue chooses its reads by them).
func (s *Store) oldestPending(ctx context.Context, want map[string]bool, rows map[string]int64, now time.Time, set func(topic string, due time.Time)) error {
	if len(want) == 0 {
		return nil
	}
	nowUs := micros(now)
	overdue, err := s.oldestOverdue(ctx, want, rows, nowUs)
	if err != nil {
		return err
	}
	ahead, err := s.lookAhead(ctx, now, strconv.Itoa(int(task.StatusPending)))
	if err != nil {
		return err
	}
	for topic := range want {
		if due, ok := overdue[topic]; ok {
			set(topic, fromMicros(due))
		} else if due, ok := ahead[topic]; ok && due > nowUs {
			set(topic, fromMicros(due))
		}
	}
	return nil
}

// lookAhead walks the next lookAhead pending tasks of every table segment
// due after now, or answers its last walk when younger than
// lookAheadEvery. Its answer holds the topics whose earliest due it can
// vouch for.
func (s *Store) lookAhead(ctx context.Context, now time.Time, pending string) (map[string]int64, error) {
	c := &s.ahead
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.best != nil && now.Sub(c.at) < lookAheadEvery && !now.Before(c.at) {
		return c.best, nil
	}
	best := map[string]int64{}
	bound := int64(-1) // the least due time a stopped walk has not passed; -1: none stopped
	nowUs := micros(now)
	for db := range s.r {
		for _, t := range s.names {
			if err := s.walkSegments(ctx, db, t, `status = `+pending+` AND due_at > ?`, nowUs, lookAhead, best, &bound); err != nil {
				return nil, err
			}
		}
	}
	for topic, due := range best {
		if bound >= 0 && due > bound {
			delete(best, topic)
		}
	}
	c.best, c.at = best, now
	return best, nil
}

// walkSegments reads, in each segment of table t in database db, the
// first limit pending tasks matching where (which takes arg) in due
// order, keeps each topic's earliest due in seen, and lowers *bound to the
// last due of a walk that read limit (one cut short): every matching
// task due before *bound was read.
func (s *Store) walkSegments(ctx context.Context, db int, t, where string, arg int64, limit int, seen map[string]int64, bound *int64) error {
	q := `SELECT topic, due_at FROM ` + s.from(db, t) + ` WHERE seg = ? AND ` + where + ` ORDER BY due_at LIMIT ` + strconv.Itoa(limit)
	for seg := range s.cfg.Segments {
		n, last := 0, int64(0)
		if err := s.scanPairs(ctx, db, s.d.rebind(q), []any{seg, arg}, func(topic string, due int64) {
			n, last = n+1, due
			if b, ok := seen[topic]; !ok || due < b {
				seen[topic] = due
			}
		}); err != nil {
			return err
		}
		if n == limit && (*bound < 0 || last < *bound) {
			*bound = last
		}
	}
	return nil
}

func (s *Store) scanPairs(ctx context.Context, db int, q string, args []any, f func(string, int64)) error {
	rows, err := s.r[db].QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var topic string
		var due int64
		if err := rows.Scan(&topic, &due); err != nil {
			return err
		}
		f(topic, due)
	}
	return rows.Err()
}

// countsByTopic reads every database's counts: maintained where they are,
// else counted (with the earliest pending due, which the count gives for
// free). add receives each database's figures; min receives the earliest
// pending due of topics counted by COUNT(*). It reports whether any
// database's counts were maintained (their oldest pending dues are then
// still to find).
func (s *Store) countsByTopic(ctx context.Context, topic string, add func(topic string, st task.Status, n int64), minDue func(topic string, due time.Time)) (maintained bool, err error) {
	for db := range s.r {
		ok, err := s.maintainedCounts(ctx, db, func(tp string, st task.Status, n int64) {
			if topic == "" || tp == topic {
				add(tp, st, n)
			}
		})
		if err != nil {
			return false, err
		}
		if ok {
			maintained = true
			continue
		}
		q, args := `SELECT topic, status, COUNT(*), MIN(due_at) FROM %s GROUP BY topic, status`, []any(nil)
		if topic != "" {
			q, args = `SELECT topic, status, COUNT(*), MIN(due_at) FROM %s WHERE topic = ? GROUP BY topic, status`, []any{topic}
		}
		for _, t := range s.names {
			rows, err := s.r[db].QueryContext(ctx, s.d.rebind(fmt.Sprintf(q, s.from(db, t))), args...)
			if err != nil {
				return false, err
			}
			for rows.Next() {
				var name string
				var st, n, due int64
				if err := rows.Scan(&name, &st, &n, &due); err != nil {
					rows.Close()
					return false, err
				}
				add(name, task.Status(st), n)
				if task.Status(st) == task.StatusPending {
					minDue(name, fromMicros(due))
				}
			}
			err = rows.Err()
			rows.Close()
			if err != nil {
				return false, err
			}
		}
	}
	return maintained, nil
}

// topicCountsNow is CountTopics and TopicStats' common part: counts per
// (topic, status) and each topic's earliest pending due.
func (s *Store) topicCountsNow(ctx context.Context, topic string) (map[string]map[task.Status]int64, map[string]time.Time, error) {
	counts := map[string]map[task.Status]int64{}
	oldest := map[string]time.Time{}
	earlier := func(tp string, due time.Time) {
		if o, ok := oldest[tp]; !ok || due.Before(o) {
			oldest[tp] = due
		}
	}
	maintained, err := s.countsByTopic(ctx, topic, func(tp string, st task.Status, n int64) {
		m := counts[tp]
		if m == nil {
			m = map[task.Status]int64{}
			counts[tp] = m
		}
		m[st] += n
	}, earlier)
	if err != nil {
		return nil, nil, err
	}
	for tp, m := range counts {
		for st, n := range m {
			if n == 0 {
				delete(m, st)
			}
		}
		if len(m) == 0 {
			delete(counts, tp)
		}
	}
	if maintained {
		want := map[string]bool{}
		rows := map[string]int64{}
		for tp, m := range counts {
			if m[task.StatusPending] > 0 {
				want[tp] = true
			}
			for _, n := range m {
				rows[tp] += n
			}
		}
		if err := s.oldestPending(ctx, want, rows, time.Now(), earlier); err != nil {
			return nil, nil, err
		}
	}
	return counts, oldest, nil
}

// countTopicsMaintained is CountTopics over the maintained counts.
func (s *Store) countTopicsMaintained(ctx context.Context) ([]store.TopicCount, error) {
	counts, oldest, err := s.topicCountsNow(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("count topics: %w", err)
	}
	var out []store.TopicCount
	for tp, m := range counts {
		for st, n := range m {
			tc := store.TopicCount{Topic: tp, Status: st, N: n}
			if st == task.StatusPending {
				tc.MinDue = oldest[tp]
			}
			out = append(out, tc)
		}
	}
	slices.SortFunc(out, func(a, b store.TopicCount) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Status) - int(b.Status)
	})
	return out, nil
}
