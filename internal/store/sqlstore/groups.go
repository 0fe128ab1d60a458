package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"sync"

	"github.com/ontimehq/ontime/internal/store"
)

// How a call's rows are run: split by database and table (group), the
// tables of one database in one transaction, databases in parallel.

// batchLimit bounds the rows of one statement (placeholders stay far below
// every engine's limit: 17 × 500).
const batchLimit = 500

// group is the refs bound for one table.
type group struct {
	db, table int
	idx       []int // positions in the caller's slice
}

// groupIDs splits IDs by (database, table), skipping malformed ones.
func (s *Store) groupIDs(ids []string) []group {
	byKey := map[[2]int]*group{}
	var order [][2]int
	for i, id := range ids {
		db, t, err := s.locate(id)
		if err != nil {
			continue
		}
		k := [2]int{db, t}
		g := byKey[k]
		if g == nil {
			g = &group{db: db, table: t}
			byKey[k] = g
			order = append(order, k)
		}
		g.idx = append(g.idx, i)
	}
	out := make([]group, len(order))
	for i, k := range order {
		out[i] = *byKey[k]
	}
	return out
}

// forEachGroup runs f on up to 8 table groups at a time: tables of
// different databases are written in parallel, and a batch pays for its
// slowest table rather than the sum.
func forEachGroup(groups []group, f func(g group) error) error {
	if len(groups) == 1 {
		return f(groups[0])
	}
	var wg sync.WaitGroup
	errs := make([]error, len(groups))
	sem := make(chan struct{}, 8)
	for i, g := range groups {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = f(g)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// refMatch builds the predicate of "these refs, under their claims":
//
//	id IN (all ids) AND ((token = ? AND id IN (…)) OR …)
//
// The leading IN list makes every engine look rows up by primary key —
// without it SQLite may walk the (status, id) index through every claimed
// row of the table. Refs are grouped by token because a claim covers a
// whole batch: a few terms with IN lists instead of one term per ref,
// which engines would evaluate once per candidate row.
func refMatch(refs []store.Ref) (string, []any) {
	byToken := map[int64][]string{}
	var order []int64
	args := make([]any, 0, 2*len(refs)+8)
	for _, r := range refs {
		if _, ok := byToken[r.Token]; !ok {
			order = append(order, r.Token)
		}
		byToken[r.Token] = append(byToken[r.Token], r.ID)
		args = append(args, r.ID)
	}
	var b strings.Builder
	b.WriteString("(id IN (" + placeholders(len(refs)) + ") AND ")
	if len(order) == 1 {
		b.WriteString("token = ?)")
		return b.String(), append(args, order[0])
	}
	b.WriteString("(")
	for i, tok := range order {
		if i > 0 {
			b.WriteString(" OR ")
		}
		ids := byToken[tok]
		b.WriteString("(token = ? AND id IN (" + placeholders(len(ids)) + "))")
		args = append(args, tok)
		for _, id := range ids {
			args = append(args, id)
		}
	}
	b.WriteString("))")
	return b.String(), args
}

// forEachDB runs f on the table groups of each database, databases in
// parallel (up to 8 at a time).
func forEachDB(groups []group, f func(gs []group) error) error {
	byDB := map[int][]group{}
	var dbs []group // the first group of each database, in order
	for _, g := range groups {
		if _, ok := byDB[g.db]; !ok {
			dbs = append(dbs, g)
		}
		byDB[g.db] = append(byDB[g.db], g)
	}
	// Tables in one order in every transaction, for the reason rows are
	// in key order (insertStatement).
	for _, gs := range byDB {
		slices.SortFunc(gs, func(a, b group) int { return a.table - b.table })
	}
	return forEachGroup(dbs, func(g group) error { return f(byDB[g.db]) })
}

// refGroups splits refs by table.
func (s *Store) refGroups(refs []store.Ref) []group {
	ids := make([]string, len(refs))
	for i, r := range refs {
		ids[i] = r.ID
	}
	return s.groupIDs(ids)
}

func pick(refs []store.Ref, idx []int) []store.Ref {
	out := make([]store.Ref, len(idx))
	for i, j := range idx {
		out[i] = refs[j]
	}
	return out
}

// perDBTx runs f once per database that groups touch, in parallel across
// databases (forEachDB), each inside one transaction retried whole on a
// transient conflict: one commit per database instead of one per table.
func (s *Store) perDBTx(ctx context.Context, groups []group, f func(tx *sql.Tx, groups []group) error) error {
	return forEachDB(groups, func(gs []group) error {
		return s.retryTx(ctx, gs[0].db, nil, func(tx *sql.Tx) error { return f(tx, gs) })
	})
}

// writeTx runs f in a transaction on database db's writer and commits it if
// f succeeds.
func (s *Store) writeTx(ctx context.Context, db int, opts *sql.TxOptions, f func(tx *sql.Tx) error) error {
	tx, err := s.w[db].BeginTx(ctx, opts)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := f(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// execRetried runs q on database db's writer, again on transient
// conflicts, and returns the number of rows it changed.
func (s *Store) execRetried(ctx context.Context, db int, q string, args ...any) (int64, error) {
	var n int64
	err := withRetry(ctx, func() error {
		res, err := s.w[db].ExecContext(ctx, q, args...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}

// retryTx is writeTx run again whole on transient conflicts (withRetry): a
// statement that failed inside a transaction cannot be retried alone
// (PostgreSQL aborts the transaction, MariaDB rolls it back on deadlock).
func (s *Store) retryTx(ctx context.Context, db int, opts *sql.TxOptions, f func(tx *sql.Tx) error) error {
	return withRetry(ctx, func() error { return s.writeTx(ctx, db, opts, f) })
}
