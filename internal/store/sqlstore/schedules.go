package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// Schedules (store.Schedule; the schedule stage's Store) live in ontime_schedules, one row per
// schedule, in the first database; times are Unix microseconds, like the
// tasks'. The cursor columns (cursor_at, applied, made_topic) move only by
// compare-and-set, which is what keeps two nodes from both making a fire
// time. rev grows on every write so that MySQL, which counts changed rather
// than matched rows, reports every match.

// createSchedules is schema version 5, per engine.
var createSchedules = map[string][]string{
	"sqlite": {`CREATE TABLE IF NOT EXISTS ontime_schedules (
		name TEXT NOT NULL PRIMARY KEY,
		cron TEXT NOT NULL,
		time_zone TEXT NOT NULL,
		topic TEXT NOT NULL,
		payload BLOB NOT NULL,
		target TEXT NOT NULL,
		max_attempts INTEGER NOT NULL,
		misfire TEXT NOT NULL,
		paused INTEGER NOT NULL,
		version INTEGER NOT NULL,
		cursor_at INTEGER NOT NULL,
		applied INTEGER NOT NULL,
		made_topic TEXT NOT NULL,
		created_at INTEGER NOT NULL,
		updated_at INTEGER NOT NULL,
		rev INTEGER NOT NULL DEFAULT 0
	)`},
	"mysql": {`CREATE TABLE IF NOT EXISTS ontime_schedules (
		name VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
		cron VARCHAR(255) NOT NULL,
		time_zone VARCHAR(64) NOT NULL,
		topic VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
		payload MEDIUMBLOB NOT NULL,
		target VARCHAR(2048) NOT NULL,
		max_attempts INT NOT NULL,
		misfire VARCHAR(16) NOT NULL,
		paused TINYINT NOT NULL,
		version BIGINT NOT NULL,
		cursor_at BIGINT NOT NULL,
		applied BIGINT NOT NULL,
		made_topic VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
		created_at BIGINT NOT NULL,
		updated_at BIGINT NOT NULL,
		rev BIGINT NOT NULL DEFAULT 0
	) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`},
	"postgres": {`CREATE TABLE IF NOT EXISTS ontime_schedules (
		name TEXT COLLATE "C" NOT NULL PRIMARY KEY,
		cron TEXT NOT NULL,
		time_zone TEXT NOT NULL,
		topic TEXT COLLATE "C" NOT NULL,
		payload BYTEA NOT NULL,
		target TEXT NOT NULL,
		max_attempts INT NOT NULL,
		misfire TEXT NOT NULL,
		paused SMALLINT NOT NULL,
		version BIGINT NOT NULL,
		cursor_at BIGINT NOT NULL,
		applied BIGINT NOT NULL,
		made_topic TEXT COLLATE "C" NOT NULL,
		created_at BIGINT NOT NULL,
		updated_at BIGINT NOT NULL,
		rev BIGINT NOT NULL DEFAULT 0
	)`},
}

const scheduleCols = `name, cron, time_zone, topic, payload, target, max_attempts, misfire, paused, version, cursor_at, applied, made_topic, created_at, updated_at`

// schedDB is the pool schedules are written on; schedReadDB the one they
// are read on (SQLite: not the one writer connection, which every node's
// once-a-second read would otherwise queue behind the pipeline's writes).
func (s *Store) schedDB() *sql.DB     { return s.w[0] }
func (s *Store) schedReadDB() *sql.DB { return s.r[0] }

func scanSchedule(sc scanner) (store.Schedule, error) {
	var r store.Schedule
	var misfire string
	var paused int
	var cursor, created, updated int64
	if err := sc.Scan(&r.Name, &r.Cron, &r.TimeZone, &r.Task.Topic, &r.Task.Payload, &r.Task.Target, &r.Task.MaxAttempts,
		&misfire, &paused, &r.Version, &cursor, &r.Applied, &r.MadeTopic, &created, &updated); err != nil {
		return r, err
	}
	r.Misfire, r.Paused = store.Misfire(misfire), paused != 0
	r.Cursor, r.CreatedAt, r.UpdatedAt = time.UnixMicro(cursor).UTC(), time.UnixMicro(created).UTC(), time.UnixMicro(updated).UTC()
	return r, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Schedules lists every schedule by name.
func (s *Store) Schedules(ctx context.Context) (_ []store.Schedule, err error) {
	defer classify(&err)
	rows, err := s.schedReadDB().QueryContext(ctx, `SELECT `+scheduleCols+` FROM ontime_schedules ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("schedules: %w", err)
	}
	defer rows.Close()
	var out []store.Schedule
	for rows.Next() {
		r, err := scanSchedule(rows)
		if err != nil {
			return nil, fmt.Errorf("schedules: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("schedules: %w", err)
	}
	return out, nil
}

// Schedule returns one schedule, or store.ErrScheduleNotFound.
func (s *Store) Schedule(ctx context.Context, name string) (_ store.Schedule, err error) {
	defer classify(&err)
	r, err := scanSchedule(s.schedReadDB().QueryRowContext(ctx, s.d.rebind(`SELECT `+scheduleCols+` FROM ontime_schedules WHERE name = ?`), name))
	if errors.Is(err, sql.ErrNoRows) {
		return r, store.ErrScheduleNotFound
	}
	if err != nil {
		return r, fmt.Errorf("schedule %s: %w", name, err)
	}
	return r, nil
}

// CreateSchedule inserts r, or answers store.ErrScheduleExists.
func (s *Store) CreateSchedule(ctx context.Context, r store.Schedule) (err error) {
	defer classify(&err)
	q := `INSERT INTO ontime_schedules (` + scheduleCols + `) VALUES (` + placeholders(15) + `)`
	if s.d.name == "mysql" {
		q += ` ON DUPLICATE KEY UPDATE name = name`
	} else {
		q += ` ON CONFLICT (name) DO NOTHING`
	}
	res, err := s.schedDB().ExecContext(ctx, s.d.rebind(q), r.Name, r.Cron, r.TimeZone, r.Task.Topic, r.Task.Payload, r.Task.Target,
		r.Task.MaxAttempts, string(r.Misfire), boolInt(r.Paused), r.Version, r.Cursor.UnixMicro(), r.Applied, r.MadeTopic,
		r.CreatedAt.UnixMicro(), r.UpdatedAt.UnixMicro())
	if err != nil {
		return fmt.Errorf("create schedule: %w", err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return store.ErrScheduleExists
	}
	return nil
}

// UpdateSchedule writes r's definition, version and updated_at where the
// row's version is version, raising its cursor to r.Cursor when later.
func (s *Store) UpdateSchedule(ctx context.Context, r store.Schedule, version int64) (_ bool, err error) {
	defer classify(&err)
	c := r.Cursor.UnixMicro()
	if r.Cursor.IsZero() {
		c = 0
	}
	res, err := s.schedDB().ExecContext(ctx, s.d.rebind(`UPDATE ontime_schedules SET cron = ?, time_zone = ?, topic = ?, payload = ?,
		target = ?, max_attempts = ?, misfire = ?, paused = ?, version = ?, updated_at = ?,
		cursor_at = CASE WHEN cursor_at < ? THEN ? ELSE cursor_at END, rev = rev + 1
		WHERE name = ? AND version = ?`),
		r.Cron, r.TimeZone, r.Task.Topic, r.Task.Payload, r.Task.Target, r.Task.MaxAttempts, string(r.Misfire), boolInt(r.Paused),
		r.Version, r.UpdatedAt.UnixMicro(), c, c, r.Name, version)
	if err != nil {
		return false, fmt.Errorf("update schedule %s: %w", r.Name, err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// DeleteSchedule deletes a schedule; false when there was none.
func (s *Store) DeleteSchedule(ctx context.Context, name string) (_ bool, err error) {
	defer classify(&err)
	res, err := s.schedDB().ExecContext(ctx, s.d.rebind(`DELETE FROM ontime_schedules WHERE name = ?`), name)
	if err != nil {
		return false, fmt.Errorf("delete schedule %s: %w", name, err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// AdvanceSchedule is the cursor's compare-and-set: it writes to where the
// row still has this version and the progress from.
func (s *Store) AdvanceSchedule(ctx context.Context, name string, version int64, from, to store.ScheduleProgress) (_ bool, err error) {
	defer classify(&err)
	res, err := s.schedDB().ExecContext(ctx, s.d.rebind(`UPDATE ontime_schedules SET cursor_at = ?, applied = ?, made_topic = ?, rev = rev + 1
		WHERE name = ? AND version = ? AND cursor_at = ? AND applied = ? AND made_topic = ?`),
		to.Cursor.UnixMicro(), to.Applied, to.MadeTopic, name, version, from.Cursor.UnixMicro(), from.Applied, from.MadeTopic)
	if err != nil {
		return false, fmt.Errorf("advance schedule %s: %w", name, err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

func withdrawQuery(t string) string {
	return `UPDATE ` + t + ` SET status = ?, last_error = ?, task_key = NULL, owner = NULL, lease_until = 0, token = 0, updated_at = ?
		WHERE topic = ? AND task_key >= ? AND task_key < ? AND status IN (?, ?) AND status < 3 AND due_at > ?`
}

// WithdrawFires cancels the pending and claimed tasks of topic whose keys
// are in [lo, hi) (a schedule's fire times: schedule.KeyRange) and due
// after after, in every task table: a range on the (topic, task_key) index
// per table. Each ends cancelled with reason as its last error, found by
// its id like any cancelled task and removed by retention like one; it
// gives up its key (task_key NULL), which the key hold would otherwise
// keep from the fire time's new task for retention.key_hold — a changed
// definition makes its unchanged fire times again under the same keys, and
// a schedule deleted and created again makes the same keys. Rows a node
// holds in its hot tier are cancelled too; starting them then matches no
// claimed row and does nothing.
func (s *Store) WithdrawFires(ctx context.Context, topic, lo, hi string, after time.Time, reason string) (_ int64, err error) {
	defer classify(&err)
	var total int64
	now := time.Now().UnixMicro()
	for db := range s.w {
		for _, t := range s.names {
			// A deadlock with a claim of the same rows is retried: one
			// statement, so a retry does not count a row twice.
			var n int64
			err := withRetry(ctx, func() error {
				// While an expansion's cleanup runs, the copies left
				// behind are not this database's (owned): the twin's row
				// is the task, withdrawn there and counted once.
				res, err := s.w[db].ExecContext(ctx, s.d.rebind(withdrawQuery(t)+s.owned(db)), int(task.StatusCancelled), truncate(reason), now,
					topic, lo, hi, int(task.StatusPending), int(task.StatusClaimed), after.UnixMicro())
				if err != nil {
					return err
				}
				n, err = res.RowsAffected()
				return err
			})
			if err != nil {
				return total, fmt.Errorf("withdraw fires %s..%s: %w", lo, hi, err)
			}
			total += n
		}
	}
	return total, nil
}
