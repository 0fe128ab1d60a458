package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/ontimehq/ontime/internal/store"
)

// The scan jobs' state (store.JobFlags, JobItem and JobRun: what the job
// stage's scanjob.State asks for), in the first database beside the
// coordinator's (schema version 6); times are Unix microseconds.
//
//	ontime_job_flags  job → paused, trigger_seq (cluster-wide :pause, :trigger)
//	ontime_job_items  (job, item) → holder node and fence token, the
//	                  unfinished run and its cursor, last fire time, the
//	                  first take (created_at, schema version 9)
//	ontime_job_runs   one row per run of one item; (job, started_at) for
//	                  the newest-first listing, ended_at for retention
//
// Every write of an item's progress is fenced by its token in the same
// statement (version changes on every write so that MySQL, which counts
// changed rather than matched rows, reports the match).

var createJobs = map[string][]string{
	"sqlite": {
		`CREATE TABLE IF NOT EXISTS ontime_job_flags (job TEXT NOT NULL PRIMARY KEY, paused INTEGER NOT NULL DEFAULT 0, trigger_seq INTEGER NOT NULL DEFAULT 0)`,
		`CREATE TABLE IF NOT EXISTS ontime_job_items (job TEXT NOT NULL, item TEXT NOT NULL, node_id TEXT NOT NULL, token INTEGER NOT NULL,
			run_id TEXT NOT NULL DEFAULT '', cursor_val TEXT NOT NULL DEFAULT '', last_fire INTEGER NOT NULL DEFAULT 0, version INTEGER NOT NULL DEFAULT 0,
			PRIMARY KEY (job, item))`,
		`CREATE TABLE IF NOT EXISTS ontime_job_runs (id TEXT NOT NULL PRIMARY KEY, job TEXT NOT NULL, item TEXT NOT NULL, node_id TEXT NOT NULL,
			trig TEXT NOT NULL, fire_at INTEGER NOT NULL, started_at INTEGER NOT NULL, ended_at INTEGER NOT NULL DEFAULT 0,
			fetched INTEGER NOT NULL DEFAULT 0, processed INTEGER NOT NULL DEFAULT 0, failed INTEGER NOT NULL DEFAULT 0, lefts INTEGER NOT NULL DEFAULT 0,
			cursor_val TEXT NOT NULL DEFAULT '', status TEXT NOT NULL, error TEXT NOT NULL DEFAULT '')`,
		`CREATE INDEX IF NOT EXISTS ontime_job_runs_job ON ontime_job_runs (job, started_at)`,
		`CREATE INDEX IF NOT EXISTS ontime_job_runs_ended ON ontime_job_runs (ended_at)`,
	},
	"mysql": {
		`CREATE TABLE IF NOT EXISTS ontime_job_flags (job VARCHAR(64) NOT NULL PRIMARY KEY, paused TINYINT NOT NULL DEFAULT 0, trigger_seq BIGINT NOT NULL DEFAULT 0)
			ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`,
		`CREATE TABLE IF NOT EXISTS ontime_job_items (job VARCHAR(64) NOT NULL, item VARCHAR(64) NOT NULL, node_id VARCHAR(128) NOT NULL, token BIGINT NOT NULL,
			run_id VARCHAR(32) NOT NULL DEFAULT '', cursor_val VARCHAR(1024) NOT NULL DEFAULT '', last_fire BIGINT NOT NULL DEFAULT 0, version BIGINT NOT NULL DEFAULT 0,
			PRIMARY KEY (job, item)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`,
		`CREATE TABLE IF NOT EXISTS ontime_job_runs (id VARCHAR(32) NOT NULL PRIMARY KEY, job VARCHAR(64) NOT NULL, item VARCHAR(64) NOT NULL, node_id VARCHAR(128) NOT NULL,
			trig VARCHAR(16) NOT NULL, fire_at BIGINT NOT NULL, started_at BIGINT NOT NULL, ended_at BIGINT NOT NULL DEFAULT 0,
			fetched BIGINT NOT NULL DEFAULT 0, processed BIGINT NOT NULL DEFAULT 0, failed BIGINT NOT NULL DEFAULT 0, lefts BIGINT NOT NULL DEFAULT 0,
			cursor_val VARCHAR(1024) NOT NULL DEFAULT '', status VARCHAR(16) NOT NULL, error VARCHAR(1024) NOT NULL DEFAULT '',
			KEY job_started (job, started_at), KEY ended (ended_at)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`,
	},
	"postgres": {
		`CREATE TABLE IF NOT EXISTS ontime_job_flags (job TEXT COLLATE "C" NOT NULL PRIMARY KEY, paused SMALLINT NOT NULL DEFAULT 0, trigger_seq BIGINT NOT NULL DEFAULT 0)`,
		`CREATE TABLE IF NOT EXISTS ontime_job_items (job TEXT COLLATE "C" NOT NULL, item TEXT COLLATE "C" NOT NULL, node_id TEXT NOT NULL, token BIGINT NOT NULL,
			run_id TEXT NOT NULL DEFAULT '', cursor_val TEXT NOT NULL DEFAULT '', last_fire BIGINT NOT NULL DEFAULT 0, version BIGINT NOT NULL DEFAULT 0,
			PRIMARY KEY (job, item))`,
		`CREATE TABLE IF NOT EXISTS ontime_job_runs (id TEXT COLLATE "C" NOT NULL PRIMARY KEY, job TEXT COLLATE "C" NOT NULL, item TEXT COLLATE "C" NOT NULL, node_id TEXT NOT NULL,
			trig TEXT NOT NULL, fire_at BIGINT NOT NULL, started_at BIGINT NOT NULL, ended_at BIGINT NOT NULL DEFAULT 0,
			fetched BIGINT NOT NULL DEFAULT 0, processed BIGINT NOT NULL DEFAULT 0, failed BIGINT NOT NULL DEFAULT 0, lefts BIGINT NOT NULL DEFAULT 0,
			cursor_val TEXT NOT NULL DEFAULT '', status TEXT NOT NULL, error TEXT NOT NULL DEFAULT '')`,
		`CREATE INDEX IF NOT EXISTS ontime_job_runs_job ON ontime_job_runs (job, started_at)`,
		`CREATE INDEX IF NOT EXISTS ontime_job_runs_ended ON ontime_job_runs (ended_at)`,
	},
}

// upsertFlag inserts a job's flags row when absent.
var insertFlagRow = map[string]string{
	"sqlite":   `INSERT INTO ontime_job_flags (job) VALUES (?) ON CONFLICT (job) DO NOTHING`,
	"postgres": `INSERT INTO ontime_job_flags (job) VALUES (?) ON CONFLICT (job) DO NOTHING`,
	"mysql":    `INSERT INTO ontime_job_flags (job) VALUES (?) ON DUPLICATE KEY UPDATE job = job`,
}

// insertItemRow makes an item's row when absent; created_at is the first
// take (schema version 9, jobs_created.go).
var insertItemRow = map[string]string{
	"sqlite":   `INSERT INTO ontime_job_items (job, item, node_id, token, created_at) VALUES (?, ?, '', 0, ?) ON CONFLICT (job, item) DO NOTHING`,
	"postgres": `INSERT INTO ontime_job_items (job, item, node_id, token, created_at) VALUES (?, ?, '', 0, ?) ON CONFLICT (job, item) DO NOTHING`,
	"mysql":    `INSERT INTO ontime_job_items (job, item, node_id, token, created_at) VALUES (?, ?, '', 0, ?) ON DUPLICATE KEY UPDATE job = job`,
}

// JobFlags reads every job's paused flag and trigger sequence.
func (s *Store) JobFlags(ctx context.Context) (_ map[string]store.JobFlags, err error) {
	defer classify(&err)
	rows, err := s.coordDB().QueryContext(ctx, `SELECT job, paused, trigger_seq FROM ontime_job_flags`)
	if err != nil {
		return nil, fmt.Errorf("job flags: %w", err)
	}
	defer rows.Close()
	out := map[string]store.JobFlags{}
	for rows.Next() {
		var job string
		var paused, seq int64
		if err := rows.Scan(&job, &paused, &seq); err != nil {
			return nil, fmt.Errorf("job flags: %w", err)
		}
		out[job] = store.JobFlags{Paused: paused != 0, TriggerSeq: seq}
	}
	return out, rows.Err()
}

func (s *Store) setFlag(ctx context.Context, job, set string, args ...any) error {
	if _, err := s.coordDB().ExecContext(ctx, s.d.rebind(insertFlagRow[s.d.name]), job); err != nil {
		return err
	}
	_, err := s.coordDB().ExecContext(ctx, s.d.rebind(`UPDATE ontime_job_flags SET `+set+` WHERE job = ?`), append(args, job)...)
	return err
}

// SetPaused pauses or resumes a job.
func (s *Store) SetPaused(ctx context.Context, job string, paused bool) (err error) {
	defer classify(&err)
	p := 0
	if paused {
		p = 1
	}
	if err := s.setFlag(ctx, job, `paused = ?`, p); err != nil {
		return fmt.Errorf("job pause: %w", err)
	}
	return nil
}

// RequestTrigger raises the job's trigger sequence.
func (s *Store) RequestTrigger(ctx context.Context, job string) (err error) {
	defer classify(&err)
	if err := s.setFlag(ctx, job, `trigger_seq = trigger_seq + 1`); err != nil {
		return fmt.Errorf("job trigger: %w", err)
	}
	return nil
}

// TakeItem makes node the item's holder under token and returns the state
// it found; a run of another node still marked running is marked lost.
func (s *Store) TakeItem(ctx context.Context, job, item, node string, token int64, now time.Time) (st store.JobItem, err error) {
	defer classify(&err)
	err = withRetry(ctx, func() error {
		tx, err := s.coordDB().BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, s.d.rebind(insertItemRow[s.d.name]), job, item, now.UnixMicro()); err != nil {
			return err
		}
		lock := ""
		if s.d.name != "sqlite" {
			lock = " FOR UPDATE"
		}
		var last, created int64
		st = store.JobItem{Job: job, Item: item}
		if err := tx.QueryRowContext(ctx, s.d.rebind(`SELECT node_id, token, run_id, cursor_val, last_fire, created_at FROM ontime_job_items WHERE job = ? AND item = ?`+lock), job, item).
			Scan(&st.Owner, &st.Token, &st.RunID, &st.Cursor, &last, &created); err != nil {
			return err
		}
		st.LastFire, st.Created = fromMicros(last), fromMicros(created)
		if _, err := tx.ExecContext(ctx, s.d.rebind(`UPDATE ontime_job_items SET node_id = ?, token = ?, version = version + 1 WHERE job = ? AND item = ?`),
			node, token, job, item); err != nil {
			return err
		}
		if st.RunID != "" {
			if _, err := tx.ExecContext(ctx, s.d.rebind(`UPDATE ontime_job_runs SET status = ?, ended_at = ? WHERE id = ? AND status = ? AND node_id <> ?`),
				store.RunLost, now.UnixMicro(), st.RunID, store.RunRunning, node); err != nil {
				return err
			}
		}
		return tx.Commit()
	})
	if err != nil {
		return st, fmt.Errorf("take job item %s/%s: %w", job, item, err)
	}
	return st, nil
}

// StartRun records r as the item's current run and inserts it, if token
// still holds the item.
func (s *Store) StartRun(ctx context.Context, r *store.JobRun, token int64) (held bool, err error) {
	defer classify(&err)
	fire := micros(r.FireAt)
	held, err = s.fencedItemWrite(ctx, `UPDATE ontime_job_items SET run_id = ?, cursor_val = ?,
			last_fire = CASE WHEN last_fire < ? THEN ? ELSE last_fire END, version = version + 1
			WHERE job = ? AND item = ? AND token = ?`, []any{r.ID, r.Cursor, fire, fire, r.Job, r.Item, token},
		`INSERT INTO ontime_job_runs (id, job, item, node_id, trig, fire_at, started_at, cursor_val, status)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, r.ID, r.Job, r.Item, r.Node, r.Trigger, fire, r.StartedAt.UnixMicro(), r.Cursor, r.Status)
	if err != nil {
		return false, fmt.Errorf("start job run: %w", err)
	}
	return held, nil
}

// SaveRun writes r's progress and the item's cursor, if token still holds
// the item; finished clears the item's current run.
func (s *Store) SaveRun(ctx context.Context, r *store.JobRun, token int64, finished bool) (held bool, err error) {
	defer classify(&err)
	errText := r.Error
	if len(errText) > 1000 {
		errText = strings.ToValidUTF8(errText[:1000], "")
	}
	runID := r.ID
	if finished {
		runID = ""
	}
	held, err = s.fencedItemWrite(ctx, `UPDATE ontime_job_items SET run_id = ?, cursor_val = ?, version = version + 1
			WHERE job = ? AND item = ? AND token = ?`, []any{runID, r.Cursor, r.Job, r.Item, token},
		`UPDATE ontime_job_runs SET fetched = ?, processed = ?, failed = ?, lefts = ?,
			cursor_val = ?, status = ?, error = ?, ended_at = ? WHERE id = ?`,
		r.Fetched, r.Processed, r.Failed, r.Left, r.Cursor, r.Status, errText, micros(r.EndedAt), r.ID)
	if err != nil {
		return false, fmt.Errorf("save job run: %w", err)
	}
	return held, nil
}

// fencedItemWrite runs, in one transaction on the coordinator's database,
// the item update itemQ (fenced: it names the item and its token, so it
// changes one row only while the token holds the item) and then, if it
// did, runQ on the item's run. held says whether the token still held.
func (s *Store) fencedItemWrite(ctx context.Context, itemQ string, itemArgs []any, runQ string, runArgs ...any) (held bool, err error) {
	err = s.retryTx(ctx, 0, nil, func(tx *sql.Tx) error {
		held = false
		res, err := tx.ExecContext(ctx, s.d.rebind(itemQ), itemArgs...)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return nil
		}
		if _, err := tx.ExecContext(ctx, s.d.rebind(runQ), runArgs...); err != nil {
			return err
		}
		held = true
		return nil
	})
	return held, err
}

// JobItems lists the job's item states by item.
func (s *Store) JobItems(ctx context.Context, job string) (_ []store.JobItem, err error) {
	defer classify(&err)
	rows, err := s.coordDB().QueryContext(ctx, s.d.rebind(`SELECT item, node_id, token, run_id, cursor_val, last_fire, created_at FROM ontime_job_items WHERE job = ? ORDER BY item`), job)
	if err != nil {
		return nil, fmt.Errorf("job items: %w", err)
	}
	defer rows.Close()
	var out []store.JobItem
	for rows.Next() {
		st := store.JobItem{Job: job}
		var last, created int64
		if err := rows.Scan(&st.Item, &st.Owner, &st.Token, &st.RunID, &st.Cursor, &last, &created); err != nil {
			return nil, fmt.Errorf("job items: %w", err)
		}
		st.LastFire, st.Created = fromMicros(last), fromMicros(created)
		out = append(out, st)
	}
	return out, rows.Err()
}

// Runs lists the job's latest runs, newest first.
func (s *Store) Runs(ctx context.Context, job, item string, limit int) (_ []store.JobRun, err error) {
	defer classify(&err)
	q := `SELECT id, job, item, node_id, trig, fire_at, started_at, ended_at, fetched, processed, failed, lefts, cursor_val, status, error
		FROM ontime_job_runs WHERE job = ?`
	args := []any{job}
	if item != "" {
		q += ` AND item = ?`
		args = append(args, item)
	}
	q += ` ORDER BY started_at DESC, id DESC LIMIT ?`
	args = append(args, limit)
	rows, err := s.coordDB().QueryContext(ctx, s.d.rebind(q), args...)
	if err != nil {
		return nil, fmt.Errorf("job runs: %w", err)
	}
	defer rows.Close()
	var out []store.JobRun
	for rows.Next() {
		var r store.JobRun
		var fire, start, end int64
		if err := rows.Scan(&r.ID, &r.Job, &r.Item, &r.Node, &r.Trigger, &fire, &start, &end, &r.Fetched, &r.Processed,
			&r.Failed, &r.Left, &r.Cursor, &r.Status, &r.Error); err != nil {
			return nil, fmt.Errorf("job runs: %w", err)
		}
		r.FireAt, r.StartedAt, r.EndedAt = fromMicros(fire), fromMicros(start), fromMicros(end)
		out = append(out, r)
	}
	return out, rows.Err()
}

// DeleteRuns deletes runs that ended before cutoff, a thousand at a time.
func (s *Store) DeleteRuns(ctx context.Context, cutoff time.Time) (_ int64, err error) {
	defer classify(&err)
	var total int64
	for {
		var res sql.Result
		var err error
		if s.d.name == "mysql" {
			res, err = s.coordDB().ExecContext(ctx, `DELETE FROM ontime_job_runs WHERE ended_at > 0 AND ended_at < ? LIMIT 1000`, cutoff.UnixMicro())
		} else {
			res, err = s.coordDB().ExecContext(ctx, s.d.rebind(`DELETE FROM ontime_job_runs WHERE id IN
				(SELECT id FROM ontime_job_runs WHERE ended_at > 0 AND ended_at < ? LIMIT 1000)`), cutoff.UnixMicro())
		}
		if err != nil {
			return total, fmt.Errorf("delete job runs: %w", err)
		}
		n, _ := res.RowsAffected()
		total += n
		if n < 1000 {
			return total, nil
		}
	}
}
