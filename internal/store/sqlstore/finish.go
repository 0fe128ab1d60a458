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
// database; done rows in one statement per table (PostgreSQL: one
// statement per database; MariaDB: the transaction in one query;
// onestatement.go).
func (s *Store) Finish(ctx context.Context, outcomes []store.Outcome) (err error) {
	defer classify(&err)
	if err := s.fenced(); err != nil {
		return err
	}
	if s.liteOps != nil {
		return s.finishLite(ctx, outcomes)
	}
	refs := make([]store.Ref, len(outcomes))
	for i, o := range outcomes {
		refs[i] = o.Ref
	}
	now := time.Now().UnixMicro()
	err = forEachDB(s.refGroups(refs), func(gs []group) error {
		var parts []stmtPart
		for _, g := range gs {
			parts = append(parts, s.finishParts(g, outcomes, now)...)
		}
		switch {
		case !s.writeAsOne(gs):
			// Too many rows for one round trip: the transaction below.
		case s.d.name == "postgres":
			q, args := joinParts(parts, false)
			_, err := s.execRetried(ctx, gs[0].db, s.d.rebind(q), args...)
			return err
		default:
			return s.runMultiRetried(ctx, gs[0].db, func() []*multiQuery {
				m := &multiQuery{}
				m.q.WriteString("START TRANSACTION")
				for _, p := range parts {
					m.q.WriteString(";")
					m.q.WriteString(p.q)
					m.args = append(m.args, p.args...)
				}
				m.q.WriteString(";COMMIT")
				return []*multiQuery{m}
			})
		}
		return s.retryTx(ctx, gs[0].db, nil, func(tx *sql.Tx) error {
			for _, p := range parts {
				if _, err := tx.ExecContext(ctx, s.d.rebind(p.q), p.args...); err != nil {
					return err
				}
			}
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("finish: %w", err)
	}
	return nil
}

// finishParts are the writes of one table's outcomes, as groupOutcomes
// groups them, in their order.
func (s *Store) finishParts(g group, outcomes []store.Outcome, now int64) []stmtPart {
	t := s.names[g.table]
	og := groupOutcomes(g, outcomes)
	var parts []stmtPart
	for _, o := range og.final {
		parts = append(parts, stmtPart{`UPDATE ` + t + ` SET status = ?, last_error = ?, owner = NULL, lease_until = 0, updated_at = ?
			WHERE id = ? AND token = ? AND status = ?`, []any{int64(finalStatus(o)), truncate(o.Error), now, o.ID, o.Token, int64(task.StatusRunning)}})
	}
	for _, k := range og.keys {
		refs := og.retries[k]
		for start := 0; start < len(refs); start += batchLimit {
			match, margs := refMatch(refs[start:min(start+batchLimit, len(refs))])
			args := append(k.appendSet(make([]any, 0, 9+len(margs))), now, int64(task.StatusRunning))
			parts = append(parts, stmtPart{`UPDATE ` + s.byID(t) + ` SET status = ?, due_at = ?, ` + setMovedRetry + `, last_error = ?, attempts = attempts - ?, owner = ?, lease_until = ?, token = ?, updated_at = ?
				WHERE status = ? AND ` + match, append(args, margs...)})
		}
	}
	for _, o := range og.results {
		parts = append(parts, stmtPart{`UPDATE ` + t + ` SET status = ?, result = ?, owner = NULL, lease_until = 0, updated_at = ?
			WHERE id = ? AND token = ? AND status = ?`, []any{int64(task.StatusDone), o.Result, now, o.ID, o.Token, int64(task.StatusRunning)}})
	}
	for start := 0; start < len(og.done); start += batchLimit {
		match, margs := refMatch(og.done[start:min(start+batchLimit, len(og.done))])
		parts = append(parts, stmtPart{`UPDATE ` + s.byID(t) + ` SET status = ?, owner = NULL, lease_until = 0, updated_at = ? WHERE status = ? AND ` + match,
			append([]any{int64(task.StatusDone), now, int64(task.StatusRunning)}, margs...)})
	}
	return parts
}

// outcomeGroups are one table's outcomes as the statements that write
// them, in the order Finish runs those: each dead or cancelled outcome
// alone (rare: dead letters, cancels), then retries that share their new
// state — the tasks one refusal of an open breaker deferred to the same
// instant, with the same error — together, not one each; then every done
// one together.
type outcomeGroups struct {
	final   []store.Outcome // dead and cancelled, in their order
	keys    []retryKey      // the retries' new states, first seen first
	retries map[retryKey][]store.Ref
	done    []store.Ref
	results []store.Outcome // done with a result: one statement each
}

// groupOutcomes groups the outcomes of g (one table) for finishParts and
// SQLite's finishRuns.
func groupOutcomes(g group, outcomes []store.Outcome) outcomeGroups {
	og := outcomeGroups{retries: map[retryKey][]store.Ref{}}
	for _, i := range g.idx {
		o := outcomes[i]
		switch {
		case o.Done && o.Result != nil:
			og.results = append(og.results, o)
		case o.Done:
			og.done = append(og.done, o.Ref)
		case o.Dead, o.Cancelled:
			og.final = append(og.final, o)
		default:
			k := retryKeyOf(o)
			if _, ok := og.retries[k]; !ok {
				og.keys = append(og.keys, k)
			}
			og.retries[k] = append(og.retries[k], o.Ref)
		}
	}
	return og
}

// finalStatus is the status a dead or cancelled outcome ends in.
func finalStatus(o store.Outcome) task.Status {
	if o.Cancelled {
		return task.StatusCancelled
	}
	return task.StatusDead
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

// appendSet appends the SET values of a retry's statement, in the order of
// its columns: status, due_at, last_error, the attempt to undo, owner
// (NULL for none), lease_until, token.
func (k retryKey) appendSet(args []any) []any {
	var owner any
	if k.owner != "" {
		owner = k.owner
	}
	return append(args, int64(k.status), k.due, k.err, int64(k.undo), owner, k.lease, k.token)
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
