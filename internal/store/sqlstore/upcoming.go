package sqlstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// DueHistogram counts pending tasks per topic and bucket of due time.
// Buckets of whole hours aligned on the hour are sums of the due counters
// that SQLite and PostgreSQL maintain (duecounts.go); the others are
// counted from the task tables (dueLive).
func (s *Store) DueHistogram(ctx context.Context, from time.Time, step time.Duration, n int) (_ []store.DueCounts, err error) {
	defer classify(&err)
	switch {
	case n < 1 || n > store.MaxDueBuckets:
		return nil, fmt.Errorf("due histogram: %d buckets is out of range 1..%d", n, store.MaxDueBuckets)
	case step < time.Microsecond:
		return nil, fmt.Errorf("due histogram: step %s is below a microsecond", step)
	}
	lo := micros(from)
	w := step.Microseconds()
	hi := lo + w*int64(n)
	byTopic := map[string][]int64{}
	// Whole hours aligned on the hour: the maintained counters
	// (duecounts.go) where the database keeps them.
	hourly := w%dueHour == 0 && lo%dueHour == 0
	for db := range s.r {
		if hourly {
			ok, err := s.maintainedDue(ctx, db, lo/dueHour, hi/dueHour, func(hour int64, topic string, c int64) {
				addDue(byTopic, topic, (hour*dueHour-lo)/w, c, n)
			})
			if err != nil {
				return nil, fmt.Errorf("due histogram: %w", err)
			}
			if ok {
				continue
			}
		}
		if err := s.dueLive(ctx, db, lo, w, n, byTopic); err != nil {
			return nil, fmt.Errorf("due histogram: %w", err)
		}
	}
	out := make([]store.DueCounts, 0, len(byTopic))
	for topic, c := range byTopic {
		out = append(out, store.DueCounts{Topic: topic, Counts: c})
	}
	slices.SortFunc(out, func(a, b store.DueCounts) int { return strings.Compare(a.Topic, b.Topic) })
	return out, nil
}

// dueLive counts database db's pending tasks per topic and bucket from
// its task tables. On SQLite and PostgreSQL one statement per table,
// naming every segment so that the range is read from the scan index
// (seg, status, due_at, id), one index range per segment (without the
// segments SQLite read the whole index); each row in range is then read
// for its topic. On MariaDB one statement per table and segment. The
// bucket is computed from due_at by integer division (MariaDB's / is
// decimal, so DIV there), grouped by position (PostgreSQL does not see two
// bound copies of one expression as equal).
func (s *Store) dueLive(ctx context.Context, db int, lo, w int64, n int, byTopic map[string][]int64) error {
	hi := lo + w*int64(n)
	if s.d.name != "mysql" {
		segList := make([]string, s.cfg.Segments)
		for i := range segList {
			segList[i] = strconv.Itoa(i)
		}
		segs := strings.Join(segList, ", ")
		for _, t := range s.names {
			q := s.d.rebind(`SELECT topic, (due_at - ?) / ?, COUNT(*) FROM ` + s.from(db, t) + `
				WHERE seg IN (` + segs + `) AND status = ? AND due_at >= ? AND due_at < ? GROUP BY 1, 2`)
			if err := s.dueCounts(ctx, db, q, []any{lo, w, int(task.StatusPending), lo, hi}, n, byTopic); err != nil {
				return err
			}
		}
		return nil
	}
	for _, t := range s.names {
		q := s.d.rebind(`SELECT topic, (due_at - ?) DIV ?, COUNT(*) FROM ` + s.from(db, t) + `
			WHERE seg = ? AND status = ? AND due_at >= ? AND due_at < ? GROUP BY 1, 2`)
		for seg := range s.cfg.Segments {
			if err := s.dueCounts(ctx, db, q, []any{lo, w, seg, int(task.StatusPending), lo, hi}, n, byTopic); err != nil {
				return err
			}
		}
	}
	return nil
}

// addDue adds c tasks of topic to bucket b.
func addDue(byTopic map[string][]int64, topic string, b, c int64, n int) {
	if b < 0 || b >= int64(n) {
		return // the WHERE keeps these out; a rounding engine would not
	}
	counts := byTopic[topic]
	if counts == nil {
		counts = make([]int64, n)
		byTopic[topic] = counts
	}
	counts[b] += c
}

func (s *Store) dueCounts(ctx context.Context, db int, q string, args []any, n int, byTopic map[string][]int64) error {
	rows, err := s.r[db].QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var topic string
		var b, c int64
		if err := rows.Scan(&topic, &b, &c); err != nil {
			return err
		}
		addDue(byTopic, topic, b, c, n)
	}
	return rows.Err()
}
