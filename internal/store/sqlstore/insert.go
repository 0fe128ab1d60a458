package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// Insert writes tasks idempotently on (topic, task_key). The rows bound
// for one database are written in one transaction: one commit (one sync)
// per database and call, however many tables and chunks they span, and on
// failure none of them is written. Databases are written in parallel; a
// call spanning several can fail on one after another committed (each
// database answers for its own rows). PostgreSQL's keyed statement
// (insert_keyed.go) commits by itself and reads back the keys it skipped
// afterwards: a read-back that fails answers an error for rows that were
// written (a retry of keyed tasks finds them by key), and a key whose
// holder ended between the two goes in with a second transaction.
func (s *Store) Insert(ctx context.Context, tasks []store.NewTask) (_ []store.Inserted, err error) {
	defer classify(&err)
	if err := s.fenced(); err != nil {
		return nil, err
	}
	out := make([]store.Inserted, len(tasks))
	ids := make([]string, len(tasks))
	for i, t := range tasks {
		ids[i] = t.ID
	}
	groups := s.groupIDs(ids)
	placed := 0
	for _, g := range groups {
		placed += len(g.idx)
	}
	if placed != len(tasks) {
		return nil, fmt.Errorf("insert: a task has a malformed ID")
	}
	err = forEachDB(groups, func(gs []group) error {
		return s.insertTx(ctx, gs, tasks, out)
	})
	if err != nil {
		return nil, fmt.Errorf("insert: %w", err)
	}
	s.ahead.inserted(tasks)
	return out, nil
}

// insertTx writes the table groups of one database in one transaction,
// retried as a whole on transient conflicts (a deadlock between two
// transactions inserting the same keys in different orders, SQLite busy):
// a statement that failed inside a transaction cannot be retried alone
// (PostgreSQL aborts the transaction, MariaDB rolls it back on deadlock).
//
// MariaDB runs it READ COMMITTED: under its default REPEATABLE READ the
// read-back of a key that met a row committed meanwhile would see the
// snapshot of the transaction's first read, miss that row and take the key
// for freed. PostgreSQL's default is READ COMMITTED already; SQLite has one
// writer, so nothing commits under a write transaction.
func (s *Store) insertTx(ctx context.Context, gs []group, tasks []store.NewTask, out []store.Inserted) error {
	if s.lite != nil {
		return s.insertTxLite(ctx, gs, tasks, out)
	}
	if s.copyable(gs, tasks) {
		err := withRetry(ctx, func() error { return s.copyInsert(ctx, gs, tasks, out, time.Now()) })
		if err == nil || !uniqueViolation(err) {
			return err
		}
		// An ID exists: the statements below skip it.
	} else if s.keyedCopyable(gs, tasks) {
		err := withRetry(ctx, func() error { return s.copyInsertKeyed(ctx, gs, tasks, out, time.Now()) })
		if err == nil || !uniqueViolation(err) && !errors.Is(err, errKeysHeld) {
			return err
		}
		// A key is held, or an ID exists: the statements below answer
		// each task.
	}
	if s.keyedMySQL(gs, tasks) {
		// MariaDB, keys: one statement (insert_mysql.go).
		var again []int
		err := withRetry(ctx, func() error {
			var err error
			again, err = s.keyedInsertMySQL(ctx, gs[0], tasks, out, time.Now())
			return err
		})
		if err != nil || len(again) == 0 {
			return err
		}
		gs = []group{{db: gs[0].db, table: gs[0].table, idx: again}} // keys freed meanwhile
	}
	if s.oneStatement(gs, tasks) {
		// PostgreSQL, keys: one statement for every table (insert_keyed.go).
		var again []group
		err := withRetry(ctx, func() error {
			var err error
			again, err = s.keyedInsert(ctx, gs, tasks, out, time.Now())
			return err
		})
		if err != nil || len(again) == 0 {
			return err
		}
		gs = again // keys freed meanwhile: the transaction below
	} else if len(gs) == 1 && len(s.ins.chunks(gs[0].idx, tasks)) == 1 && !keyed(gs[0].idx, tasks) {
		// One INSERT of keyless rows and nothing else: the statement is
		// atomic by itself, and BEGIN and COMMIT would cost two more round
		// trips (what a lone submit of one task pays on a server engine).
		return withRetry(ctx, func() error {
			_, err := s.insertRound(ctx, s.w[gs[0].db], gs[0], gs[0].idx, tasks, out, time.Now())
			return err
		})
	}
	if s.multiable(gs, tasks) {
		return withConnRetry(ctx, func() error { return s.multiInsert(ctx, gs, tasks, out, time.Now()) })
	}
	var opts *sql.TxOptions
	if s.d.name == "mysql" {
		opts = &sql.TxOptions{Isolation: sql.LevelReadCommitted}
	}
	return s.retryTx(ctx, gs[0].db, opts, func(tx *sql.Tx) error {
		now := time.Now()
		for _, g := range gs {
			for _, idx := range s.ins.chunks(g.idx, tasks) {
				err := s.insertChunk(ctx, tx, s.names[g.table], idx, tasks, out, now, func(idx []int) ([]int, error) {
					return s.insertRound(ctx, tx, g, idx, tasks, out, now)
				})
				if err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// keyed reports whether any task of idx has a key.
func keyed(idx []int, tasks []store.NewTask) bool {
	for _, i := range idx {
		if tasks[i].Key != "" {
			return true
		}
	}
	return false
}

// anyKeyed reports whether any task of gs has a key.
func anyKeyed(gs []group, tasks []store.NewTask) bool {
	for _, g := range gs {
		if keyed(g.idx, tasks) {
			return true
		}
	}
	return false
}

// txQuerier is the write transaction of one database an insert runs in
// (or its pool, for a lone statement).
type txQuerier interface {
	querier
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// insertChunk inserts the tasks of idx (one table) and fills out, in
// rounds: resolveKeys answers the keyed tasks whose key a stored task
// holds (keys.go); round, the engine's INSERT (insertRound, SQLite's
// insertRoundLite), writes the rest in tx and returns the keyed tasks it
// could not place. A keyed task that loses the race for its key to a
// concurrent insert finds the winner; one whose key was freed meanwhile
// (the winner ended, with no key hold) is inserted in the next round.
func (s *Store) insertChunk(ctx context.Context, tx querier, t string, idx []int, tasks []store.NewTask, out []store.Inserted, now time.Time, round func(idx []int) ([]int, error)) error {
	for n := 0; len(idx) > 0; n++ {
		if n == 3 {
			return fmt.Errorf("task %s/%q: its key kept changing hands", tasks[idx[0]].Topic, tasks[idx[0]].Key)
		}
		var err error
		if idx, err = s.resolveKeys(ctx, tx, t, idx, tasks, out, now); err != nil {
			return err
		}
		if len(idx) == 0 {
			return nil
		}
		if idx, err = round(idx); err != nil {
			return err
		}
	}
	return nil
}

// insertRound writes one INSERT of idx in tx and returns the keyed tasks
// it could not place: neither inserted nor finding a task that holds the
// key.
func (s *Store) insertRound(ctx context.Context, tx txQuerier, g group, idx []int, tasks []store.NewTask, out []store.Inserted, now time.Time) ([]int, error) {
	q, args := s.insertStatement(s.names[g.table], idx, tasks, out, now)
	// Learn which rows went in, so that only keys that met an existing row
	// are read back: RETURNING where the engine has it; elsewhere (MariaDB,
	// which counts an untouched duplicate as 0 affected rows) the count
	// tells whether any row was skipped at all.
	var inserted map[string]bool
	// Not retried here: insertTx retries the whole transaction.
	err := func() error {
		if !s.d.returning {
			res, err := tx.ExecContext(ctx, q, args...)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err == nil && n == int64(len(idx)) {
				inserted = make(map[string]bool, len(idx))
				for _, i := range idx {
					inserted[tasks[i].ID] = true
				}
			}
			return nil
		}
		rows, err := tx.QueryContext(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		inserted = make(map[string]bool, len(idx))
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			inserted[id] = true
		}
		return rows.Err()
	}()
	if err != nil {
		return nil, err
	}
	// Keyed tasks that were not inserted met a live row of their key
	// (inserted == nil means "unknown": read back every key).
	var unsure []int
	for _, i := range idx {
		if tasks[i].Key != "" && !inserted[tasks[i].ID] {
			unsure = append(unsure, i)
		}
	}
	return s.readBackKeys(ctx, tx, s.names[g.table], unsure, tasks, out, now)
}

// readBackKeys finds who holds the key of each task of unsure (keyed tasks
// of a statement that skipped some row) and returns those to insert in the
// next round: a task whose own row is there went in after all; one whose
// key is held answers the holder (Existing).
func (s *Store) readBackKeys(ctx context.Context, db querier, t string, unsure []int, tasks []store.NewTask, out []store.Inserted, now time.Time) ([]int, error) {
	if len(unsure) == 0 {
		return nil, nil
	}
	byTopic := map[string][]int{}
	for _, i := range unsure {
		byTopic[tasks[i].Topic] = append(byTopic[tasks[i].Topic], i)
	}
	var again []int
	for topic, is := range byTopic {
		keys := make([]string, len(is))
		for j, i := range is {
			keys[j] = tasks[i].Key
		}
		found, err := s.keyRows(ctx, db, t, topic, keys)
		if err != nil {
			return nil, err
		}
		for _, i := range is {
			rows := found[tasks[i].Key]
			if slices.ContainsFunc(rows, func(r *task.Task) bool { return r.ID == tasks[i].ID }) {
				continue // inserted after all
			}
			if o := keyOwner(rows); s.holds(o, &tasks[i], now) {
				out[i] = s.heldBy(o)
				continue
			}
			again = append(again, i)
		}
	}
	return again, nil
}
