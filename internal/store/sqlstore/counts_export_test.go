package sqlstore

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/ontimehq/ontime/internal/task"
)

// CountsDrift compares each database's maintained counts — per topic and
// status, and the pending per hour of due and topic (schema 25) — with a
// COUNT(*) of its task tables and describes every difference ("" when
// they agree, and always on an engine that maintains none).
func CountsDrift(ctx context.Context, s *Store) (string, error) {
	var out []string
	for db := range s.r {
		type key struct {
			topic string
			st    task.Status
		}
		kept, counted := map[key]int64{}, map[key]int64{}
		ok, err := s.maintainedCounts(ctx, db, func(tp string, st task.Status, n int64) { kept[key{tp, st}] += n })
		if err != nil || !ok {
			return "", err
		}
		for _, t := range s.names {
			rows, err := s.r[db].QueryContext(ctx, `SELECT topic, status, COUNT(*) FROM `+t+` GROUP BY topic, status`)
			if err != nil {
				return "", err
			}
			for rows.Next() {
				var tp string
				var st, n int64
				if err := rows.Scan(&tp, &st, &n); err != nil {
					rows.Close()
					return "", err
				}
				counted[key{tp, task.Status(st)}] += n
			}
			rows.Close()
		}
		if !maps.Equal(kept, counted) {
			out = append(out, fmt.Sprintf("database %d: maintained %v, counted %v", db, kept, counted))
		}
		d, err := dueDrift(ctx, s, db)
		if err != nil {
			return "", err
		}
		if d != "" {
			out = append(out, d)
		}
	}
	slices.Sort(out)
	return strings.Join(out, "; "), nil
}

// FoldCountsNow is FoldCounts for tests.
func FoldCountsNow(ctx context.Context, s *Store) (int64, error) { return s.FoldCounts(ctx) }

// dueDrift compares database db's due counters with a count of its
// pending rows per hour and topic.
func dueDrift(ctx context.Context, s *Store, db int) (string, error) {
	type key struct {
		hour  int64
		topic string
	}
	kept, counted := map[key]int64{}, map[key]int64{}
	ok, err := s.maintainedDue(ctx, db, 0, math.MaxInt64, func(hour int64, topic string, n int64) { kept[key{hour, topic}] += n })
	if err != nil || !ok {
		return "", err
	}
	for _, t := range s.names {
		rows, err := s.r[db].QueryContext(ctx, `SELECT due_at / `+dueHourSQL+`, topic, COUNT(*) FROM `+t+` WHERE status = 0 GROUP BY 1, 2`)
		if err != nil {
			return "", err
		}
		for rows.Next() {
			var k key
			var n int64
			if err := rows.Scan(&k.hour, &k.topic, &n); err != nil {
				rows.Close()
				return "", err
			}
			counted[k] += n
		}
		rows.Close()
	}
	if !maps.Equal(kept, counted) {
		return fmt.Sprintf("database %d: due counters %v, counted %v", db, kept, counted), nil
	}
	return "", nil
}
