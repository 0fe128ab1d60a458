package sqlstore

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
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
	q := `UPDATE ` + s.names[it.Table] + ` SET lease_until = ?, updated_at = ? WHERE seg = ? AND lease_until >= ? AND `
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
		// Sorted: the statement's text is the same for the same holders.
		for _, node := range slices.Sorted(maps.Keys(h.Restarted)) {
			if at := h.Restarted[node]; !at.IsZero() {
				q += ` OR (owner = ? AND updated_at < ?)`
				args = append(args, node, micros(at))
			}
		}
		q += `)`
	}
	var n int64
	err = withRetry(ctx, func() error {
		res, err := s.w[it.DB].ExecContext(ctx, s.d.rebind(q), args...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("end leases %v: %w", it, err)
	}
	return int(n), nil
}
