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

// listIDs runs the ID query q (a %s for the table, then a page's filter,
// ending with `id > ?`-style conditions) on every table and keeps the limit
// smallest IDs. Once limit IDs are known, later tables are asked only for
// IDs below the largest of them (the condition bound, with one ?), so most
// tables return few rows.
func (s *Store) listIDs(ctx context.Context, q, bound string, args []any, limit int) ([]string, error) {
	var best []string // sorted, at most limit
	for db := range s.r {
		for _, t := range s.names {
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
	rows, err := s.r[db].QueryContext(ctx, s.d.rebind(q), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
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
	if !f.DueAfter.IsZero() {
		q += ` AND due_at >= ?`
		args = append(args, micros(f.DueAfter))
	}
	if !f.DueBefore.IsZero() {
		q += ` AND due_at < ?`
		args = append(args, micros(f.DueBefore))
	}
	// The bound on later tables' IDs must not steer SQLite's plan: with a
	// due range, "id > ? AND id < ?" made it walk the primary key between
	// the two (most of a table of millions of rows) instead of the due
	// index's range; a unary + keeps the term out of index choice.
	bound := ` AND id < ?`
	if s.d.name == "sqlite" && (!f.DueAfter.IsZero() || !f.DueBefore.IsZero()) {
		bound = ` AND +id < ?`
	}
	ids, err := s.listIDs(ctx, q, bound, args, limit)
	if err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	all, err := s.getMany(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	return all, nil
}

// CountTopics counts tasks per topic and status, with the earliest due
// time of the pending ones. No index leads with topic and status, so this
// reads every row: the metrics' leader runs it, at most every 15 s and
// less often when it is slow (metrics.Gauges).
func (s *Store) CountTopics(ctx context.Context) (_ []store.TopicCount, err error) {
	defer classify(&err)
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
