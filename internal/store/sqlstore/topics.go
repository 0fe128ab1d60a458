package sqlstore

// Topics: the paused flag of each topic, kept in one table of the first
// database (ontime_topics, schema version 4) that every node polls, and
// the per-topic counts and requeue of GET /v1/topics and
// POST /v1/topics/{topic}:requeue.
//
// A paused topic's pending tasks stay in the task tables; Claim, Scan and
// NextDue pass over them through the claim filter (SetClaimFilter). The
// filter is a residual predicate (topic NOT IN …) on the (seg, status,
// due_at, id) index walk, not an index of its own: a topic index would
// cost every insert, and a paused backlog is the exception. What it costs
// is that each claim and NextDue of an item reads past the paused topic's
// overdue rows in that item.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

var _ store.Topics = (*Store)(nil)

// maxFiltered bounds the paused topics the claim filter names: beyond it
// the statement would carry too many placeholders for no good reason
// (pausing thousands of topics is not what pause is for). Topics beyond
// it are still held back by the fire stage, which checks every entry.
const maxFiltered = 500

// createTopics makes the topics table (schema version 4), per engine.
var createTopics = map[string][]string{
	"sqlite":   {`CREATE TABLE IF NOT EXISTS ontime_topics (topic TEXT NOT NULL PRIMARY KEY, paused INTEGER NOT NULL, updated_at INTEGER NOT NULL)`},
	"postgres": {`CREATE TABLE IF NOT EXISTS ontime_topics (topic TEXT COLLATE "C" NOT NULL PRIMARY KEY, paused SMALLINT NOT NULL, updated_at BIGINT NOT NULL)`},
	"mysql": {`CREATE TABLE IF NOT EXISTS ontime_topics (topic VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
		paused TINYINT NOT NULL, updated_at BIGINT NOT NULL) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`},
}

var upsertTopic = map[string]string{
	"sqlite":   `INSERT INTO ontime_topics (topic, paused, updated_at) VALUES (?, ?, ?) ON CONFLICT (topic) DO UPDATE SET paused = excluded.paused, updated_at = excluded.updated_at`,
	"postgres": `INSERT INTO ontime_topics (topic, paused, updated_at) VALUES (?, ?, ?) ON CONFLICT (topic) DO UPDATE SET paused = excluded.paused, updated_at = excluded.updated_at`,
	"mysql":    `INSERT INTO ontime_topics (topic, paused, updated_at) VALUES (?, ?, ?) ON DUPLICATE KEY UPDATE paused = VALUES(paused), updated_at = VALUES(updated_at)`,
}

// SetTopicPaused stores topic's paused flag in the first database: a
// pause is a row, a resume deletes it, so the table holds the paused
// topics only and a topic paused by mistake (one without tasks) leaves
// nothing behind once resumed.
func (s *Store) SetTopicPaused(ctx context.Context, topic string, paused bool) (err error) {
	defer classify(&err)
	if err := task.ValidateTopic(topic); err != nil {
		return err
	}
	q, args := s.d.rebind(upsertTopic[s.d.name]), []any{topic, 1, time.Now().UnixMicro()}
	if !paused {
		q, args = s.d.rebind(`DELETE FROM ontime_topics WHERE topic = ?`), []any{topic}
	}
	if _, err := s.execRetried(ctx, 0, q, args...); err != nil {
		return fmt.Errorf("set paused %s: %w", topic, err)
	}
	return nil
}

// PausedTopics reads the paused topics from the first database.
func (s *Store) PausedTopics(ctx context.Context) (_ []string, err error) {
	defer classify(&err)
	rows, err := s.r[0].QueryContext(ctx, `SELECT topic FROM ontime_topics WHERE paused = 1 ORDER BY topic`)
	if err != nil {
		return nil, fmt.Errorf("paused topics: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			return nil, fmt.Errorf("paused topics: %w", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("paused topics: %w", err)
	}
	return out, nil
}

// SetClaimFilter sets the topics whose pending tasks Claim, Scan and
// NextDue pass over.
func (s *Store) SetClaimFilter(paused []string) {
	p := slices.Clone(paused)
	slices.Sort(p)
	p = slices.Compact(p)
	if len(p) > maxFiltered {
		p = p[:maxFiltered]
	}
	s.paused.Store(&p)
}

// pausedClause is the claim filter as a predicate to AND to a query on
// pending tasks ("" when no topic is paused) and its arguments.
func (s *Store) pausedClause() (string, []any) {
	p := s.paused.Load()
	if p == nil || len(*p) == 0 {
		return "", nil
	}
	args := make([]any, len(*p))
	for i, t := range *p {
		args[i] = t
	}
	return ` AND topic NOT IN (` + placeholders(len(args)) + `)`, args
}

// TopicStats counts tasks per topic and status, table by table.
func (s *Store) TopicStats(ctx context.Context, topic string) (_ []store.TopicStats, err error) {
	defer classify(&err)
	if topic != "" {
		if err := task.ValidateTopic(topic); err != nil {
			return nil, err
		}
	}
	byTopic := map[string]*store.TopicStats{}
	get := func(name string) *store.TopicStats {
		ts := byTopic[name]
		if ts == nil {
			ts = &store.TopicStats{Topic: name, Counts: map[task.Status]int64{}}
			byTopic[name] = ts
		}
		return ts
	}
	if topic != "" {
		get(topic)
	}
	// The counts the writes maintain (counts.go); MariaDB's are counted
	// here, per table (with a topic through its (topic, task_key) index).
	counts, oldest, err := s.topicCountsNow(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("topic stats: %w", err)
	}
	for tp, m := range counts {
		ts := get(tp)
		for st, n := range m {
			ts.Counts[st] = n
		}
		if m[task.StatusPending] > 0 {
			ts.OldestDueAt = oldest[tp]
		}
	}
	paused, err := s.PausedTopics(ctx)
	if err != nil {
		return nil, err
	}
	for _, p := range paused {
		if topic == "" || p == topic {
			get(p).Paused = true
		}
	}
	out := make([]store.TopicStats, 0, len(byTopic))
	for _, ts := range byTopic {
		out = append(out, *ts)
	}
	slices.SortFunc(out, func(a, b store.TopicStats) int { return strings.Compare(a.Topic, b.Topic) })
	return out, nil
}

func requeueTopicQuery(t string) string {
	return `UPDATE ` + t + ` SET status = ?, attempts = 0, due_at = ?, ` + setMovedRequeue + `, owner = NULL, lease_until = 0, token = 0, updated_at = ?
		WHERE topic = ?` + deadTopic + notDone
}

// RequeueTopic requeues every dead task of topic, one statement per table
// (each finds the topic's dead rows through the partial index of dead rows
// by topic, schema 21; MariaDB through the index that leads with status).
func (s *Store) RequeueTopic(ctx context.Context, topic string, dueAt time.Time) (_ int64, err error) {
	defer classify(&err)
	if err := task.ValidateTopic(topic); err != nil {
		return 0, err
	}
	var total int64
	now := time.Now().UnixMicro()
	for db := range s.w {
		for _, t := range s.names {
			// The copies an expansion's cleanup will delete are passed
			// over (owned): requeued once, by the twin's row.
			q := s.d.rebind(requeueTopicQuery(t) + s.owned(db))
			n, err := s.execRetried(ctx, db, q, int(task.StatusPending), micros(dueAt), now, topic)
			if err != nil {
				return total, fmt.Errorf("requeue topic %s: %w", topic, err)
			}
			total += n
		}
	}
	return total, nil
}
