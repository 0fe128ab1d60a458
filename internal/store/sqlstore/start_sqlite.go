package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// SQLite's Start and Finish. A start or an outcome write touches a row or
// two in each of the 16 tables, so its cost was the statements, not the
// rows: their SQL text varied with the number of refs and was parsed anew
// every call (a third of a start's CPU), and each statement run through
// the driver pays a fixed toll (a goroutine watching the context, the
// progress handler, database/sql's locks). Here every statement has a
// fixed shape, prepared once per table and row class and kept:
//
//	UPDATE t SET … WHERE id IN (?, … n) AND token = ? AND status = ?
//
// n is a power of two up to liteMaxRows; a run of fewer IDs pads the list
// with NULL, which equals no ID, so one statement serves each (table,
// token, new state) instead of one per power of two of its rows. The IN
// list keeps the lookups on the primary key, as refMatch's does.

// liteOp is the kind of a prepared Start or Finish statement.
type liteOp int

const (
	liteOpStart  liteOp = iota // claimed → running, RETURNING the rows
	liteOpDone                 // running → done
	liteOpRetry                // running → pending or claimed again
	liteOpFail                 // running → dead or cancelled
	liteOpResult               // running → done, with a result
)

type liteOpKey struct {
	op               liteOp
	db, table, class int
}

// liteOpStmts holds one store's prepared Start and Finish statements, and
// Claim's by text (claim_sqlite.go), as liteStmts holds its inserts:
// prepared on the writer pool outside any transaction, closed by
// Store.Close.
type liteOpStmts struct {
	ops  *stmtCache[liteOpKey]
	text *stmtCache[liteTextKey] // bounded: see liteTextMax
}

func newLiteOpStmts() *liteOpStmts {
	return &liteOpStmts{ops: newStmtCache[liteOpKey](0), text: newStmtCache[liteTextKey](liteTextMax)}
}

func (c *liteOpStmts) close() error { return errors.Join(c.ops.close(), c.text.close()) }

// len is the number of statements held.
func (c *liteOpStmts) len() int { return c.ops.len() + c.text.len() }

// liteOpQuery is the statement of k on table t. The time of the write
// (updated_at) is the last SET value of every kind; the WHERE values
// follow it: the IDs, the token, the status the rows must be in.
func liteOpQuery(k liteOpKey, t string) string {
	where := ` WHERE id IN (` + placeholders(k.class) + `) AND token = ? AND status = ?`
	switch k.op {
	case liteOpStart:
		return `UPDATE ` + t + ` SET status = ?, attempts = attempts + 1, lease_until = ?, updated_at = ?` + where + ` RETURNING ` + cols
	case liteOpDone:
		return `UPDATE ` + t + ` SET status = ?, owner = NULL, lease_until = 0, updated_at = ?` + where
	case liteOpResult:
		return `UPDATE ` + t + ` SET status = ?, result = ?, owner = NULL, lease_until = 0, updated_at = ?` + where
	case liteOpRetry:
		return `UPDATE ` + t + ` SET status = ?, due_at = ?, ` + setMovedRetry + `, last_error = ?, attempts = attempts - ?, owner = ?, lease_until = ?, token = ?, updated_at = ?` + where
	default:
		return `UPDATE ` + t + ` SET status = ?, last_error = ?, owner = NULL, lease_until = 0, updated_at = ?` + where
	}
}

// liteClass is the row class of a run of n IDs (1 ≤ n ≤ liteMaxRows): the
// next power of two.
func liteClass(n int) int { return 1 << bits.Len(uint(n-1)) }

// prepare makes sure the statements of keys exist, before the write
// transaction (see stmtCache).
func (c *liteOpStmts) prepare(ctx context.Context, s *Store, keys []liteOpKey) error {
	return c.ops.ensure(ctx, keys, func(ctx context.Context, k liteOpKey) (*sql.Stmt, error) {
		st, err := s.w[k.db].PrepareContext(ctx, liteOpQuery(k, s.names[k.table]))
		if err != nil {
			return nil, fmt.Errorf("prepare on %s: %w", s.names[k.table], err)
		}
		return st, nil
	})
}

// liteRun is one statement to run: up to liteMaxRows IDs of one table
// under one token, all taking the same new state.
type liteRun struct {
	key   liteOpKey
	set   []any // SET values but the time of the write
	ids   []string
	token int64
}

// liteRuns appends the runs of refs (one table, one new state): split by
// token in first-seen order, then into runs of at most liteMaxRows.
func liteRuns(out []liteRun, op liteOp, db, table int, set []any, refs []store.Ref) []liteRun {
	type byToken struct {
		token int64
		ids   []string
	}
	var toks []byToken
	for _, r := range refs {
		i := slices.IndexFunc(toks, func(b byToken) bool { return b.token == r.Token })
		if i < 0 {
			i = len(toks)
			toks = append(toks, byToken{token: r.Token, ids: make([]string, 0, len(refs))})
		}
		toks[i].ids = append(toks[i].ids, r.ID)
	}
	for _, b := range toks {
		for ids := b.ids; len(ids) > 0; {
			n := min(len(ids), liteMaxRows)
			out = append(out, liteRun{key: liteOpKey{op, db, table, liteClass(n)}, set: set, ids: ids[:n:n], token: b.token})
			ids = ids[n:]
		}
	}
	return out
}

// liteTxRuns runs each database's runs in one transaction (perDBTx),
// after preparing every statement they use. f runs one statement.
func (s *Store) liteTxRuns(ctx context.Context, runs []liteRun, cond task.Status, f func(ctx context.Context, st *sql.Stmt, args []any) error) error {
	if len(runs) == 0 {
		return nil
	}
	keys := make([]liteOpKey, len(runs))
	for i, r := range runs {
		keys[i] = r.key
	}
	if err := s.liteOps.prepare(ctx, s, keys); err != nil {
		return err
	}
	// perDBTx wants groups: one per database, idx the positions in runs.
	var groups []group
	for i, r := range runs {
		j := slices.IndexFunc(groups, func(g group) bool { return g.db == r.key.db })
		if j < 0 {
			j = len(groups)
			groups = append(groups, group{db: r.key.db})
		}
		groups[j].idx = append(groups[j].idx, i)
	}
	return s.perDBTx(ctx, groups, func(tx *sql.Tx, gs []group) error {
		now := any(time.Now().UnixMicro())
		var args []any
		for _, g := range gs {
			for _, i := range g.idx {
				r := runs[i]
				ps := s.liteOps.ops.get(r.key)
				if ps == nil {
					return errors.New("store closed") // only Close removes statements
				}
				args = append(append(args[:0], r.set...), now)
				for _, id := range r.ids {
					args = append(args, id)
				}
				for range r.key.class - len(r.ids) {
					args = append(args, nil) // NULL matches no ID
				}
				args = append(args, r.token, int64(cond))
				st := tx.StmtContext(ctx, ps)
				err := f(ctx, st, args)
				st.Close()
				if err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// startLite is Start on SQLite.
func (s *Store) startLite(ctx context.Context, refs []store.Ref, leaseUntil time.Time) ([]*task.Task, error) {
	set := []any{int64(task.StatusRunning), micros(leaseUntil)}
	var runs []liteRun
	for _, g := range s.refGroups(refs) {
		runs = liteRuns(runs, liteOpStart, g.db, g.table, set, pick(refs, g.idx))
	}
	var out started
	err := s.liteTxRuns(ctx, runs, task.StatusClaimed, func(ctx context.Context, st *sql.Stmt, args []any) error {
		rows, err := st.QueryContext(ctx, args...)
		if err != nil {
			return err
		}
		got, err := scanTasks(rows)
		if err != nil {
			return err
		}
		out.add(got)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	return out.byDue(), nil
}

// finishLite is Finish on SQLite. Per table the statements run in
// finishParts' order: dead and cancelled, then retries, then done.
func (s *Store) finishLite(ctx context.Context, outcomes []store.Outcome) error {
	refs := make([]store.Ref, len(outcomes))
	for i, o := range outcomes {
		refs[i] = o.Ref
	}
	var runs []liteRun
	for _, g := range s.refGroups(refs) {
		runs = s.finishRuns(runs, g, outcomes)
	}
	err := s.liteTxRuns(ctx, runs, task.StatusRunning, func(ctx context.Context, st *sql.Stmt, args []any) error {
		_, err := st.ExecContext(ctx, args...)
		return err
	})
	if err != nil {
		return fmt.Errorf("finish: %w", err)
	}
	return nil
}

// finishRuns appends the runs of one table's outcomes, in finishParts'
// order and grouping (groupOutcomes).
func (s *Store) finishRuns(runs []liteRun, g group, outcomes []store.Outcome) []liteRun {
	og := groupOutcomes(g, outcomes)
	for _, o := range og.final {
		runs = liteRuns(runs, liteOpFail, g.db, g.table, []any{int64(finalStatus(o)), truncate(o.Error)}, []store.Ref{o.Ref})
	}
	for _, k := range og.keys {
		runs = liteRuns(runs, liteOpRetry, g.db, g.table, k.appendSet(make([]any, 0, 7)), og.retries[k])
	}
	for _, o := range og.results {
		runs = liteRuns(runs, liteOpResult, g.db, g.table, []any{int64(task.StatusDone), o.Result}, []store.Ref{o.Ref})
	}
	if len(og.done) > 0 {
		runs = liteRuns(runs, liteOpDone, g.db, g.table, []any{int64(task.StatusDone)}, og.done)
	}
	return runs
}
