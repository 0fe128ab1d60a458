package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
)

// Schema version 22: the leases index, (seg, status, lease_until) of the
// claimed and running rows (PostgreSQL, SQLite: partial, of those rows
// only; MariaDB: of every row, it has no partial indexes).
//
// Every claim first looks for ended leases (expiredWhere) and every scan
// reads the earliest lease end of its item (NextDue). Through the scan
// index both read every claimed and running row of the segment, and each
// row from the table for its lease_until: in a burst that is the whole
// backlog the hot tier and the lanes hold, once per claim of 500. At
// 200,000 tasks on PostgreSQL a claim spent 10 ms there for 600 rows held,
// and the claims were most of the store's time; at 2,000,000 the backlog,
// and so each claim, grows tenfold. Through this index a claim reads only
// the leases that ended, and NextDue one entry per status.
//
// Its users repeat leaseHeld: SQLite takes a partial index only for a
// query that repeats its WHERE term. A row enters the index when claimed
// and leaves it when done (two entries per task on PostgreSQL, whose
// status changes are never HOT updates).
func (s *Store) migrateLeases(ctx context.Context, c *sql.Conn) error {
	for _, t := range s.names {
		stmt := `CREATE INDEX IF NOT EXISTS ` + t + `_lease ON ` + t + ` (seg, status, lease_until) WHERE ` + leaseHeld
		if s.d.name == "mysql" {
			stmt = `CREATE INDEX IF NOT EXISTS ` + t + `_lease ON ` + t + ` (seg, status, lease_until)`
		}
		if _, err := c.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("%s: %w", t, err)
		}
	}
	return nil
}

// leaseHeld is the WHERE term of the leases index: claimed (1) or running
// (2), spelled as literals (TestLeaseHeldStatuses) so that every planner
// can match it with a generic plan. lease_until is never negative; the
// term keeps the index out of the plans of queries that name a status and
// IDs alone (Start, Finish): PostgreSQL, its statistics taken before a
// burst was claimed, would read every lease held through it rather than
// seek the IDs.
const leaseHeld = `status IN (1, 2) AND lease_until >= 0`
