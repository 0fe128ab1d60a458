package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
)

// Schema version 26 (SQLite, PostgreSQL): the index of every keyed row
// holds the final ones only.
//
//	UNIQUE (topic, task_key) of live keyed rows   <table>_live_keyed (schema 8)
//	(topic, task_key) of final keyed rows         <table>_ended_keyed (was
//	                                              <table>_keyed, every keyed row)
//
// A live row was in both: on PostgreSQL, whose status changes are never
// HOT updates, its insert, claim and start each added an entry to both
// (seven key entries in a task's life, now four: three live ones and the
// final one at its end); on SQLite an insert wrote two random leaves, now
// one. And a keyed COPY's check of the batch's keys (heldKeyQuery) probed
// the index of every keyed row, where it found the batch's own new rows
// and read each one from the heap: the final-key index holds none of them.
//
// The queries that name a key say which of the two they want, with the
// status term as a literal, which both planners need to take a partial
// index (an IN of bound statuses proves nothing to a generic plan): live
// (status < 3), final (status >= 3: the key hold), or every row of a key
// (keyRowsQuery: one SELECT of each, UNION ALL). A keyed insert on
// PostgreSQL checks both in its snapshot (insert_keyed.go): a holder's
// end committed while the statement runs must not let a second task in.
//
// MariaDB has no partial indexes; its key indexes stay as schema 3 made
// them.
func (s *Store) migrateEndedKeys(ctx context.Context, c *sql.Conn) error {
	if s.d.name == "mysql" {
		return nil
	}
	for _, t := range s.names {
		// The new index first, under a new name: a step cut short runs
		// again whole (IF NOT EXISTS), and the hold is never unindexed.
		if err := s.inTx(ctx, c,
			`CREATE INDEX IF NOT EXISTS `+t+`_ended_keyed ON `+t+` (topic, task_key) WHERE status >= 3 AND task_key IS NOT NULL`,
			`DROP INDEX IF EXISTS `+t+`_keyed`,
		); err != nil {
			return fmt.Errorf("%s: %w", t, err)
		}
	}
	return nil
}
