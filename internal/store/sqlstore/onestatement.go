package sqlstore

// A Start's or a Finish's writes to one database take one round trip. The
// transaction they were cost a BEGIN, a round trip per table and a
// COMMIT; at a thousand tasks a second spread over 16 tables a Start or a
// Finish touches about one row per table, so that was several round trips
// per task. PostgreSQL sends each table's statement in one pgx batch, one
// implicit transaction (pgbatch.go; before, one statement of data-modifying
// CTEs, planned anew on every call). MariaDB sends the transaction as one
// multi-statement query ("START TRANSACTION; …; COMMIT", runMulti; a Start
// reads each table's rows FOR UPDATE before their UPDATE, startMulti).
// SQLite writes through its own path (start_sqlite.go).

// stmtPart is one write of a call, with ? placeholders.
type stmtPart struct {
	q    string
	args []any
}

// oneStatementMax bounds the rows a database's write may hold to be run as
// one statement: its placeholders stay far below PostgreSQL's 65,535, and
// a larger call (a burst) is few round trips per row anyway.
const oneStatementMax = batchLimit

// writeAsOne reports whether the groups of one database (a Start's or a
// Finish's) are written in one round trip: on PostgreSQL as one pgx batch,
// on MariaDB as one multi-statement query.
func (s *Store) writeAsOne(gs []group) bool {
	if s.d.name != "postgres" && !s.ins.multi {
		return false
	}
	n := 0
	for _, g := range gs {
		n += len(g.idx)
	}
	return n <= oneStatementMax
}
