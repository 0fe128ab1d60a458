package sqlstore

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ontimehq/ontime/internal/task"
)

// CountsDrift compares each database's maintained counts with a COUNT(*)
// of its task tables and describes every difference ("" when they agree,
// and always on an engine that maintains none).
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
	}
	slices.Sort(out)
	return strings.Join(out, "; "), nil
}

// FoldCountsNow is FoldCounts for tests.
func FoldCountsNow(ctx context.Context, s *Store) (int64, error) { return s.FoldCounts(ctx) }
