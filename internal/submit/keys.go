package submit

import (
	"context"
	"errors"
	"time"

	"github.com/ontimehq/ontime/internal/hot"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// GetByKey returns the task a key names: its live task, else the one that
// ended last.
func (s *Service) GetByKey(ctx context.Context, topic, key string) (*task.Task, error) {
	if err := checkKey(topic, key); err != nil {
		return nil, err
	}
	return s.cfg.Store.GetByKey(ctx, topic, key)
}

// CancelByKey cancels the live task of a key. A key whose task is already
// cancelled returns it (cancel is idempotent); done and dead give a
// conflict, like a cancel by ID.
func (s *Service) CancelByKey(ctx context.Context, topic, key string) (*task.Task, error) {
	t, err := s.GetByKey(ctx, topic, key)
	if err != nil {
		return nil, err
	}
	return s.Cancel(ctx, t.ID)
}

// UpdateByKey changes the live task of a key, as Update.
func (s *Service) UpdateByKey(ctx context.Context, topic, key string, p task.PatchSpec) (*task.Task, error) {
	if err := checkKey(topic, key); err != nil {
		return nil, err
	}
	v, err := task.ValidatePatch(p, s.cfg.Limits, time.Now())
	if err != nil {
		return nil, err
	}
	t, err := s.cfg.Store.GetByKey(ctx, topic, key)
	if err != nil {
		return nil, err
	}
	if err := s.untargeted(&v, t.Topic); err != nil {
		return nil, err
	}
	return s.update(ctx, t.ID, v)
}

// Update changes a pending or claimed task: any of its due time, payload,
// target and max_attempts. Running and final tasks give a conflict.
func (s *Service) Update(ctx context.Context, id string, p task.PatchSpec) (*task.Task, error) {
	v, err := task.ValidatePatch(p, s.cfg.Limits, time.Now())
	if err != nil {
		return nil, err
	}
	if v.Target != nil && *v.Target == "" {
		// Its topic decides: read the task (only for this rare patch).
		t, err := s.cfg.Store.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		if err := s.untargeted(&v, t.Topic); err != nil {
			return nil, err
		}
	}
	return s.update(ctx, id, v)
}

// untargeted resolves a patch that removes a task's target as a submit
// without one is (task.Limits.Untargeted): the topic's default target, or
// its Go handler when a live node has one, or ErrNoHandler.
func (s *Service) untargeted(v *task.ValidPatch, topic string) error {
	if v.Target == nil || *v.Target != "" {
		return nil
	}
	target, err := s.cfg.Limits.Untargeted(topic, false)
	if err != nil {
		return err
	}
	v.Target = &target
	return nil
}

// update writes a validated patch. A new due time replaces the task's
// claim in the same row write, which voids the token whoever held it
// (this node's tier, another node's, the shared Redis tier) would start it
// with: held at its old time, it can no longer start. Then:
//
//   - due within the window: the row is claimed by this node under a new
//     token and put in this node's tier, like a submit, so a task moved
//     earlier is delivered at its new time (never before: fire releases at
//     the due time), whichever node scans its item;
//   - due later: the row is pending and its item's scanner claims it when
//     its new time enters the window.
//
// The old entry is dropped from this node's tier (and so from a shared
// Redis tier) only to spare a Start that would fail.
func (s *Service) update(ctx context.Context, id string, v task.ValidPatch) (*task.Task, error) {
	if !s.ready.Load() {
		return nil, ErrNotReady
	}
	now := time.Now()
	p := store.Patch{DueAt: v.DueAt, Payload: v.Payload, Target: v.Target, MaxAttempts: v.MaxAttempts, Retry: v.Retry}
	if v.DueAt != nil && !v.DueAt.After(now.Add(s.cfg.Window)) {
		p.Claim = &store.Lease{Owner: s.cfg.NodeID, Until: v.DueAt.Add(s.cfg.LeaseTTL), Token: s.token()}
	}
	t, err := s.cfg.Store.Update(ctx, id, p)
	if err != nil {
		return nil, err
	}
	if v.DueAt == nil {
		return t, nil // the claim stands: Start reads the new fields from the row
	}
	s.m.Submitted.WithLabelValues("updated").Inc()
	if err := s.cfg.Tier.Remove(ctx, hot.Entry{ID: id, Topic: t.Topic}); err != nil && !errors.Is(err, hot.ErrClosed) {
		s.log.Debug("hot tier remove", "id", id, "err", err)
	}
	if p.Claim != nil {
		if err := s.cfg.Tier.Add(ctx, s.cfg.Planner.Entry(now, t.ID, t.Topic, t.DueAt, p.Claim.Token)); err != nil {
			s.log.Warn("hot tier add failed; the task waits for its lease to expire", "id", id, "err", err)
		}
	} else {
		s.cfg.Notifier.Notify(s.item(t.ShardHash, t.Seg), t.DueAt.Add(-s.cfg.Window))
	}
	return t, nil
}

// replace applies submits with if_exists: replace whose key named a live
// task: each such task is updated with the submit's fields. A task that
// started meanwhile gives that spec a conflict. A final task never holds
// a key against a replace: the store made a new task instead
// (store.NewTask.ReplaceFinal), and the same replace sent again meets
// that task, live, and updates it with the same fields, so a retried
// replace creates nothing more. (Once the task it made has ended, a
// further replace makes another: a replace asks for delivery.)
func (s *Service) replace(ctx context.Context, results []Result, specs []task.Spec, valid []task.Validated) {
	for i := range results {
		r := &results[i]
		if r.Err != nil || !r.Existing || !specs[i].Replace || !store.Live(r.Task.Status) {
			continue
		}
		t, err := s.update(ctx, r.Task.ID, valid[i].AsPatch())
		if err != nil {
			r.Err, r.Task = err, nil
			continue
		}
		r.Task = t
	}
}

func checkKey(topic, key string) error {
	if err := task.ValidateTopic(topic); err != nil {
		return err
	}
	return task.ValidateKey(key)
}
