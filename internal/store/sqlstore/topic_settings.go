package sqlstore

// Topic settings: what PUT /v1/topics/{topic} set for a topic (its
// target, max_attempts, retry policy, priority, rate, concurrency,
// timeout), kept as one JSON document per topic in a table of the first
// database (ontime_topic_settings, schema version 14) that every node
// polls. The store does not read the document: internal/topics owns its
// form and its validation. A table of its own rather than a column of
// ontime_topics: that table holds the paused topics only (a resume
// deletes the row), and a topic's settings outlive its pauses.

import (
	"context"
	"fmt"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

var _ store.TopicSettings = (*Store)(nil)

// createTopicSettings makes the settings table (schema version 14).
var createTopicSettings = map[string][]string{
	"sqlite":   {`CREATE TABLE IF NOT EXISTS ontime_topic_settings (topic TEXT NOT NULL PRIMARY KEY, settings TEXT NOT NULL, updated_at INTEGER NOT NULL)`},
	"postgres": {`CREATE TABLE IF NOT EXISTS ontime_topic_settings (topic TEXT COLLATE "C" NOT NULL PRIMARY KEY, settings TEXT NOT NULL, updated_at BIGINT NOT NULL)`},
	"mysql": {`CREATE TABLE IF NOT EXISTS ontime_topic_settings (topic VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
		settings TEXT NOT NULL, updated_at BIGINT NOT NULL) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`},
}

var upsertTopicSettings = map[string]string{
	"sqlite":   `INSERT INTO ontime_topic_settings (topic, settings, updated_at) VALUES (?, ?, ?) ON CONFLICT (topic) DO UPDATE SET settings = excluded.settings, updated_at = excluded.updated_at`,
	"postgres": `INSERT INTO ontime_topic_settings (topic, settings, updated_at) VALUES (?, ?, ?) ON CONFLICT (topic) DO UPDATE SET settings = excluded.settings, updated_at = excluded.updated_at`,
	"mysql":    `INSERT INTO ontime_topic_settings (topic, settings, updated_at) VALUES (?, ?, ?) ON DUPLICATE KEY UPDATE settings = VALUES(settings), updated_at = VALUES(updated_at)`,
}

// SetTopicSettings stores topic's settings document; an empty one
// deletes the row (the topic is back to its config's settings).
func (s *Store) SetTopicSettings(ctx context.Context, topic string, settings []byte) (err error) {
	defer classify(&err)
	if err := task.ValidateTopic(topic); err != nil {
		return err
	}
	q, args := s.d.rebind(upsertTopicSettings[s.d.name]), []any{topic, string(settings), time.Now().UnixMicro()}
	if len(settings) == 0 {
		q, args = s.d.rebind(`DELETE FROM ontime_topic_settings WHERE topic = ?`), []any{topic}
	}
	if _, err := s.execRetried(ctx, 0, q, args...); err != nil {
		return fmt.Errorf("set settings of topic %s: %w", topic, err)
	}
	return nil
}

// AllTopicSettings reads every topic's settings document from the first
// database, by topic. Nodes poll it: a table of a row per topic with
// settings.
func (s *Store) AllTopicSettings(ctx context.Context) (_ map[string][]byte, err error) {
	defer classify(&err)
	rows, err := s.r[0].QueryContext(ctx, `SELECT topic, settings FROM ontime_topic_settings`)
	if err != nil {
		return nil, fmt.Errorf("topic settings: %w", err)
	}
	defer rows.Close()
	out := map[string][]byte{}
	for rows.Next() {
		var t, doc string
		if err := rows.Scan(&t, &doc); err != nil {
			return nil, fmt.Errorf("topic settings: %w", err)
		}
		out[t] = []byte(doc)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("topic settings: %w", err)
	}
	return out, nil
}
