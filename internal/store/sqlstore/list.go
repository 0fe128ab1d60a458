package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// listIDsBy runs, on every table, the ID query pick chooses for it (given
// the database and the table's name: a %s for the table, then a page's
// filter, ending with `id > ?`-style conditions) and keeps the limit
// smallest IDs. Once limit IDs are known, later tables are asked only for
// IDs below the largest of them (the condition bound, with one ?), so most
// tables return few rows.
func (s *Store) listIDsBy(ctx context.Context, pick func(db int, t string) (string, error), bound string, args []any, limit int) ([]string, error) {
	var best []string // sorted, at most limit
	for db := range s.r {
		for _, t := range s.names {
			q, err := pick(db, t)
			if err != nil {
				return nil, err
			}
			tq, targs := q, args
			if len(best) == limit {
				tq += bound
				targs = append(slices.Clip(args), best[len(best)-1])
			}
			tq += ` ORDER BY id LIMIT ?`
			targs = append(slices.Clip(targs), limit)
			got, err := s.queryIDs(ctx, db, fmt.Sprintf(tq, s.from(db, t)), targs...)
			if err != nil {
				return nil, err
			}
			if len(got) == 0 {
				continue
			}
			best = append(best, got...)
			slices.Sort(best)
			best = best[:min(len(best), limit)]
		}
	}
	return best, nil
}

func (s *Store) queryIDs(ctx context.Context, db int, q string, args ...any) ([]string, error) {
	return readIDs(ctx, s.r[db], s.d.rebind(q), args...)
}

// getMany reads the tasks of ids, a table at a time, in ID order. A task
// deleted meanwhile is left out.
func (s *Store) getMany(ctx context.Context, ids []string) ([]*task.Task, error) {
	var out []*task.Task
	for _, g := range s.groupIDs(ids) {
		gids := make([]any, len(g.idx))
		for i, j := range g.idx {
			gids[i] = ids[j]
		}
		rows, err := s.queryTasks(ctx, s.r[g.db], `SELECT `+cols+` FROM `+s.names[g.table]+` WHERE id IN (`+placeholders(len(gids))+`)`, gids...)
		if err != nil {
			return nil, err
		}
		out = append(out, rows...)
	}
	slices.SortFunc(out, func(a, b *task.Task) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
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
	q, args := s.listQuery(f)
	bound := ` AND id < ?`
	pick := func(int, string) (string, error) { return q, nil }
	if s.dueRanged(f) {
		pick = s.duePlan(ctx, q, f, args)
		if s.d.name == "sqlite" {
			// The bound on later tables' IDs must not steer SQLite's
			// plan: "id > ? AND id < ?" made it walk the primary key
			// between the two instead of a due range; a unary + keeps
			// the term out of index choice.
			bound = ` AND +id < ?`
		}
	}
	ids, err := s.listIDsBy(ctx, pick, bound, args, limit)
	if err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	all, err := s.getMany(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	return all, nil
}

// byTopic reports whether List reads f's rows through the topic index
// (schema 24; MariaDB has its (topic, task_key) index of every row).
func (s *Store) byTopic(f store.ListFilter) bool { return f.Topic != "" && s.d.name != "mysql" }

// dueRanged reports whether List reads f's due range through the scan
// index (duePlan).
func (s *Store) dueRanged(f store.ListFilter) bool {
	return s.d.name != "mysql" && !s.byTopic(f) && (!f.DueAfter.IsZero() || !f.DueBefore.IsZero())
}

// listQuery is List's ID query of one table (a %s for it, ending with the
// page's conditions) and its arguments.
func (s *Store) listQuery(f store.ListFilter) (string, []any) {
	q := `SELECT id FROM %s WHERE id > ?`
	args := []any{f.After}
	if f.Topic != "" {
		q += ` AND topic = ?`
		args = append(args, f.Topic)
	}
	// One topic's rows: the topic index holds the due time (and on
	// PostgreSQL the status) beside each ID, so the other terms are tested
	// on its entries. They are written "+status", "+due_at": an expression
	// no index serves, so neither planner trades the topic for the status
	// index or the scan index (a common status or a narrow range would
	// look cheaper there, and read every row of other topics).
	byTopic := s.byTopic(f)
	term := func(col string) string {
		if byTopic {
			return ` AND +` + col
		}
		return ` AND ` + col
	}
	switch {
	case f.Status != nil && *f.Status == task.StatusDead && byTopic:
		// A topic's dead letters: the partial index of dead rows by topic
		// (schema 21), which a literal status lets both planners use.
		q += deadTopic + notDone
	case f.Status != nil:
		q += term("status") + ` = ?`
		args = append(args, int(*f.Status))
		if *f.Status != task.StatusDone && !byTopic {
			q += notDone
		}
	}
	if !f.DueAfter.IsZero() {
		q += term("due_at") + ` >= ?`
		args = append(args, micros(f.DueAfter))
	}
	if !f.DueBefore.IsZero() {
		q += term("due_at") + ` < ?`
		args = append(args, micros(f.DueBefore))
	}
	return q, args
}

// dueRangeCap is how many index entries of a due range (past the page's
// cursor) a table may hold for List to read the range through the scan
// index and sort its IDs; beyond it the range is dense enough that
// walking the primary key finds a page sooner (at most about
// limit × rows / dueRangeCap rows).
const dueRangeCap = 4000

// duePlan chooses, per table, how List reads a due range. There is no
// index by due time alone (one would cost every insert); the scan index
// (seg, status, due_at, id) holds every row's due time under each segment
// and status, so naming every segment and status turns the range into a
// few index ranges (covering, without a topic filter) whose IDs are then
// sorted. That is what a narrow range needs (an hour of a week: the
// primary key walk read 1.4–1.6 s at 2 M rows on SQLite to fill a page),
// and what a wide one must not do (sorting millions of IDs). SQLite has
// no statistics to tell them apart: a count of the range's entries,
// capped at dueRangeCap (covering, so cheap), decides per table.
// PostgreSQL's planner weighs the two plans from its statistics.
func (s *Store) duePlan(ctx context.Context, q string, f store.ListFilter, args []any) func(db int, t string) (string, error) {
	terms := ` AND ` + segIn(s.cfg.Segments)
	var probeArgs []any
	if f.Status == nil {
		var sts []string
		for _, st := range task.Statuses() {
			sts = append(sts, strconv.Itoa(int(st)))
		}
		terms += ` AND status IN (` + strings.Join(sts, ", ") + `)`
	}
	ranged := q + terms
	if s.d.name != "sqlite" {
		return func(int, string) (string, error) { return ranged, nil }
	}
	// The probe: the same range and status, no topic (not in the index).
	probe := `SELECT COUNT(*) FROM (SELECT 1 FROM %s WHERE id > ?` + terms
	probeArgs = append(probeArgs, f.After)
	if f.Status != nil {
		probe += ` AND status = ?`
		probeArgs = append(probeArgs, int(*f.Status))
	}
	if !f.DueAfter.IsZero() {
		probe += ` AND due_at >= ?`
		probeArgs = append(probeArgs, micros(f.DueAfter))
	}
	if !f.DueBefore.IsZero() {
		probe += ` AND due_at < ?`
		probeArgs = append(probeArgs, micros(f.DueBefore))
	}
	probe += ` LIMIT ` + strconv.Itoa(dueRangeCap+1) + `)`
	return func(db int, t string) (string, error) {
		var n int
		if err := s.r[db].QueryRowContext(ctx, fmt.Sprintf(probe, s.from(db, t)), probeArgs...).Scan(&n); err != nil {
			return "", err
		}
		if n > dueRangeCap {
			return q, nil
		}
		return ranged, nil
	}
}

// CountTopics counts tasks per topic and status, with the earliest due
// time of the pending ones. SQLite and PostgreSQL read the counts their
// writes maintain (counts.go); MariaDB reads every row, so the metrics'
// leader runs it less often when it is slow (metrics.Gauges).
func (s *Store) CountTopics(ctx context.Context) (_ []store.TopicCount, err error) {
	defer classify(&err)
	if s.maintainsCounts() {
		return s.countTopicsMaintained(ctx)
	}
	type key struct {
		topic  string
		status task.Status
	}
	at := map[key]int{}
	var out []store.TopicCount
	for db := range s.r {
		for _, t := range s.names {
			q := `SELECT topic, status, COUNT(*), MIN(CASE WHEN status = ` + strconv.Itoa(int(task.StatusPending)) + ` THEN due_at END) FROM ` + s.from(db, t) + ` GROUP BY topic, status`
			rows, err := s.r[db].QueryContext(ctx, q)
			if err != nil {
				return nil, fmt.Errorf("count topics: %w", err)
			}
			for rows.Next() {
				var topic string
				var st, n int64
				var due sql.NullInt64
				if err := rows.Scan(&topic, &st, &n, &due); err != nil {
					rows.Close()
					return nil, fmt.Errorf("count topics: %w", err)
				}
				k := key{topic, task.Status(st)}
				i, ok := at[k]
				if !ok {
					i = len(out)
					at[k] = i
					out = append(out, store.TopicCount{Topic: topic, Status: k.status})
				}
				out[i].N += n
				if d := fromMicros(due.Int64); due.Valid && !d.IsZero() && (out[i].MinDue.IsZero() || d.Before(out[i].MinDue)) {
					out[i].MinDue = d
				}
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return nil, fmt.Errorf("count topics: %w", err)
			}
		}
	}
	return out, nil
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
			rows, err := s.r[db].QueryContext(ctx, `SELECT status, COUNT(*) FROM `+s.from(db, t)+` GROUP BY seg, status`)
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
