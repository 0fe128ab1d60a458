package sqlstore

// Schema version 25 (SQLite, PostgreSQL): the pending tasks per topic and
// hour of due time, maintained by the writes like the per-topic counts
// (counts.go), so that the console's Coming up over a day or a week reads
// a few thousand counter rows instead of counting every pending task in
// range. Counting a week of 3.5 M pending tasks (10 M rows) took ~5 s of
// PostgreSQL CPU per count (0.33 s per table, bound by the aggregation,
// not by the index read) and ~1 s on SQLite, and the console recounts
// every few seconds while the page is open, slowing the other pages
// (PostgreSQL p99 up to 155 ms).
//
//   - ontime_due_counts (hour, topic, n): hour is due_at (µs) divided by
//     an hour, so any range whose buckets are whole hours aligned on the
//     hour (the console's day and week) is a sum of its rows. Ranges cut
//     finer (the hour, six hours) are counted from the task tables as
//     before: they hold a few hours' tasks.
//   - SQLite: row triggers, only for rows that are or were pending (a
//     claim moves a row out; a start or an outcome does not fire them).
//   - PostgreSQL: the counts' statement functions (ontime_count_ins/del/
//     upd) append a delta per (hour, topic) and statement to
//     ontime_due_deltas as well, in the same call; FoldCounts folds them.
//   - MariaDB counts when asked, as for the topic counts.
//
// A counter that reaches 0 stays until its hour has passed: FoldCounts
// drops those of past hours once an hour (sweepDue), so the table
// holds about topics × hours with pending tasks.

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ontimehq/ontime/internal/task"
)

// dueHour is the counters' bucket width, in µs (due_at's unit).
const dueHour = int64(time.Hour / time.Microsecond)

var dueHourSQL = strconv.FormatInt(dueHour, 10)

// migrateDueCounts is schema step 25: the due counters, their triggers
// (SQLite) or the counts' functions that append to them (PostgreSQL), and
// a first count, in one transaction that keeps the task tables' writers
// out, so none is missed or counted twice.
func (s *Store) migrateDueCounts(ctx context.Context, c *sql.Conn) error {
	if !s.maintainsCounts() {
		return nil
	}
	var stmts []string
	switch s.d.name {
	case "sqlite":
		stmts = append(stmts, `CREATE TABLE IF NOT EXISTS ontime_due_counts (hour INTEGER NOT NULL, topic TEXT NOT NULL, n INTEGER NOT NULL, PRIMARY KEY (hour, topic)) WITHOUT ROWID`)
		for _, t := range s.names {
			stmts = append(stmts, liteDueTriggers(t)...)
		}
	case "postgres":
		stmts = append(stmts,
			`CREATE TABLE IF NOT EXISTS ontime_due_counts (hour BIGINT NOT NULL, topic TEXT COLLATE "C" NOT NULL, n BIGINT NOT NULL, PRIMARY KEY (hour, topic))`,
			// No key: a fold takes every row it sees, a reader sums them,
			// and a statement over a spread batch appends a row per task
			// (no sequence, no index entry to pay for).
			`CREATE TABLE IF NOT EXISTS ontime_due_deltas (hour BIGINT NOT NULL, topic TEXT COLLATE "C" NOT NULL, d BIGINT NOT NULL)`)
		stmts = append(stmts, pgCountFunctions...)
	}
	return migrateCounting(ctx, c, "due counts", stmts, s.recountDueTx)
}

// pgCountFunctions are the PostgreSQL statement functions behind the task
// tables' count triggers (created by step 20): the topic counts' delta
// and, since step 25, the due counts' delta of the same statement.
var pgCountFunctions = []string{
	`CREATE OR REPLACE FUNCTION ontime_count_ins() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
		INSERT INTO ontime_count_deltas (topic, status, d) SELECT topic, status, COUNT(*) FROM ontime_new GROUP BY topic, status;
		INSERT INTO ontime_due_deltas (hour, topic, d) SELECT due_at / ` + dueHourSQL + `, topic, COUNT(*) FROM ontime_new WHERE status = 0 GROUP BY 1, 2;
		RETURN NULL; END $$`,
	`CREATE OR REPLACE FUNCTION ontime_count_del() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
		INSERT INTO ontime_count_deltas (topic, status, d) SELECT topic, status, -COUNT(*) FROM ontime_old GROUP BY topic, status;
		INSERT INTO ontime_due_deltas (hour, topic, d) SELECT due_at / ` + dueHourSQL + `, topic, -COUNT(*) FROM ontime_old WHERE status = 0 GROUP BY 1, 2;
		RETURN NULL; END $$`,
	// A statement that moves no pending row between hours or topics, or
	// in or out of pending (a start, an outcome, a lease renewal),
	// appends nothing.
	`CREATE OR REPLACE FUNCTION ontime_count_upd() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
		INSERT INTO ontime_count_deltas (topic, status, d)
			SELECT topic, status, SUM(d) FROM (SELECT topic, status, 1 AS d FROM ontime_new UNION ALL SELECT topic, status, -1 FROM ontime_old) x
			GROUP BY topic, status HAVING SUM(d) <> 0;
		INSERT INTO ontime_due_deltas (hour, topic, d)
			SELECT hour, topic, SUM(d) FROM (SELECT due_at / ` + dueHourSQL + ` AS hour, topic, 1 AS d FROM ontime_new WHERE status = 0
				UNION ALL SELECT due_at / ` + dueHourSQL + `, topic, -1 FROM ontime_old WHERE status = 0) x
			GROUP BY hour, topic HAVING SUM(d) <> 0;
		RETURN NULL; END $$`,
}

// liteDueTriggers are SQLite's due-count triggers on task table t. Each
// fires only for rows that are, or were, pending.
func liteDueTriggers(t string) []string {
	return []string{
		`CREATE TRIGGER IF NOT EXISTS ` + t + `_due_ins AFTER INSERT ON ` + t + ` WHEN new.status = 0 BEGIN
			INSERT INTO ontime_due_counts (hour, topic, n) VALUES (new.due_at / ` + dueHourSQL + `, new.topic, 1)
			ON CONFLICT (hour, topic) DO UPDATE SET n = n + 1; END`,
		`CREATE TRIGGER IF NOT EXISTS ` + t + `_due_del AFTER DELETE ON ` + t + ` WHEN old.status = 0 BEGIN
			UPDATE ontime_due_counts SET n = n - 1 WHERE hour = old.due_at / ` + dueHourSQL + ` AND topic = old.topic; END`,
		`CREATE TRIGGER IF NOT EXISTS ` + t + `_due_upd AFTER UPDATE OF status, topic, due_at ON ` + t + `
			WHEN (old.status = 0 OR new.status = 0) AND (old.status <> new.status OR old.topic <> new.topic
				OR old.due_at / ` + dueHourSQL + ` <> new.due_at / ` + dueHourSQL + `) BEGIN
			INSERT INTO ontime_due_counts (hour, topic, n)
				SELECT new.due_at / ` + dueHourSQL + `, new.topic, 1 WHERE new.status = 0
				UNION ALL SELECT old.due_at / ` + dueHourSQL + `, old.topic, -1 WHERE old.status = 0
			ON CONFLICT (hour, topic) DO UPDATE SET n = n + excluded.n; END`,
	}
}

// recountDueTx replaces tx's database's due counts by a count of its task
// tables. The caller's transaction keeps writers out (recountTx).
func (s *Store) recountDueTx(ctx context.Context, tx *sql.Tx) error {
	var stmts []string
	if s.d.name == "postgres" {
		stmts = append(stmts, `LOCK TABLE `+strings.Join(s.names, ", ")+` IN SHARE MODE`, `DELETE FROM ontime_due_deltas`)
	}
	stmts = append(stmts, `DELETE FROM ontime_due_counts`)
	for _, t := range s.names {
		stmts = append(stmts, `INSERT INTO ontime_due_counts (hour, topic, n) SELECT due_at / `+dueHourSQL+`, topic, COUNT(*) FROM `+t+`
			WHERE status = `+strconv.Itoa(int(task.StatusPending))+` GROUP BY 1, 2
			ON CONFLICT (hour, topic) DO UPDATE SET n = ontime_due_counts.n + excluded.n`)
	}
	for _, q := range stmts {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("recount due: %w", err)
		}
	}
	return nil
}

// foldDueTx folds PostgreSQL's due deltas into the counters, in the
// counts' fold transaction (its advisory lock held), and returns how many
// it folded.
func foldDueTx(ctx context.Context, tx *sql.Tx) (int64, error) {
	var n int64
	err := tx.QueryRowContext(ctx, `WITH gone AS (DELETE FROM ontime_due_deltas RETURNING hour, topic, d),
		summed AS (SELECT hour, topic, SUM(d) AS d, COUNT(*) AS c FROM gone GROUP BY hour, topic),
		folded AS (INSERT INTO ontime_due_counts (hour, topic, n) SELECT hour, topic, d FROM summed
			ON CONFLICT (hour, topic) DO UPDATE SET n = ontime_due_counts.n + excluded.n)
		SELECT COALESCE(SUM(c), 0) FROM summed`).Scan(&n)
	return n, err
}

// dueSweeps remembers, per database, the hour its zero counters were last
// dropped.
type dueSweeps struct {
	mu   sync.Mutex
	last map[int]int64
}

// swept reports whether database db's spent counters were dropped in hour.
func (d *dueSweeps) swept(db int, hour int64) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.last[db] == hour
}

func (d *dueSweeps) mark(db int, hour int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.last == nil {
		d.last = map[int]int64{}
	}
	d.last[db] = hour
}

// sweepDue drops database db's counters of past hours that reached 0, at
// most once an hour per database (a counter reaches 0 when its hour's
// tasks are claimed, so each passing hour leaves a row per topic).
func (s *Store) sweepDue(ctx context.Context, db int, tx *sql.Tx, now time.Time) error {
	hour := micros(now) / dueHour
	if s.dueSwept.swept(db, hour) {
		return nil
	}
	if _, err := tx.ExecContext(ctx, s.d.rebind(`DELETE FROM ontime_due_counts WHERE hour < ? AND n = 0`), hour); err != nil {
		return fmt.Errorf("sweep due counts: %w", err)
	}
	s.dueSwept.mark(db, hour)
	return nil
}

// sweepLite is FoldCounts on SQLite: no deltas to fold, the zero
// counters of past hours to drop (sweepDue), in a transaction of the
// writer only in the first fold of each hour.
func (s *Store) sweepLite(ctx context.Context) error {
	now := time.Now()
	for db := range s.w {
		if s.dueSwept.swept(db, micros(now)/dueHour) {
			continue
		}
		tx, err := s.w[db].BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if err := s.sweepDue(ctx, db, tx, now); err != nil {
			_ = tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	return nil
}

// maintainedDue reads database db's due counters for the hours
// [from, to) into add (hour, topic, n): totals plus unfolded deltas, in
// one snapshot. ok is false when db's must be counted from its rows
// (MariaDB, a cleanup under way).
func (s *Store) maintainedDue(ctx context.Context, db int, from, to int64, add func(hour int64, topic string, n int64)) (ok bool, err error) {
	if !s.maintainsCounts() || s.owned(db) != "" {
		return false, nil
	}
	q := `SELECT hour, topic, n FROM ontime_due_counts WHERE hour >= ? AND hour < ? AND n <> 0`
	args := []any{from, to}
	if s.d.name == "postgres" {
		q = `SELECT hour, topic, SUM(n) FROM (SELECT hour, topic, n FROM ontime_due_counts WHERE hour >= $1 AND hour < $2
			UNION ALL SELECT hour, topic, d FROM ontime_due_deltas WHERE hour >= $1 AND hour < $2) x
			GROUP BY hour, topic HAVING SUM(n) <> 0`
	}
	rows, err := s.r[db].QueryContext(ctx, s.d.rebind(q), args...)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	for rows.Next() {
		var hour, n int64
		var topic string
		if err := rows.Scan(&hour, &topic, &n); err != nil {
			return false, err
		}
		add(hour, topic, n)
	}
	return true, rows.Err()
}
