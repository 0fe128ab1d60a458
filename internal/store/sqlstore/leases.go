package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strconv"
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
	q := `UPDATE ` + s.names[it.Table] + ` SET lease_until = ?, updated_at = ? WHERE seg = ?` + s.owned(it.DB) + ` AND lease_until >= ? AND `
	args := []any{micros(now) - 1, time.Now().UnixMicro(), it.Segment, micros(now)}
	if h.ClaimedOnly {
		q += `status = ?`
		args = append(args, int(task.StatusClaimed))
	} else {
		q += `status IN (?, ?)`
		args = append(args, int(task.StatusClaimed), int(task.StatusRunning))
	}
	owners, op := h.Only, "IN"
	if owners == nil {
		owners, op = h.Except, "NOT IN"
	}
	if len(owners) > 0 {
		q += ` AND (owner ` + op + ` (?` + strings.Repeat(", ?", len(owners)-1) + `)`
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
				q += ` OR (owner = ? AND token >= ? AND (token < ? OR token > ?))`
				args = append(args, node, store.AttributedTokens, lo, hi)
			}
		}
		for _, node := range slices.Sorted(maps.Keys(h.Restarted)) {
			if at := h.Restarted[node]; !at.IsZero() {
				if h.Incarnations[node] != 0 {
					q += ` OR (owner = ? AND token < ? AND updated_at < ?)`
					args = append(args, node, store.AttributedTokens, micros(at))
				} else {
					q += ` OR (owner = ? AND updated_at < ?)`
					args = append(args, node, micros(at))
				}
			}
		}
		q += `)`
	}
	n, err := s.execRetried(ctx, it.DB, s.d.rebind(q), args...)
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
// so a heartbeat costs the store little when nothing is behind.
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
	var mu sync.Mutex
	var total int64
	err = forEachGroup(perDB, func(g group) error {
		var n int64
		err := s.retryTx(ctx, g.db, nil, func(tx *sql.Tx) error {
			n = 0
			for start := 0; start < len(tokens); start += heldChunk {
				part := tokens[start:min(start+heldChunk, len(tokens))]
				for t, name := range s.names {
					q := extendQuery(name, s.cfg.Segments, len(part))
					args := make([]any, 0, 4+len(part))
					args = append(args, micros(until), now, int(status), micros(soon))
					for _, tok := range part {
						args = append(args, tok)
					}
					if ids := skip[[2]int{g.db, t}]; len(ids) > 0 {
						q += ` AND id NOT IN (` + placeholders(len(ids)) + `)`
						args = append(args, ids...)
					}
					res, err := tx.ExecContext(ctx, s.d.rebind(q), args...)
					if err != nil {
						return err
					}
					k, err := res.RowsAffected()
					if err != nil {
						return err
					}
					n += k
				}
			}
			return nil
		})
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

// heldChunk bounds the tokens of one ExtendHeld statement.
const heldChunk = 500

// extendQuery extends the leases of n tokens' rows of one status in table
// t that end before a time, of a store of segments segments. It reads the
// leases index (schema21.go) in each segment from the leases that end
// first up to that time: the leases that need moving, not every lease held
// (the (status, id) index read a burst's whole backlog at every heartbeat).
func extendQuery(t string, segments, n int) string {
	segs := make([]string, segments)
	for i := range segs {
		segs[i] = strconv.Itoa(i)
	}
	return `UPDATE ` + t + ` SET lease_until = ?, updated_at = ? WHERE seg IN (` + strings.Join(segs, ", ") + `) AND ` + leaseHeld +
		` AND status = ? AND lease_until < ? AND token IN (` + placeholders(n) + `)`
}
