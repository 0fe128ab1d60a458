package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ontimehq/ontime/internal/hot"
	"github.com/ontimehq/ontime/internal/router"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/submit"
	"github.com/ontimehq/ontime/internal/task"
)

// ErrNotReady is returned while the engine is not started or is stopping.
var ErrNotReady = submit.ErrNotReady

// Submit validates specs, stores the valid ones and answers one result per
// spec. A task due within the window is inserted already claimed by this
// node and goes to the hot tier once its row has committed.
func (e *Engine) Submit(ctx context.Context, specs []task.Spec) ([]submit.Result, error) {
	if !e.started.Load() || e.stopping.Load() {
		return nil, ErrNotReady
	}
	now := time.Now()
	results := make([]submit.Result, len(specs))
	news := make([]store.NewTask, 0, len(specs))
	pos := make([]int, 0, len(specs))
	horizon := now.Add(e.cfg.Window)
	// One claim token for the tasks of one submit: they travel together,
	// and the store matches them in one predicate.
	token := newToken()
	for i, s := range specs {
		v, err := task.Validate(s, e.cfg.Limits, now)
		if err != nil {
			e.m.Submitted.WithLabelValues("invalid").Inc()
			results[i].Err = err
			continue
		}
		hash := uint32(0)
		if v.Key != "" {
			hash = router.HashKey(v.Key)
		}
		id, parsed := router.NewID(now, hash, v.Key != "")
		nt := store.NewTask{ID: id, ShardHash: parsed.ShardHash, Seg: parsed.Segment(e.cfg.Segments), Validated: v}
		if !v.DueAt.After(horizon) {
			nt.Claim = &store.Lease{Owner: e.cfg.NodeID, Until: v.DueAt.Add(e.cfg.LeaseTTL), Token: token}
		}
		news = append(news, nt)
		pos = append(pos, i)
	}
	if len(news) == 0 {
		return results, nil
	}
	ins, err := e.store.Insert(ctx, news)
	if err != nil {
		return nil, fmt.Errorf("submit: %w", err)
	}
	var entries []hot.Entry
	for j, r := range ins {
		results[pos[j]] = submit.Result{Task: r.Task, Existing: r.Existing}
		if r.Existing {
			e.m.Submitted.WithLabelValues("existing").Inc()
			continue
		}
		e.m.Submitted.WithLabelValues("created").Inc()
		if nt := news[j]; nt.Claim != nil {
			entries = append(entries, e.entry(now, nt.ID, nt.Topic, nt.DueAt, nt.Claim.Token))
		} else {
			e.scanners.notify(e.item(nt.ShardHash, nt.Seg), nt.DueAt.Add(-e.cfg.Window))
		}
	}
	if len(entries) > 0 {
		// The rows are committed and claimed: if this Add fails the tasks are
		// not lost, only late, delivered after their lease expires.
		if err := e.tier.Add(ctx, entries...); err != nil {
			e.log.Warn("hot tier add failed; tasks wait for lease expiry", "count", len(entries), "err", err)
		}
	}
	return results, nil
}

// Get returns a task by ID.
func (e *Engine) Get(ctx context.Context, id string) (*task.Task, error) {
	return e.store.Get(ctx, id)
}

// Cancel cancels a pending or claimed task.
func (e *Engine) Cancel(ctx context.Context, id string) (*task.Task, error) {
	t, err := e.store.Cancel(ctx, id)
	if err != nil {
		return nil, err
	}
	// The row decides; dropping the hot entry only saves a useless Start.
	if err := e.tier.Remove(ctx, hot.Entry{ID: id, Topic: t.Topic}); err != nil && !errors.Is(err, hot.ErrClosed) {
		e.log.Debug("hot tier remove", "id", id, "err", err)
	}
	return t, nil
}

// Requeue returns a dead task to pending, due now.
func (e *Engine) Requeue(ctx context.Context, id string) (*task.Task, error) {
	t, err := e.store.Requeue(ctx, id, time.Now())
	if err != nil {
		return nil, err
	}
	e.scanners.notify(e.item(t.ShardHash, t.Seg), t.DueAt.Add(-e.cfg.Window))
	return t, nil
}

// List lists tasks.
func (e *Engine) List(ctx context.Context, f store.ListFilter) ([]*task.Task, error) {
	return e.store.List(ctx, f)
}

// Ready reports whether the engine runs and its store answers.
func (e *Engine) Ready(ctx context.Context) error {
	if !e.started.Load() || e.stopping.Load() {
		return ErrNotReady
	}
	return e.store.Ping(ctx)
}
