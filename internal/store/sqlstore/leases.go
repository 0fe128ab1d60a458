package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// EndLeases implements store.Store. The rows it can touch are the item's
// claimed and running ones, at most what the nodes hold in their tiers and
// lanes, found through the (seg, status, …) index the claims use.
func (s *Store) EndLeases(ctx context.Context, it store.Item, now time.Time, h store.Holders) (_ int, err error) {
	defer classify(&err)
	if err := s.checkItem(it); err != nil {
		return 0, err
	}
	if h.Only != nil && len(h.Only) == 0 {
		return 0, nil
	}
	setArgs := []any{micros(now) - 1, time.Now().UnixMicro()}
	where := `seg = ?` + s.owned(it.DB) + ` AND lease_until >= ? AND `
	args := []any{it.Segment, micros(now)}
	if h.ClaimedOnly {
		where += `status = ?`
		args = append(args, int(task.StatusClaimed))
	} else {
		where += `status IN (?, ?)`
		args = append(args, int(task.StatusClaimed), int(task.StatusRunning))
	}
	owners, op := h.Only, "IN"
	if owners == nil {
		owners, op = h.Except, "NOT IN"
	}
	if len(owners) > 0 {
		where += ` AND (owner ` + op + ` (?` + strings.Repeat(", ?", len(owners)-1) + `)`
		for _, o := range owners {
			args = append(args, o)
		}
		// A restarted node's previous processes: by the incarnation its
		// tokens carry; by time for unattributed tokens or when the
		// incarnation is unknown. Sorted: the statement's text is the same
		// for the same holders.
		for _, node := range slices.Sorted(maps.Keys(h.Incarnations)) {
			if inc := h.Incarnations[node]; inc != 0 {
				lo, hi := store.IncarnationTokens(inc)
				where += ` OR (owner = ? AND token >= ? AND (token < ? OR token > ?))`
				args = append(args, node, store.AttributedTokens, lo, hi)
			}
		}
		for _, node := range slices.Sorted(maps.Keys(h.Restarted)) {
			if at := h.Restarted[node]; !at.IsZero() {
				if h.Incarnations[node] != 0 {
					where += ` OR (owner = ? AND token < ? AND updated_at < ?)`
					args = append(args, node, store.AttributedTokens, micros(at))
				} else {
					where += ` OR (owner = ? AND updated_at < ?)`
					args = append(args, node, micros(at))
				}
			}
		}
		where += `)`
	}
	var n int64
	if s.d.name == "sqlite" {
		// Statement by statement (liteBounded): a gone node's leases may
		// be a whole tier's. The rows ended no longer match lease_until
		// >= now.
		n, err = liteBounded(ctx, func(ctx context.Context, q string, args ...any) (int64, error) {
			return s.execRetried(ctx, it.DB, q, args...)
		}, s.names[it.Table], leaseCols, setArgs, where, args)
	} else {
		n, err = s.execRetried(ctx, it.DB, s.d.rebind(`UPDATE `+s.names[it.Table]+` SET `+leaseCols+` WHERE `+where), append(setArgs, args...)...)
	}
	if err != nil {
		return 0, fmt.Errorf("end leases %v: %w", it, err)
	}
	return int(n), nil
}

// ExtendHeld implements store.Store: one UPDATE per table (per
// heldChunk tokens), whatever the number of tasks, found through the
// leases index, and one transaction per database, so a heartbeat
// waits once for a busy writer (SQLite has one) rather than once per
// table. Rows another holder took since carry another token and are not
// touched; rows whose lease is not near its end are not written at all,
// so a heartbeat costs the store little when nothing is behind. On
// PostgreSQL it is one statement per database that skips the rows
// another write holds (extendPostgres).
func (s *Store) ExtendHeld(ctx context.Context, status task.Status, tokens []int64, except []string, soon, until time.Time) (_ int, err error) {
	defer classify(&err)
	if status != task.StatusClaimed && status != task.StatusRunning {
		return 0, fmt.Errorf("extend held: status %v is neither claimed nor running", status)
	}
	if len(tokens) == 0 {
		return 0, nil
	}
	skip := map[[2]int][]any{} // (db, table) → IDs given up there
	for _, id := range except {
		db, t, err := s.locate(id)
		if err != nil {
			continue
		}
		k := [2]int{db, t}
		skip[k] = append(skip[k], id)
	}
	now := time.Now().UnixMicro()
	perDB := make([]group, len(s.w))
	for db := range perDB {
		perDB[db] = group{db: db}
	}
	// where matches table t's rows of one chunk of tokens; args are
	// extendSet's, then its own.
	where := func(db, t int, chunk []int64) (string, []any) {
		q := extendWhere(s.cfg.Segments, len(chunk))
		args := make([]any, 0, 4+len(chunk))
		args = append(args, micros(until), now, int(status), micros(soon))
		for _, tok := range chunk {
			args = append(args, tok)
		}
		if ids := skip[[2]int{db, t}]; len(ids) > 0 {
			q += ` AND id NOT IN (` + placeholders(len(ids)) + `)`
			args = append(args, ids...)
		}
		return q, args
	}
	var mu sync.Mutex
	var total int64
	err = forEachGroup(perDB, func(g group) error {
		var n int64
		var err error
		switch s.d.name {
		case "postgres":
			n, err = s.extendPostgres(ctx, g.db, tokens, where)
		case "mysql":
			n, err = s.extendMySQL(ctx, g.db, tokens, where)
		default:
			err = s.retryTx(ctx, g.db, nil, func(tx *sql.Tx) error {
				n = 0
				// Table by table, each table's chunks together: a
				// transaction that came back to a table after the others
				// locked rows out of order with a Start's or a Finish's.
				for t := range s.names {
					for start := 0; start < len(tokens); start += heldChunk {
						w, args := where(g.db, t, tokens[start:min(start+heldChunk, len(tokens))])
						var k int64
						var err error
						if until.Before(soon) {
							// The rows written would still match: one
							// statement (never so in a heartbeat).
							k, err = execCount(ctx, tx, extendSet(s.names[t])+` WHERE `+w, args...)
						} else {
							k, err = liteBounded(ctx, func(ctx context.Context, q string, args ...any) (int64, error) {
								return execCount(ctx, tx, q, args...)
							}, s.names[t], leaseCols, args[:2], w, args[2:])
						}
						if err != nil {
							return err
						}
						n += k
					}
				}
				return nil
			})
		}
		if err != nil {
			return err
		}
		mu.Lock()
		total += n
		mu.Unlock()
		return nil
	})
	if err != nil {
		return int(total), fmt.Errorf("extend held: %w", err)
	}
	return int(total), nil
}

// extendPostgres extends one database's leases, per chunk of tokens one
// statement over every table (a data-modifying CTE per table), locking
// the rows it writes FOR UPDATE SKIP LOCKED. A heartbeat that waited for
// rows met a Start or a Finish locking the same rows in another order
// (several tables, several rows of a table): PostgreSQL finds such a
// deadlock only after deadlock_timeout (1 s by default), so every task
// of that Start, about a second's worth at a steady rate, went out a
// second late. A skipped row is being written by its Start (which sets
// its lease), its Finish, a cancel or a claim of another holder; should
// that write fail, the lease is still at least about a quarter of a lease
// away (heartbeats come that often and move what ends within half of one),
// far more than fire's or the completer's retry of the write takes.
func (s *Store) extendPostgres(ctx context.Context, db int, tokens []int64, where func(db, t int, chunk []int64) (string, []any)) (int64, error) {
	var total int64
	for start := 0; start < len(tokens); start += heldChunk {
		chunk := tokens[start:min(start+heldChunk, len(tokens))]
		var b strings.Builder
		var args []any
		b.WriteString("WITH ")
		for t, name := range s.names {
			// The subquery picks and locks the rows; the UPDATE writes
			// only those.
			w, wargs := where(db, t, chunk)
			if t > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "p%d AS (%s WHERE id IN (SELECT id FROM %s WHERE %s FOR UPDATE SKIP LOCKED) RETURNING 1)", t, extendSet(name), name, w)
			args = append(args, wargs...)
		}
		b.WriteString(" SELECT ")
		for t := range s.names {
			if t > 0 {
				b.WriteString(" + ")
			}
			fmt.Fprintf(&b, "(SELECT count(*) FROM p%d)", t)
		}
		q := s.d.rebind(b.String())
		var n int64
		err := withRetry(ctx, func() error {
			return s.w[db].QueryRowContext(ctx, q, args...).Scan(&n)
		})
		if err != nil {
			return total, err
		}
		total += n
	}
	return total, nil
}

// extendMySQL extends one database's leases (MariaDB, MySQL) in one
// transaction, table by table: a locking read of the rows through the
// leases index that skips the rows another write holds, then an UPDATE of
// those by primary key. An UPDATE through the leases index locked its
// entries, then each row: a Start, which locks the row and then moves its
// entry in that index, waited for it the other way round (InnoDB's
// deadlock report, keyed submits with deliveries running: 1–7 deadlocks
// in 15 s, each a Start retried whole). A skipped row is left as
// extendPostgres says.
func (s *Store) extendMySQL(ctx context.Context, db int, tokens []int64, where func(db, t int, chunk []int64) (string, []any)) (int64, error) {
	var n int64
	err := s.retryTx(ctx, db, nil, func(tx *sql.Tx) error {
		n = 0
		for t, name := range s.names {
			for start := 0; start < len(tokens); start += heldChunk {
				w, args := where(db, t, tokens[start:min(start+heldChunk, len(tokens))])
				// args are extendSet's two, then the WHERE's.
				ids, err := readIDs(ctx, tx, `SELECT id FROM `+name+s.leaseIndexHint(name)+` WHERE `+w+` FOR UPDATE SKIP LOCKED`, args[2:]...)
				if err != nil {
					return err
				}
				if len(ids) == 0 {
					continue
				}
				set := args[:2:2]
				for _, id := range ids {
					set = append(set, id)
				}
				k, err := execCount(ctx, tx, extendSet(name)+` WHERE id IN (`+placeholders(len(ids))+`)`, set...)
				if err != nil {
					return err
				}
				n += k
			}
		}
		return nil
	})
	return n, err
}

// execCount runs q in tx and returns the rows it changed.
func execCount(ctx context.Context, tx *sql.Tx, q string, args ...any) (int64, error) {
	res, err := tx.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// heldChunk bounds the tokens of one ExtendHeld statement.
const heldChunk = 500

// extendQuery extends the leases of n tokens' rows of one status in table
// t that end before a time, of a store of segments segments. It reads the
// leases index (schema21.go) in each segment from the leases that end
// first up to that time: the leases that need moving, not every lease held
// (the (status, id) index read a burst's whole backlog at every heartbeat).
func extendQuery(t string, segments, n int) string {
	return extendSet(t) + ` WHERE ` + extendWhere(segments, n)
}

// extendSet is a heartbeat's UPDATE of table t without its WHERE: two
// arguments, the new lease end and the time.
func extendSet(t string) string {
	return `UPDATE ` + t + ` SET ` + leaseCols
}

// leaseCols is what moving a lease writes, an extension or an end: the
// lease's end, the time.
const leaseCols = `lease_until = ?, updated_at = ?`

// extendWhere matches the rows of n tokens in one status whose leases end
// before a time (its arguments in that order).
func extendWhere(segments, n int) string {
	return segIn(segments) + ` AND ` + leaseHeld +
		` AND status = ? AND lease_until < ? AND token IN (` + placeholders(n) + `)`
}
