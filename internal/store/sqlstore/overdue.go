package sqlstore

import (
	"context"
	"strconv"

	"github.com/ontimehq/ontime/internal/task"
)

// overdueWalk is how many overdue pending tasks oldestOverdue reads per
// table segment, in due order, before it asks by topic.
const overdueWalk = 64

// oldestOverdue finds, for each topic in want with overdue pending tasks
// (due at or before nowUs), the earliest of their due times.
//
// Asking each table for every overdue task's topic (GROUP BY topic over
// the scan index) read every overdue row and, for its topic, the row
// itself: 1.6 s with 400,000 overdue on SQLite, paid by every count of
// the topics (a scrape, GET /v1/topics, the console) through a big
// burst's drain. Instead each segment's overdueWalk earliest are read, in
// due order; a topic seen there at a due no later than the least last due
// of the walks cut short (bound) has that as its earliest: every row
// before bound was read in every segment. The others (a rare topic behind
// a burst of another) are asked about one by one, from bound (or from
// their first hour with pending tasks, by the due counters, which also
// rule out the topics with none due yet) up to now or to what the walks
// saw of them: through the topic's own rows (the _topic index) when it
// has fewer rows than the range holds pending tasks, else through the
// range. A burst of one topic is read in a few rows per segment.
func (s *Store) oldestOverdue(ctx context.Context, want map[string]bool, rows map[string]int64, nowUs int64) (map[string]int64, error) {
	overdue := map[string]int64{}
	earlier := func(topic string, due int64) {
		if b, ok := overdue[topic]; !ok || due < b {
			overdue[topic] = due
		}
	}
	pending := strconv.Itoa(int(task.StatusPending))
	for db := range s.r {
		var hours *dueHours // read once per database, when a table needs it
		for _, t := range s.names {
			seen := map[string]int64{}
			bound := int64(-1) // the least last due of a walk cut short; -1: none was
			if err := s.walkSegments(ctx, db, t, `status = `+pending+` AND due_at <= ?`, nowUs, overdueWalk, seen, &bound); err != nil {
				return nil, err
			}
			// The topics the walks cannot vouch for, each with the range
			// [lo, hi] its earliest overdue task may still lie in.
			type open struct{ lo, hi int64 }
			unsure := map[string]open{}
			for topic := range want {
				due, ok := seen[topic]
				switch {
				case ok && (bound < 0 || due <= bound):
					earlier(topic, due)
				case bound < 0:
					// Every walk read all its overdue tasks: none of topic's.
				case ok:
					earlier(topic, due) // an upper bound; an earlier one may hide past bound
					unsure[topic] = open{bound, due}
				default:
					unsure[topic] = open{bound, nowUs}
				}
			}
			if len(unsure) == 0 {
				continue
			}
			if hours == nil {
				h, err := s.readDueHours(ctx, db, nowUs)
				if err != nil {
					return nil, err
				}
				hours = h
			}
			var byRange []string
			lo, hi := nowUs, int64(0)
			for topic, r := range unsure {
				if hours.ok {
					first, ok := hours.first[topic]
					if !ok {
						continue // nothing of topic's pending is due by the end of this hour
					}
					r.lo = max(r.lo, first*dueHour)
				}
				if r.lo > r.hi {
					continue
				}
				// hours.ok: no cleanup under way, t is the table itself.
				if hours.ok && rows[topic] < hours.pendingFrom(r.lo/dueHour) {
					due, ok, err := s.earliestOfTopic(ctx, db, t, topic, r.lo, r.hi)
					if err != nil {
						return nil, err
					}
					if ok {
						earlier(topic, due)
					}
					continue
				}
				byRange = append(byRange, topic)
				lo, hi = min(lo, r.lo), max(hi, r.hi)
			}
			if len(byRange) == 0 {
				continue
			}
			q := `SELECT topic, MIN(due_at) FROM ` + s.from(db, t) + ` WHERE ` + segIn(s.cfg.Segments) + ` AND status = ` + pending +
				` AND due_at >= ? AND due_at <= ? AND topic IN (` + placeholders(len(byRange)) + `) GROUP BY topic`
			args := []any{lo, hi}
			for _, topic := range byRange {
				args = append(args, topic)
			}
			if err := s.scanPairs(ctx, db, s.d.rebind(q), args, earlier); err != nil {
				return nil, err
			}
		}
	}
	return overdue, nil
}

// earliestOfTopic is the earliest due in [lo, hi] of topic's pending
// tasks in table t, read through the topic's own rows (<table>_topic: on
// SQLite (topic, id, due_at), named, as its planner would take the scan
// index; on PostgreSQL (topic, id) INCLUDE (due_at, status), whose
// predicate the query repeats).
func (s *Store) earliestOfTopic(ctx context.Context, db int, t, topic string, lo, hi int64) (int64, bool, error) {
	q := `SELECT MIN(due_at) FROM ` + t + ` INDEXED BY ` + t + `_topic WHERE topic = ? AND due_at >= ? AND due_at <= ? AND status = ` + strconv.Itoa(int(task.StatusPending))
	if s.d.name == "postgres" {
		q = `SELECT MIN(due_at) FROM ` + t + ` WHERE topic = $1 AND id IS NOT NULL AND due_at >= $2 AND due_at <= $3 AND status = ` + strconv.Itoa(int(task.StatusPending))
	}
	var due *int64
	if err := s.r[db].QueryRowContext(ctx, q, topic, lo, hi).Scan(&due); err != nil {
		return 0, false, err
	}
	if due == nil {
		return 0, false, nil
	}
	return *due, true, nil
}

// dueHours is what a database's due counters say of the hours up to the
// current one: each topic's first hour with pending tasks, and the
// pending tasks of all topics per hour. ok is false when they are not
// maintained there (a cleanup under way).
type dueHours struct {
	ok    bool
	first map[string]int64
	n     map[int64]int64
}

func (s *Store) readDueHours(ctx context.Context, db int, nowUs int64) (*dueHours, error) {
	h := &dueHours{first: map[string]int64{}, n: map[int64]int64{}}
	ok, err := s.maintainedDue(ctx, db, 0, nowUs/dueHour+1, func(hour int64, topic string, n int64) {
		if n <= 0 {
			return
		}
		if f, ok := h.first[topic]; !ok || hour < f {
			h.first[topic] = hour
		}
		h.n[hour] += n
	})
	if err != nil {
		return nil, err
	}
	h.ok = ok
	return h, nil
}

// pendingFrom is how many pending tasks the counters hold from hour on,
// up to the current hour: what a read of that range through the scan
// index goes through, at most.
func (h *dueHours) pendingFrom(hour int64) int64 {
	var n int64
	for hr, c := range h.n {
		if hr >= hour {
			n += c
		}
	}
	return n
}
