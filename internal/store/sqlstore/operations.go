package sqlstore

// Bulk operations (schema version 16): ontime_operations, one row per
// operation in the first database, and ontime_operation_progress, one row
// per (operation, task table) in that table's database.
//
// An operation walks each task table by primary key in pages of a few
// hundred IDs. One page is one transaction in the table's database:
//
//  1. the progress row is moved on by compare-and-set (WHERE cursor = the
//     page's start): it is the page's lock, so two executors of one
//     operation (a node that lost its lease and does not know it yet)
//     never apply a page twice — the second finds the cursor moved and
//     writes nothing;
//  2. the page's last ID is read from the primary key alone (the next
//     `limit` IDs), so a page locks at most that many rows whatever the
//     filter matches;
//  3. the change is one statement over that ID range whose WHERE is the
//     filter and the statuses the action applies to: rows already changed
//     (by this page before a crash, or by anyone) no longer match;
//  4. the counts are added to the progress row.
//
// The page and its cursor commit together: killed at any point, an
// operation resumes at the first page not committed, and every matching
// row is changed exactly once. Rows created after the operation are never
// touched (created_at ≤ the operation's creation).
//
// No SQL is built from a request's strings: the filter's values are
// placeholders; the key prefix is compared with a prefix of the key of
// the same length (no LIKE, so % and _ are plain characters), the error
// substring with the engine's substring search.

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// createOperations makes the operation tables (schema version 16).
var createOperations = map[string][]string{
	"sqlite": {
		`CREATE TABLE IF NOT EXISTS ontime_operations (id TEXT NOT NULL PRIMARY KEY, action TEXT NOT NULL, filter_json TEXT NOT NULL,
			due_at INTEGER NOT NULL, shift INTEGER NOT NULL, dry_run INTEGER NOT NULL, state TEXT NOT NULL, error TEXT NOT NULL,
			pos TEXT NOT NULL, owner TEXT NOT NULL, lease_until INTEGER NOT NULL,
			created_at INTEGER NOT NULL, started_at INTEGER NOT NULL, finished_at INTEGER NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS ontime_operation_progress (op_id TEXT NOT NULL, tbl INTEGER NOT NULL, pos TEXT NOT NULL,
			matched INTEGER NOT NULL, changed INTEGER NOT NULL, pages INTEGER NOT NULL, done INTEGER NOT NULL, PRIMARY KEY (op_id, tbl))`,
	},
	"postgres": {
		`CREATE TABLE IF NOT EXISTS ontime_operations (id TEXT COLLATE "C" NOT NULL PRIMARY KEY, action TEXT NOT NULL, filter_json TEXT NOT NULL,
			due_at BIGINT NOT NULL, shift BIGINT NOT NULL, dry_run SMALLINT NOT NULL, state TEXT NOT NULL, error TEXT NOT NULL,
			pos TEXT NOT NULL, owner TEXT NOT NULL, lease_until BIGINT NOT NULL,
			created_at BIGINT NOT NULL, started_at BIGINT NOT NULL, finished_at BIGINT NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS ontime_operation_progress (op_id TEXT COLLATE "C" NOT NULL, tbl INT NOT NULL, pos TEXT COLLATE "C" NOT NULL,
			matched BIGINT NOT NULL, changed BIGINT NOT NULL, pages BIGINT NOT NULL, done SMALLINT NOT NULL, PRIMARY KEY (op_id, tbl))`,
	},
	"mysql": {
		`CREATE TABLE IF NOT EXISTS ontime_operations (id CHAR(26) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
			action VARCHAR(16) NOT NULL, filter_json TEXT NOT NULL, due_at BIGINT NOT NULL, shift BIGINT NOT NULL, dry_run TINYINT NOT NULL,
			state VARCHAR(16) NOT NULL, error VARCHAR(1024) NOT NULL, pos VARCHAR(64) NOT NULL, owner VARCHAR(128) NOT NULL,
			lease_until BIGINT NOT NULL, created_at BIGINT NOT NULL, started_at BIGINT NOT NULL, finished_at BIGINT NOT NULL)
			ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`,
		`CREATE TABLE IF NOT EXISTS ontime_operation_progress (op_id CHAR(26) CHARACTER SET ascii COLLATE ascii_bin NOT NULL, tbl INT NOT NULL,
			pos CHAR(26) CHARACTER SET ascii COLLATE ascii_bin NOT NULL, matched BIGINT NOT NULL, changed BIGINT NOT NULL,
			pages BIGINT NOT NULL, done TINYINT NOT NULL, PRIMARY KEY (op_id, tbl)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`,
	},
}

// migrateOperations is schema version 16: the operation tables in every
// database (the first one's ontime_operations is used), and the result
// column on every task table.
func (s *Store) migrateOperations(ctx context.Context, c *sql.Conn) error {
	for _, stmt := range createOperations[s.d.name] {
		if _, err := c.ExecContext(ctx, stmt); err != nil {
			return err
		}
	}
	typ := map[string]string{"sqlite": "BLOB NULL", "postgres": "BYTEA NULL", "mysql": "MEDIUMBLOB NULL"}[s.d.name]
	for _, t := range s.names {
		if err := s.addColumn(ctx, c, t, "result", typ); err != nil {
			return err
		}
	}
	return nil
}

// opFilterJSON is how a filter is kept in ontime_operations.filter.
type opFilterJSON struct {
	Topic         string   `json:"topic,omitempty"`
	Statuses      []string `json:"status,omitempty"`
	KeyPrefix     string   `json:"key_prefix,omitempty"`
	DueAfter      int64    `json:"due_after,omitempty"`
	DueBefore     int64    `json:"due_before,omitempty"`
	ErrorContains string   `json:"error_contains,omitempty"`
}

func encodeFilter(f store.OpFilter) string {
	j := opFilterJSON{Topic: f.Topic, KeyPrefix: f.KeyPrefix, DueAfter: micros(f.DueAfter), DueBefore: micros(f.DueBefore), ErrorContains: f.ErrorContains}
	for _, st := range f.Statuses {
		j.Statuses = append(j.Statuses, st.String())
	}
	b, _ := json.Marshal(j) // strings and numbers only: cannot fail
	return string(b)
}

func decodeFilter(s string) (store.OpFilter, error) {
	var j opFilterJSON
	if err := json.Unmarshal([]byte(s), &j); err != nil {
		return store.OpFilter{}, fmt.Errorf("operation filter %q: %w", s, err)
	}
	f := store.OpFilter{Topic: j.Topic, KeyPrefix: j.KeyPrefix, DueAfter: fromMicros(j.DueAfter), DueBefore: fromMicros(j.DueBefore), ErrorContains: j.ErrorContains}
	for _, name := range j.Statuses {
		st, err := task.ParseStatus(name)
		if err != nil {
			return store.OpFilter{}, err
		}
		f.Statuses = append(f.Statuses, st)
	}
	return f, nil
}

const opCols = `id, action, filter_json, due_at, shift, dry_run, state, error, pos, owner, lease_until, created_at, started_at, finished_at`

func scanOperation(sc scanner) (*store.Operation, error) {
	var op store.Operation
	var action, filter, state string
	var due, shift, dry, lease, created, started, finished int64
	if err := sc.Scan(&op.ID, &action, &filter, &due, &shift, &dry, &state, &op.Error, &op.Cursor, &op.Owner, &lease, &created, &started, &finished); err != nil {
		return nil, err
	}
	f, err := decodeFilter(filter)
	if err != nil {
		return nil, err
	}
	op.Action, op.Filter, op.State = store.OpAction(action), f, store.OpState(state)
	op.DueAt, op.Shift, op.DryRun = fromMicros(due), time.Duration(shift), dry != 0
	op.LeaseUntil, op.CreatedAt, op.StartedAt, op.FinishedAt = fromMicros(lease), fromMicros(created), fromMicros(started), fromMicros(finished)
	return &op, nil
}

// CreateOperation stores a new operation, pending.
func (s *Store) CreateOperation(ctx context.Context, op *store.Operation) (err error) {
	defer classify(&err)
	dry := 0
	if op.DryRun {
		dry = 1
	}
	_, err = s.execRetried(ctx, 0, s.d.rebind(`INSERT INTO ontime_operations (`+opCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, '', '', '', 0, ?, 0, 0)`),
		op.ID, string(op.Action), encodeFilter(op.Filter), micros(op.DueAt), int64(op.Shift), dry, string(store.OpPending), micros(op.CreatedAt))
	if err != nil {
		return fmt.Errorf("create operation: %w", err)
	}
	return nil
}

// Operation reads one operation with its progress summed over every
// database.
func (s *Store) Operation(ctx context.Context, id string) (_ *store.Operation, err error) {
	defer classify(&err)
	ops, err := s.readOperations(ctx, `SELECT `+opCols+` FROM ontime_operations WHERE id = ?`, id)
	if err != nil {
		return nil, err
	}
	if len(ops) == 0 {
		return nil, fmt.Errorf("%w: %s", store.ErrOperationNotFound, id)
	}
	return ops[0], nil
}

// Operations lists the newest operations first, up to limit.
func (s *Store) Operations(ctx context.Context, limit int) (_ []*store.Operation, err error) {
	defer classify(&err)
	return s.readOperations(ctx, `SELECT `+opCols+` FROM ontime_operations ORDER BY id DESC LIMIT `+strconv.Itoa(max(1, limit)))
}

func (s *Store) readOperations(ctx context.Context, q string, args ...any) ([]*store.Operation, error) {
	rows, err := s.w[0].QueryContext(ctx, s.d.rebind(q), args...)
	if err != nil {
		return nil, fmt.Errorf("operations: %w", err)
	}
	var ops []*store.Operation
	byID := map[string]*store.Operation{}
	for rows.Next() {
		op, err := scanOperation(rows)
		if err != nil {
			rows.Close()
			return nil, fmt.Errorf("operations: %w", err)
		}
		op.Tables = len(s.w) * len(s.names)
		ops = append(ops, op)
		byID[op.ID] = op
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("operations: %w", err)
	}
	if len(ops) == 0 {
		return nil, nil
	}
	ids := make([]any, len(ops))
	for i, op := range ops {
		ids[i] = op.ID
	}
	q = s.d.rebind(`SELECT op_id, SUM(matched), SUM(changed), SUM(done) FROM ontime_operation_progress WHERE op_id IN (` + placeholders(len(ids)) + `) GROUP BY op_id`)
	for db := range s.w {
		rows, err := s.w[db].QueryContext(ctx, q, ids...)
		if err != nil {
			return nil, fmt.Errorf("operations: progress: %w", err)
		}
		for rows.Next() {
			var id string
			var m, c, d int64
			if err := rows.Scan(&id, &m, &c, &d); err != nil {
				rows.Close()
				return nil, fmt.Errorf("operations: progress: %w", err)
			}
			op := byID[id]
			op.Matched += m
			op.Changed += c
			op.TablesDone += int(d)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("operations: progress: %w", err)
		}
	}
	return ops, nil
}

// TakeOperation gives owner the oldest unfinished operation whose lease
// has run out (or that owner holds already), leased until until; nil when
// there is none. Only a compare-and-set takes a lease, so one node runs an
// operation at a time.
func (s *Store) TakeOperation(ctx context.Context, owner string, now, until time.Time) (_ *store.Operation, err error) {
	defer classify(&err)
	var id string
	err = s.w[0].QueryRowContext(ctx, s.d.rebind(`SELECT id FROM ontime_operations WHERE state IN (?, ?) AND (lease_until < ? OR owner = ?) ORDER BY id LIMIT 1`),
		string(store.OpPending), string(store.OpRunning), micros(now), owner).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("take operation: %w", err)
	}
	n, err := s.execRetried(ctx, 0, s.d.rebind(`UPDATE ontime_operations SET state = ?, owner = ?, lease_until = ?,
		started_at = CASE WHEN started_at = 0 THEN ? ELSE started_at END
		WHERE id = ? AND state IN (?, ?) AND (lease_until < ? OR owner = ?)`),
		string(store.OpRunning), owner, micros(until), micros(now), id, string(store.OpPending), string(store.OpRunning), micros(now), owner)
	if err != nil {
		return nil, fmt.Errorf("take operation: %w", err)
	}
	if n != 1 {
		return nil, nil // taken by another node meanwhile
	}
	return s.Operation(ctx, id)
}

// RenewOperation extends owner's lease on operation id and records where
// its walk is; false when owner no longer holds it.
func (s *Store) RenewOperation(ctx context.Context, id, owner string, until time.Time, cursor string) (_ bool, err error) {
	defer classify(&err)
	n, err := s.execRetried(ctx, 0, s.d.rebind(`UPDATE ontime_operations SET lease_until = ?, pos = ? WHERE id = ? AND owner = ? AND state = ?`),
		micros(until), cursor, id, owner, string(store.OpRunning))
	if err != nil {
		return false, fmt.Errorf("renew operation %s: %w", id, err)
	}
	return n == 1, nil
}

// EndOperation records that owner finished operation id: state done or
// failed (with why); false when owner no longer holds it.
func (s *Store) EndOperation(ctx context.Context, id, owner string, state store.OpState, why string, now time.Time) (_ bool, err error) {
	defer classify(&err)
	n, err := s.execRetried(ctx, 0, s.d.rebind(`UPDATE ontime_operations SET state = ?, error = ?, finished_at = ?, lease_until = 0 WHERE id = ? AND owner = ? AND state = ?`),
		string(state), store.ErrorText(why), micros(now), id, owner, string(store.OpRunning))
	if err != nil {
		return false, fmt.Errorf("end operation %s: %w", id, err)
	}
	return n == 1, nil
}

// OperationTables is the number of task tables an operation walks: every
// table of every database, numbered db·tables + table.
func (s *Store) OperationTables() (databases, tables int) { return len(s.w), len(s.names) }

// errPageRace: the progress row moved under this page (another executor
// of the operation wrote it first); nothing was written.
var errPageRace = errors.New("operation page: the progress row moved meanwhile")

// OperationPage applies op to the next page of at most limit rows of task
// table table in database db, at now, and records it; see the top of the
// file. A table already walked answers Done with nothing changed.
func (s *Store) OperationPage(ctx context.Context, op *store.Operation, db, table, limit int, now time.Time) (_ store.OpPage, err error) {
	defer classify(&err)
	if db < 0 || db >= len(s.w) || table < 0 || table >= len(s.names) {
		return store.OpPage{}, fmt.Errorf("operation page: table %d/%d out of range", db, table)
	}
	limit = max(1, limit)
	for range 10 {
		cursor, done, err := s.progress(ctx, op.ID, db, table)
		if err != nil {
			return store.OpPage{}, err
		}
		if done {
			return store.OpPage{Cursor: cursor, Done: true}, nil
		}
		var pg store.OpPage
		gone := ""
		if op.Action == store.OpDelete && !op.DryRun {
			if gone, err = s.goneFilter(ctx); err != nil {
				return store.OpPage{}, err
			}
		}
		err = withRetry(ctx, func() error {
			var err error
			pg, err = s.page(ctx, op, db, table, cursor, limit, now, false, gone)
			if err != nil && s.d.name == "postgres" && op.Action == store.OpRequeue && uniqueViolation(err) {
				// Two dead tasks of one key in one page: row by row.
				pg, err = s.page(ctx, op, db, table, cursor, limit, now, true, gone)
			}
			return err
		})
		if errors.Is(err, errPageRace) {
			continue
		}
		if err != nil {
			return store.OpPage{}, fmt.Errorf("operation %s page on %d/%s: %w", op.ID, db, s.names[table], err)
		}
		return pg, nil
	}
	return store.OpPage{}, fmt.Errorf("operation %s page on %d/%s: %w", op.ID, db, s.names[table], errPageRace)
}

// progress reads (making it when absent) the progress row of op on one
// table.
func (s *Store) progress(ctx context.Context, op string, db, table int) (cursor string, done bool, err error) {
	q := s.d.rebind(`SELECT pos, done FROM ontime_operation_progress WHERE op_id = ? AND tbl = ?`)
	var d int
	err = s.w[db].QueryRowContext(ctx, q, op, table).Scan(&cursor, &d)
	if errors.Is(err, sql.ErrNoRows) {
		ins := `INSERT INTO ontime_operation_progress (op_id, tbl, pos, matched, changed, pages, done) VALUES (?, ?, '', 0, 0, 0, 0)`
		if s.d.name == "mysql" {
			ins += ` ON DUPLICATE KEY UPDATE op_id = op_id`
		} else {
			ins += ` ON CONFLICT (op_id, tbl) DO NOTHING`
		}
		if _, err := s.execRetried(ctx, db, s.d.rebind(ins), op, table); err != nil {
			return "", false, fmt.Errorf("operation progress: %w", err)
		}
		err = s.w[db].QueryRowContext(ctx, q, op, table).Scan(&cursor, &d)
	}
	if err != nil {
		return "", false, fmt.Errorf("operation progress: %w", err)
	}
	return cursor, d != 0, nil
}

// page is one page's transaction. perRow (PostgreSQL's requeue after a
// unique violation) updates the page's rows one by one, each under a
// savepoint, passing over those whose key a live task holds. gone, for a
// delete while an expansion copies, selects the rows noted as deleted
// (Store.goneFilter).
func (s *Store) page(ctx context.Context, op *store.Operation, db, table int, cursor string, limit int, now time.Time, perRow bool, gone string) (store.OpPage, error) {
	t := s.names[table]
	var pg store.OpPage
	err := s.writeTx(ctx, db, nil, func(tx *sql.Tx) error {
		// 1. The fence: the progress row is still where this page starts.
		res, err := tx.ExecContext(ctx, s.d.rebind(`UPDATE ontime_operation_progress SET pages = pages + 1 WHERE op_id = ? AND tbl = ? AND pos = ? AND done = 0`),
			op.ID, table, cursor)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return errPageRace
		}
		// 2. The page's last ID, from the primary key alone.
		var hi sql.NullString
		if err := tx.QueryRowContext(ctx, s.d.rebind(`SELECT MAX(id) FROM (SELECT id FROM `+t+` WHERE id > ? ORDER BY id LIMIT `+strconv.Itoa(limit)+`) p`),
			cursor).Scan(&hi); err != nil {
			return err
		}
		if !hi.Valid {
			pg = store.OpPage{Cursor: cursor, Done: true}
			_, err := tx.ExecContext(ctx, s.d.rebind(`UPDATE ontime_operation_progress SET done = 1 WHERE op_id = ? AND tbl = ?`), op.ID, table)
			return err
		}
		pg.Cursor = hi.String
		where, args := s.opWhere(op, cursor, hi.String)
		// While an expansion's cleanup runs, the copies left behind here
		// are not this database's: never counted or changed twice.
		where += s.owned(db)
		elig := op.Action.Eligible()
		eligIn := `status IN (` + placeholders(len(elig)) + `)`
		eligArgs := make([]any, len(elig))
		for i, st := range elig {
			eligArgs[i] = int(st)
		}
		// 3. Count what matches, and what the action applies to.
		var changeable int64
		if err := tx.QueryRowContext(ctx, s.d.rebind(`SELECT COUNT(*), COALESCE(SUM(CASE WHEN `+eligIn+` THEN 1 ELSE 0 END), 0) FROM `+t+` WHERE `+where),
			append(append([]any{}, eligArgs...), args...)...).Scan(&pg.Matched, &changeable); err != nil {
			return err
		}
		switch {
		case op.DryRun || changeable == 0:
			if op.DryRun {
				pg.Changed = changeable
			}
		case perRow:
			n, err := s.applyPerRow(ctx, tx, op, t, where+` AND `+eligIn, append(append([]any{}, args...), eligArgs...), now)
			if err != nil {
				return err
			}
			pg.Changed = n
		default:
			if gone != "" {
				if _, err := tx.ExecContext(ctx, s.d.rebind(`INSERT INTO ontime_expand_gone (id) SELECT id FROM `+t+` WHERE `+where+` AND `+eligIn+` AND `+gone),
					append(append([]any{}, args...), eligArgs...)...); err != nil {
					return err
				}
			}
			q, set := s.opChange(op, t, now)
			res, err := tx.ExecContext(ctx, s.d.rebind(q+` WHERE `+where+` AND `+eligIn+s.requeueGuard(op, t)), append(append(set, args...), eligArgs...)...)
			if err != nil {
				return err
			}
			pg.Changed, _ = res.RowsAffected()
		}
		// 4. The page is recorded with it.
		_, err = tx.ExecContext(ctx, s.d.rebind(`UPDATE ontime_operation_progress SET pos = ?, matched = matched + ?, changed = changed + ? WHERE op_id = ? AND tbl = ?`),
			hi.String, pg.Matched, pg.Changed, op.ID, table)
		return err
	})
	return pg, err
}

// applyPerRow updates the rows of where one at a time under savepoints
// (PostgreSQL), passing over unique violations; it returns how many it
// changed.
func (s *Store) applyPerRow(ctx context.Context, tx *sql.Tx, op *store.Operation, t, where string, args []any, now time.Time) (int64, error) {
	rows, err := tx.QueryContext(ctx, s.d.rebind(`SELECT id FROM `+t+` WHERE `+where+` ORDER BY id`), args...)
	if err != nil {
		return 0, err
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, err
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	var total int64
	for _, id := range ids {
		if _, err := tx.ExecContext(ctx, `SAVEPOINT op_row`); err != nil {
			return 0, err
		}
		q, set := s.opChange(op, t, now)
		res, err := tx.ExecContext(ctx, s.d.rebind(q+` WHERE id = ? AND `+where), append(append(set, id), args...)...)
		if err != nil {
			if !uniqueViolation(err) {
				return 0, err
			}
			if _, err := tx.ExecContext(ctx, `ROLLBACK TO SAVEPOINT op_row`); err != nil {
				return 0, err
			}
			continue
		}
		n, _ := res.RowsAffected()
		total += n
		if _, err := tx.ExecContext(ctx, `RELEASE SAVEPOINT op_row`); err != nil {
			return 0, err
		}
	}
	return total, nil
}

// opWhere is the page's range (lo, hi] and op's filter as a predicate on
// the task table's own columns, and its arguments.
func (s *Store) opWhere(op *store.Operation, lo, hi string) (string, []any) {
	f := op.Filter
	w := []string{`id > ?`, `id <= ?`, `created_at <= ?`}
	args := []any{lo, hi, micros(op.CreatedAt)}
	if f.Topic != "" {
		w, args = append(w, `topic = ?`), append(args, f.Topic)
	}
	if len(f.Statuses) > 0 {
		w = append(w, `status IN (`+placeholders(len(f.Statuses))+`)`)
		for _, st := range f.Statuses {
			args = append(args, int(st))
		}
	}
	if f.KeyPrefix != "" {
		// A prefix of the key, the prefix's length long: characters on
		// SQLite and PostgreSQL (text keys), bytes on MariaDB (VARBINARY).
		n := utf8.RuneCountInString(f.KeyPrefix)
		fn := `substr(task_key, 1, ?)`
		if s.d.name == "mysql" {
			n, fn = len(f.KeyPrefix), `LEFT(task_key, ?)`
		}
		w, args = append(w, fn+` = ?`), append(args, n, f.KeyPrefix)
	}
	if !f.DueAfter.IsZero() {
		w, args = append(w, `due_at >= ?`), append(args, micros(f.DueAfter))
	}
	if !f.DueBefore.IsZero() {
		w, args = append(w, `due_at < ?`), append(args, micros(f.DueBefore))
	}
	if f.ErrorContains != "" {
		// Substring search, case-sensitive on every engine (MariaDB's
		// task tables are utf8mb4_bin).
		switch s.d.name {
		case "mysql":
			w = append(w, `LOCATE(?, last_error) > 0`)
		case "postgres":
			w = append(w, `strpos(last_error, ?) > 0`)
		default:
			w = append(w, `instr(last_error, ?) > 0`)
		}
		args = append(args, f.ErrorContains)
	}
	return strings.Join(w, ` AND `), args
}

// opChange is op's statement up to its WHERE, and its SET values. Each
// writes what the single-task route writes: cancel as Cancel (updated_at
// is when the task ended, from which the key hold counts), requeue as
// Requeue, reschedule as Update's due time.
func (s *Store) opChange(op *store.Operation, t string, now time.Time) (string, []any) {
	at := now.UnixMicro()
	switch op.Action {
	case store.OpCancel:
		return `UPDATE ` + t + ` SET status = ?, owner = NULL, lease_until = 0, token = 0, updated_at = ?`, []any{int(task.StatusCancelled), at}
	case store.OpRequeue:
		due := op.DueAt
		if due.IsZero() {
			due = now
		}
		// A dead task whose key a live task holds now stays dead: MariaDB
		// and SQLite pass over the row whose change would break the live
		// key's uniqueness (IGNORE), PostgreSQL asks first (requeueGuard).
		verb := `UPDATE `
		switch s.d.name {
		case "mysql":
			verb = `UPDATE IGNORE `
		case "sqlite":
			verb = `UPDATE OR IGNORE `
		case "postgres":
			t += ` AS u`
		}
		return verb + t + ` SET status = ?, attempts = 0, due_at = ?, ` + setMovedRequeue + `, owner = NULL, lease_until = 0, token = 0, updated_at = ?`,
			[]any{int(task.StatusPending), micros(due), at}
	case store.OpReschedule:
		if op.Shift != 0 {
			return `UPDATE ` + t + ` SET due_at = due_at + ?, ` + setMovedUpdate + `, updated_at = ?`, []any{op.Shift.Microseconds(), at}
		}
		return `UPDATE ` + t + ` SET due_at = ?, ` + setMovedUpdate + `, updated_at = ?`, []any{micros(op.DueAt), at}
	default: // store.OpDelete
		return `DELETE FROM ` + t, nil
	}
}

// requeueGuard is PostgreSQL's requeue condition that no live task holds
// the row's key (the row is aliased u).
func (s *Store) requeueGuard(op *store.Operation, t string) string {
	if op.Action != store.OpRequeue || s.d.name != "postgres" {
		return ""
	}
	return ` AND (u.task_key IS NULL OR NOT EXISTS (SELECT 1 FROM ` + t + ` l WHERE l.topic = u.topic AND l.task_key = u.task_key AND l.status < 3))`
}

// DeleteOperations deletes the operations that finished before before,
// with their progress rows in every database, and answers how many.
func (s *Store) DeleteOperations(ctx context.Context, before time.Time) (_ int64, err error) {
	defer classify(&err)
	rows, err := s.w[0].QueryContext(ctx, s.d.rebind(`SELECT id FROM ontime_operations WHERE state IN (?, ?) AND finished_at > 0 AND finished_at < ? LIMIT 100`),
		string(store.OpDone), string(store.OpFailed), micros(before))
	if err != nil {
		return 0, fmt.Errorf("delete operations: %w", err)
	}
	var ids []any
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, fmt.Errorf("delete operations: %w", err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(ids) == 0 {
		return 0, err
	}
	in := ` IN (` + placeholders(len(ids)) + `)`
	// Progress first: an operation row without progress rows is a whole
	// record still; the reverse would leave progress nobody reads.
	for db := range s.w {
		if _, err := s.execRetried(ctx, db, s.d.rebind(`DELETE FROM ontime_operation_progress WHERE op_id`+in), ids...); err != nil {
			return 0, fmt.Errorf("delete operations: %w", err)
		}
	}
	n, err := s.execRetried(ctx, 0, s.d.rebind(`DELETE FROM ontime_operations WHERE id`+in), ids...)
	if err != nil {
		return 0, fmt.Errorf("delete operations: %w", err)
	}
	return n, nil
}
