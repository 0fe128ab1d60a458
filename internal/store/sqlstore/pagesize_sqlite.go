package sqlstore

import (
	"context"
	"fmt"
	"strconv"

	"github.com/ontimehq/ontime/internal/sqldb"
)

// litePageSize is the page size of the SQLite databases ontime creates.
// A task table is WITHOUT ROWID, and SQLite keeps at most about a quarter
// of a page of such a row in its b-tree cell (1,002 bytes at the default
// 4,096): a task with a 1 KB payload spilled the rest to an overflow page,
// so its insert, claim, start and outcome each wrote two pages. At 8,192
// rows up to 2,029 bytes stay whole: 20,000 tasks with 1 KB payloads are
// inserted 1.35×, claimed 2.4× and started 1.8× faster, with 33-byte
// payloads as fast as before (BenchmarkLitePageSize); a burst of
// 1,000,000 drains 1.7–2.1× faster. Small commits pay: they write whole
// pages to the WAL, and 16 HTTP clients' keyed single submits of 60-byte
// payloads went 0.91–0.94× as fast (five alternated runs).
const litePageSize = 8192

// liteCreate gives a database that is new (no file, or an empty one)
// litePageSize and WAL mode before anything else writes it. SQLite fixes
// the page size with the first page it writes, and modernc's driver runs
// a DSN's journal_mode before its other pragmas, which would write the
// file at the default size. An existing database keeps its page size
// (changing it means rewriting the file, which WAL mode forbids).
func liteCreate(ctx context.Context, dsn string) error {
	db, err := sqldb.Open(sqldb.SQLite, dsn, sqldb.Options{SQLite: "_pragma=busy_timeout(" + strconv.FormatInt(liteBusyTimeout.Milliseconds(), 10) + ")&_pragma=page_size(" + strconv.Itoa(litePageSize) + ")"})
	if err != nil {
		return err
	}
	defer db.Close()
	// Retried: SQLite answers "busy" while another process switches the
	// file to WAL mode, without waiting on busy_timeout (ping).
	if err := withRetry(ctx, func() error {
		_, err := db.ExecContext(ctx, `PRAGMA journal_mode = WAL`)
		return err
	}); err != nil {
		return fmt.Errorf("journal_mode WAL: %w", err)
	}
	return nil
}
