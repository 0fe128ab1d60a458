package scanjob

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ontimehq/ontime/apiv1"
)

// ErrBadRequest wraps a bad parameter of a view request.
var ErrBadRequest = errors.New("bad request")

func (s *Service) view(j *job) apiv1.JobView {
	s.mu.Lock()
	paused := s.flags[j.name].Paused
	s.mu.Unlock()
	v := apiv1.JobView{Name: j.name, Kind: j.kind, Cron: j.cron.String(), TimeZone: j.tz, Misfire: j.misfire,
		Overlap: j.overlap, Paused: paused, Items: len(j.items), NextFire: j.cron.Next(time.Now())}
	if j.sql != nil {
		v.Target = j.sql.Target
	}
	if j.index != nil {
		ic := *j.index
		v.Index = &apiv1.JobIndexView{Table: ic.Table, OK: ic.OK, Index: ic.Index, Warning: ic.Warning, Plan: ic.Plan}
	}
	return v
}

// List lists the jobs by name.
func (s *Service) List() []apiv1.JobView {
	names := make([]string, 0, len(s.jobs))
	for n := range s.jobs {
		names = append(names, n)
	}
	slices.Sort(names)
	out := make([]apiv1.JobView, 0, len(names))
	for _, n := range names {
		out = append(out, s.view(s.jobs[n]))
	}
	return out
}

// Get describes one job with its items' persisted state; owner maps
// coordinator keys to their owners (nil: this node owns everything).
func (s *Service) Get(ctx context.Context, name string, owner func(key string) string) (apiv1.JobView, error) {
	j := s.jobs[name]
	if j == nil {
		return apiv1.JobView{}, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	v := s.view(j)
	states, err := s.cfg.State.JobItems(ctx, name)
	if err != nil {
		return v, err
	}
	byItem := make(map[string]ItemState, len(states))
	for _, st := range states {
		byItem[st.Item] = st
	}
	for _, it := range j.items {
		st := byItem[it]
		iv := apiv1.JobItemView{Item: it, Holder: st.Owner, RunID: st.RunID, Cursor: st.Cursor, LastFire: st.LastFire}
		if owner != nil {
			iv.Owner = owner(ItemKey(name, it))
		}
		v.ItemStates = append(v.ItemStates, iv)
	}
	return v, nil
}

// Runs lists a job's latest runs, newest first.
func (s *Service) Runs(ctx context.Context, name, item string, limit int) ([]apiv1.JobRun, error) {
	j := s.jobs[name]
	if j == nil {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	if item != "" && !slices.Contains(j.items, item) {
		return nil, fmt.Errorf("%w: item: %q is not an item of job %s", ErrBadRequest, item, name)
	}
	runs, err := s.cfg.State.Runs(ctx, name, item, limit)
	if err != nil {
		return nil, err
	}
	out := make([]apiv1.JobRun, len(runs))
	for i, r := range runs {
		out[i] = apiv1.JobRun{ID: r.ID, Job: r.Job, Item: r.Item, Node: r.Node, Trigger: r.Trigger, FireAt: r.FireAt,
			StartedAt: r.StartedAt, EndedAt: r.EndedAt, Fetched: r.Fetched, Processed: r.Processed, Failed: r.Failed,
			Left: r.Left, Cursor: r.Cursor, Status: r.Status, Error: r.Error}
	}
	return out, nil
}

// Trigger asks every node to run the job's items it owns now.
func (s *Service) Trigger(ctx context.Context, name string) (apiv1.JobView, error) {
	j := s.jobs[name]
	if j == nil {
		return apiv1.JobView{}, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	if err := s.cfg.State.RequestTrigger(ctx, name); err != nil {
		return apiv1.JobView{}, err
	}
	s.Kick()
	return s.view(j), nil
}

// SetPaused pauses or resumes a job cluster wide: a paused job's triggers
// do nothing and its running items stop after their page; resumed, its
// unfinished runs carry on at the next trigger.
func (s *Service) SetPaused(ctx context.Context, name string, paused bool) (apiv1.JobView, error) {
	j := s.jobs[name]
	if j == nil {
		return apiv1.JobView{}, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	if err := s.cfg.State.SetPaused(ctx, name, paused); err != nil {
		return apiv1.JobView{}, err
	}
	if err := s.pollFlags(ctx); err != nil {
		return apiv1.JobView{}, err
	}
	return s.view(j), nil
}
