package scanjob

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ontimehq/ontime/internal/store"
)

// ErrBadRequest wraps a bad parameter of a request about a job.
var ErrBadRequest = errors.New("bad request")

// Info describes a job: its definition, its cluster-wide paused flag and,
// from Get, each item's persisted state. The HTTP layer renders it.
type Info struct {
	Name     string
	Kind     string // sql | go
	Cron     string
	TimeZone string
	Misfire  string
	Overlap  string
	Paused   bool
	Items    int
	NextFire time.Time   // the cron's next fire time
	Target   string      // a SQL job's process.target
	Index    *IndexCheck // a SQL job's index check; nil for Go jobs
	// State is StateOK, StateBroken or StateUnchecked (SQL jobs; Go jobs
	// are StateOK); a broken job's Error is the database's refusal,
	// naming the statement and table, and BrokenSince when it broke.
	State       string
	Error       string
	BrokenSince time.Time
	// ItemStates is each item, in the job's order (Get only).
	ItemStates []ItemInfo
}

// ItemInfo is one item of a job: its persisted state and who owns it now.
type ItemInfo struct {
	// State is the item as stored (State.Owner is the node that last took
	// it; zero but for Job and Item when no node has yet).
	State store.JobItem
	// Owner is the item's owner by the coordinator now.
	Owner string
}

func (s *Service) info(j *job) Info {
	s.mu.Lock()
	paused := s.flags[j.name].Paused
	s.mu.Unlock()
	in := Info{Name: j.name, Kind: j.kind, Cron: j.cron.String(), TimeZone: j.tz, Misfire: j.misfire,
		Overlap: j.overlap, Paused: paused, Items: len(j.items), NextFire: j.cron.Next(s.cfg.Clock.Now())}
	if j.sql != nil {
		in.Target = j.sql.Target
	}
	in.State = StateOK
	if h := j.health; h != nil {
		h.mu.Lock()
		in.State, in.Error, in.BrokenSince = h.state, h.err, h.since
		if h.index != nil {
			ic := *h.index
			in.Index = &ic
		}
		h.mu.Unlock()
	}
	return in
}

// List lists the jobs by name.
func (s *Service) List() []Info {
	names := make([]string, 0, len(s.jobs))
	for n := range s.jobs {
		names = append(names, n)
	}
	slices.Sort(names)
	out := make([]Info, 0, len(names))
	for _, n := range names {
		out = append(out, s.info(s.jobs[n]))
	}
	return out
}

// Get describes one job with its items' persisted state; owner maps
// coordinator keys to their owners (nil: this node owns everything).
func (s *Service) Get(ctx context.Context, name string, owner func(key string) string) (Info, error) {
	j := s.jobs[name]
	if j == nil {
		return Info{}, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	in := s.info(j)
	states, err := s.cfg.State.JobItems(ctx, name)
	if err != nil {
		return in, err
	}
	byItem := make(map[string]store.JobItem, len(states))
	for _, st := range states {
		byItem[st.Item] = st
	}
	for _, it := range j.items {
		st, ok := byItem[it]
		if !ok {
			st = store.JobItem{Job: name, Item: it}
		}
		ii := ItemInfo{State: st}
		if owner != nil {
			ii.Owner = owner(ItemKey(name, it))
		}
		in.ItemStates = append(in.ItemStates, ii)
	}
	return in, nil
}

// Runs lists a job's latest runs, newest first.
func (s *Service) Runs(ctx context.Context, name, item string, limit int) ([]store.JobRun, error) {
	j := s.jobs[name]
	if j == nil {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	if item != "" && !slices.Contains(j.items, item) {
		return nil, fmt.Errorf("%w: item: %q is not an item of job %s", ErrBadRequest, item, name)
	}
	return s.cfg.State.Runs(ctx, name, item, limit)
}

// Trigger asks every node to run the job's items it owns now.
func (s *Service) Trigger(ctx context.Context, name string) (Info, error) {
	j := s.jobs[name]
	if j == nil {
		return Info{}, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	if err := s.cfg.State.RequestTrigger(ctx, name); err != nil {
		return Info{}, err
	}
	s.Kick()
	return s.info(j), nil
}

// SetPaused pauses or resumes a job cluster wide: a paused job's triggers
// do nothing and its running items stop after their page; resumed, its
// unfinished runs carry on at the next trigger.
func (s *Service) SetPaused(ctx context.Context, name string, paused bool) (Info, error) {
	j := s.jobs[name]
	if j == nil {
		return Info{}, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	if err := s.cfg.State.SetPaused(ctx, name, paused); err != nil {
		return Info{}, err
	}
	if err := s.pollFlags(ctx); err != nil {
		return Info{}, err
	}
	return s.info(j), nil
}
