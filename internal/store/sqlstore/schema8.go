package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
)

// Schema version 8: on SQLite and PostgreSQL the two key indexes hold
// keyed rows only, and the status index rows not done.
//
//	(topic, task_key) of keyed rows          <table>_keyed (was _key)
//	UNIQUE (topic, task_key) of live keyed   <table>_live_keyed (was
//	rows                                     _live_key)
//	(status, id) of rows not done            <table>_open (was _status)
//
// Most tasks have no key (task_key NULL: inserts never store an empty key), and
// every row was in both indexes. A status change rewrites the live-key
// entry on SQLite (its WHERE names status) and, being no HOT update, adds
// an entry to every index on PostgreSQL; an insert writes both. Keyless
// rows now cost neither. Every key query names task_key with = , IN or a
// range, which implies task_key IS NOT NULL to both planners, so the
// partial indexes serve them (TestKeyQueriesUseIndexes). Queries by topic
// alone (TopicStats, RequeueTopic, List by topic) no longer have an index:
// they are an operator's, and read the table or another index.
//
// The status index serves lease extensions (claimed and running rows by
// token), requeues of dead rows and List by status; none asks for done
// rows but List, which then walks the primary key (done rows are most
// rows). Done rows, most of the table at steady state, are no longer in
// it: an outcome only removes its entry. Its users repeat the index's
// WHERE term (notDone): SQLite takes a partial index only then. SQLite's
// Start and Finish, whose WHERE names status and IDs, now seek the rows by
// primary key instead of through (status, id) and then the table.
//
// MariaDB has no partial indexes and stores NULLs in its indexes; its
// schema stays as version 3 made it (a keyless row's entries never change
// after its insert there, since InnoDB rewrites only the indexes whose
// values change).
func (s *Store) migrateKeyed(ctx context.Context, c *sql.Conn) error {
	if s.d.name == "mysql" {
		return nil
	}
	for _, t := range s.names {
		// New names, so that IF NOT EXISTS makes a step cut short safe to
		// run again; the new live-key index first, so that one always
		// holds. One transaction per table: DDL is transactional on both
		// engines, and the table's lock is held for its indexes only.
		if err := s.inTx(ctx, c,
			`CREATE UNIQUE INDEX IF NOT EXISTS `+t+`_live_keyed ON `+t+` (topic, task_key) WHERE status < 3 AND task_key IS NOT NULL`,
			`DROP INDEX IF EXISTS `+t+`_live_key`,
			`CREATE INDEX IF NOT EXISTS `+t+`_keyed ON `+t+` (topic, task_key) WHERE task_key IS NOT NULL`,
			`DROP INDEX IF EXISTS `+t+`_key`,
			`CREATE INDEX IF NOT EXISTS `+t+`_open ON `+t+` (status, id) WHERE status <> 3`,
			`DROP INDEX IF EXISTS `+t+`_status`,
		); err != nil {
			return fmt.Errorf("%s: %w", t, err)
		}
	}
	return nil
}

// notDone is the term a query by status adds, when the status it asks
// for is not done, so that both planners may use the (status, id) index of
// rows not done (schema version 8): SQLite takes a partial index only for
// a query that repeats its WHERE term, whatever the bound status.
const notDone = ` AND status <> 3`

// inTx runs stmts in one transaction on c.
func (s *Store) inTx(ctx context.Context, c *sql.Conn, stmts ...string) error {
	tx, err := c.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	for _, stmt := range stmts {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			_ = tx.Rollback()
			return err
		}
	}
	return tx.Commit()
}
