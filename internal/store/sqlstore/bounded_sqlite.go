package sqlstore

import (
	"context"
	"strconv"
)

// liteStatementRows bounds the rows one SQLite UPDATE of a lease sweep
// writes. The writer connection keeps temporary files in memory
// (liteWriterPragmas), and a statement's journal — the first image of
// every page it changes, kept to undo that statement alone — is one of
// them: a heartbeat's single UPDATE of a 50,000-task burst's claims (1 KB
// payloads) held 400 MB of it until the statement ended, the node's
// resident set going from 130 to 530 MB for that second. In statements
// of 2,000 rows the journal stays under 20 MB and the sweep takes as long.
const liteStatementRows = 2000

// liteBounded runs `UPDATE table SET set WHERE where` as statements of at
// most liteStatementRows rows each, through exec (a transaction's or the
// writer's own), until one writes fewer: the set must take the rows it
// writes out of where (a lease moved past the bound it was selected by),
// or the sweep would not end. Returns the rows written.
func liteBounded(ctx context.Context, exec func(ctx context.Context, q string, args ...any) (int64, error), table, set string, setArgs []any, where string, whereArgs []any) (int64, error) {
	q := `UPDATE ` + table + ` SET ` + set + ` WHERE id IN (SELECT id FROM ` + table + ` WHERE ` + where +
		` LIMIT ` + strconv.Itoa(liteStatementRows) + `)`
	args := append(append(make([]any, 0, len(setArgs)+len(whereArgs)), setArgs...), whereArgs...)
	var total int64
	for {
		n, err := exec(ctx, q, args...)
		total += n
		if err != nil || n < liteStatementRows {
			return total, err
		}
	}
}
