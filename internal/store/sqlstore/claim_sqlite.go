package sqlstore

import (
	"context"
	"database/sql"

	"github.com/ontimehq/ontime/internal/store"
)

// SQLite's Claim runs two statements (expired leases, then due tasks)
// whose text is fixed per table but was parsed on every call: half the CPU
// of a claim that finds a handful of tasks, the common claim at 5,000
// tasks/s over 64 items. They are prepared once and kept, by text.

// liteTextMax bounds the statements kept by text: the text of a claim of
// due tasks names the paused topics, so every new set of them makes a new
// one. Past the bound, statements run unprepared.
const liteTextMax = 1024

type liteTextKey struct {
	db int
	q  string
}

// byText is the statement of text q on database db's writer, prepared on
// first use (outside any transaction: the caller holds none); nil with no
// error once liteTextMax statements are held.
func (c *liteOpStmts) byText(ctx context.Context, w *sql.DB, db int, q string) (*sql.Stmt, error) {
	return c.text.prepared(ctx, liteTextKey{db, q}, func(ctx context.Context, k liteTextKey) (*sql.Stmt, error) {
		return w.PrepareContext(ctx, k.q)
	})
}

// collectRefsLite is collectRefs through a statement kept by text.
func (s *Store) collectRefsLite(ctx context.Context, db int, q string, args []any, token int64, refs *[]store.Ref) error {
	if s.liteOps == nil {
		return s.collectRefs(ctx, s.w[db], q, args, token, refs, false)
	}
	st, err := s.liteOps.byText(ctx, s.w[db], db, q)
	if err != nil {
		return err
	}
	if st == nil {
		return s.collectRefs(ctx, s.w[db], q, args, token, refs, false)
	}
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return err
	}
	return scanRefs(rows, token, refs)
}
