package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// Finish records delivery outcomes under their tokens: one transaction per
// database; done rows in one statement per table.
func (s *Store) Finish(ctx context.Context, outcomes []store.Outcome) (err error) {
	defer classify(&err)
	if s.liteOps != nil {
		return s.finishLite(ctx, outcomes)
	}
	refs := make([]store.Ref, len(outcomes))
	for i, o := range outcomes {
		refs[i] = o.Ref
	}
	err = s.perDBTx(ctx, s.refGroups(refs), func(tx *sql.Tx, groups []group) error {
		for _, g := range groups {
			if err := s.finishGroup(ctx, tx, g, outcomes); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("finish: %w", err)
	}
	return nil
}

func (s *Store) finishGroup(ctx context.Context, tx *sql.Tx, g group, outcomes []store.Outcome) error {
	t := s.names[g.table]
	now := time.Now().UnixMicro()
	var done []store.Ref
	retries := map[retryKey][]store.Ref{}
	var keys []retryKey // in first-seen order
	for _, i := range g.idx {
		o := outcomes[i]
		switch {
		case o.Done:
			done = append(done, o.Ref)
		case o.Dead, o.Cancelled:
			final := task.StatusDead
			if o.Cancelled {
				final = task.StatusCancelled
			}
			if _, err := tx.ExecContext(ctx, s.d.rebind(`UPDATE `+t+` SET status = ?, last_error = ?, owner = NULL, lease_until = 0, updated_at = ?
				WHERE id = ? AND token = ? AND status = ?`), int(final), truncate(o.Error), now, o.ID, o.Token, int(task.StatusRunning)); err != nil {
				return err
			}
		default:
			k := retryKeyOf(o)
			if _, ok := retries[k]; !ok {
				keys = append(keys, k)
			}
			retries[k] = append(retries[k], o.Ref)
		}
	}
	// Retries that share their new state — the tasks one refusal of an
	// open breaker deferred to the same instant, with the same error — in
	// one statement per batchLimit rows, not one each.
	for _, k := range keys {
		refs := retries[k]
		var owner any
		if k.owner != "" {
			owner = k.owner
		}
		for start := 0; start < len(refs); start += batchLimit {
			match, margs := refMatch(refs[start:min(start+batchLimit, len(refs))])
			if _, err := tx.ExecContext(ctx, s.d.rebind(`UPDATE `+t+` SET status = ?, due_at = ?, last_error = ?, attempts = attempts - ?, owner = ?, lease_until = ?, token = ?, updated_at = ?
				WHERE status = ? AND `+match), append([]any{int(k.status), k.due, k.err, k.undo, owner, k.lease, k.token, now, int(task.StatusRunning)}, margs...)...); err != nil {
				return err
			}
		}
	}
	for start := 0; start < len(done); start += batchLimit {
		match, margs := refMatch(done[start:min(start+batchLimit, len(done))])
		if _, err := tx.ExecContext(ctx, s.d.rebind(`UPDATE `+t+` SET status = ?, owner = NULL, lease_until = 0, updated_at = ? WHERE status = ? AND `+match),
			append([]any{int(task.StatusDone), now, int(task.StatusRunning)}, margs...)...); err != nil {
			return err
		}
	}
	return nil
}

// retryKey is the new state of a retried task (Finish).
type retryKey struct {
	status       task.Status
	due          int64
	err          string
	undo         int
	owner        string
	lease, token int64
}

// retryKeyOf is the new state of a retried outcome: pending at its retry
// time, or, due within the window, claimed under the caller's new lease
// (it puts it in the hot tier).
func retryKeyOf(o store.Outcome) retryKey {
	k := retryKey{status: task.StatusPending, due: micros(o.RetryAt), err: truncate(o.Error)}
	if o.NotAttempted {
		k.undo = 1
	}
	if o.Claim != nil {
		k.status, k.owner, k.lease, k.token = task.StatusClaimed, o.Claim.Owner, micros(o.Claim.Until), o.Claim.Token
	}
	return k
}

func truncate(s string) string { return store.ErrorText(s) }
