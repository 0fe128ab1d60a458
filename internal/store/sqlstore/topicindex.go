package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
)

// Schema version 24 (SQLite, PostgreSQL): an index of every row by topic,
// <table>_topic, which the lists of one topic read (the console's Tasks
// page, GET /v1/tasks?topic=…).
//
// Since version 8 no index held keyless rows by topic: a topic's page
// walked the primary key (or the status index) and read every row to test
// its topic, some 10,000 rows per table for a page of one topic in 200, and
// the whole table for a rare one (PostgreSQL, 10 M rows: 130 ms for a
// topic's page, 200–700 ms for its pending tasks). The index holds what
// those lists filter on beside the topic, so a page is read from the index
// alone:
//
//   - SQLite: (topic, id, due_at). No status: SQLite rewrites only the
//     indexes whose columns change, so claims, starts and outcomes never
//     touch it; an insert writes one entry, a new due time moves it.
//   - PostgreSQL: (topic, id) INCLUDE (due_at, status), partial on
//     "id IS NOT NULL" (every row). A status change is never a HOT update
//     there, so every index gets an entry whatever its columns, and the
//     status costs only its bytes. The predicate keeps the index out of
//     the key lookups (topic = ? AND task_key = ?, which name no id):
//     with a plain (topic, id) index BenchmarkInsertBatch/postgres/plan
//     (keyed batches, tables never analyzed) ran at 1/30 of its rate, some
//     key query having taken it (which one was not caught in EXPLAIN). A
//     list names "id > ?", which implies the predicate.
//
// What it costs the writes (PostgreSQL, alternated in one run, load < 1):
// keyed batch insert 0.90×, COPY batch 0.85×, 16 keyed tasks 0.98×, a
// task's life inserted claimed 0.92–0.95×.
// MariaDB keeps its (topic, task_key) index, which holds every row.
func (s *Store) migrateTopicIndex(ctx context.Context, c *sql.Conn) error {
	if s.d.name == "mysql" {
		return nil
	}
	for _, t := range s.names {
		if _, err := c.ExecContext(ctx, topicIndex(s.d.name, t)); err != nil {
			return fmt.Errorf("%s: %w", t, err)
		}
	}
	return nil
}

func topicIndex(engine, t string) string {
	if engine == "postgres" {
		return `CREATE INDEX IF NOT EXISTS ` + t + `_topic ON ` + t + ` (topic, id) INCLUDE (due_at, status) WHERE id IS NOT NULL`
	}
	return `CREATE INDEX IF NOT EXISTS ` + t + `_topic ON ` + t + ` (topic, id, due_at)`
}
