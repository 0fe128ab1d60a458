package sqlstore

// PostgreSQL runs a Start's or a Finish's writes to one database as one
// statement: the tables' UPDATEs as data-modifying CTEs. The transaction
// it replaces cost a BEGIN, a round trip per table and a COMMIT; at a
// thousand tasks a second spread over 16 tables a Start or a Finish
// touches about one row per table, so that was several round trips (and
// statements to parse and plan) per task. A statement is atomic on its
// own, as the transaction was. MariaDB has no data-modifying CTEs: it
// sends the transaction as one multi-statement query instead ("START
// TRANSACTION; …; COMMIT", runMulti; a Start reads each table's rows FOR
// UPDATE before their UPDATE, startMulti). SQLite writes through its own
// path (start_sqlite.go).

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
// Finish's) are written in one round trip: on PostgreSQL as one statement,
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

// joinParts makes parts one statement. returning: each part ends in
// RETURNING with the same columns, and the statement returns all of their
// rows; otherwise it returns nothing.
func joinParts(parts []stmtPart, returning bool) (string, []any) {
	if len(parts) == 1 {
		return parts[0].q, parts[0].args
	}
	var b []byte
	var args []any
	last := len(parts)
	if !returning {
		// The last write is the statement's own: nothing to select.
		last--
	}
	b = append(b, "WITH "...)
	for i, p := range parts[:last] {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, 'p')
		b = appendInt(b, i)
		b = append(b, " AS ("...)
		b = append(b, p.q...)
		b = append(b, ')')
		args = append(args, p.args...)
	}
	b = append(b, ' ')
	if !returning {
		b = append(b, parts[last].q...)
		return string(b), append(args, parts[last].args...)
	}
	for i := range parts {
		if i > 0 {
			b = append(b, " UNION ALL "...)
		}
		b = append(b, "SELECT * FROM p"...)
		b = appendInt(b, i)
	}
	return string(b), args
}

func appendInt(b []byte, n int) []byte {
	if n >= 10 {
		b = appendInt(b, n/10)
	}
	return append(b, byte('0'+n%10))
}
