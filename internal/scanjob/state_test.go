package scanjob

import (
	"cmp"
	"context"
	"fmt"
	"github.com/ontimehq/ontime/internal/store"
	"slices"
	"strings"
	"sync"
	"time"
)

// memState is State in memory, statement for statement what sqlstore's
// jobs.go does (times kept as sqlstore keeps them: Unix microseconds,
// zero for none, read back in UTC); TestStateContract in the external
// test package runs one sequence on both and compares every answer.
type memState struct {
	mu    sync.Mutex
	flags map[string]store.JobFlags
	items map[string]*store.JobItem // job + "\x00" + item
	runs  map[string]*store.JobRun

	// What tests look at: how often flags were read (the loop reads them
	// on every poll), and the cutoffs DeleteRuns was called with.
	flagReads int
	cutoffs   []time.Time
}

func newMemState() *memState {
	return &memState{flags: map[string]store.JobFlags{}, items: map[string]*store.JobItem{}, runs: map[string]*store.JobRun{}}
}

// NewMemState returns the in-memory State, for the external tests.
func NewMemState() State { return newMemState() }

var _ State = (*memState)(nil)

// micro is a time as sqlstore stores and reads it.
func micro(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return time.UnixMicro(t.UnixMicro()).UTC()
}

func (m *memState) JobFlags(context.Context) (map[string]store.JobFlags, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.flagReads++
	out := make(map[string]store.JobFlags, len(m.flags))
	for k, v := range m.flags {
		out[k] = v
	}
	return out, nil
}

func (m *memState) SetPaused(_ context.Context, job string, paused bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.flags[job]
	f.Paused = paused
	m.flags[job] = f
	return nil
}

func (m *memState) RequestTrigger(_ context.Context, job string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.flags[job]
	f.TriggerSeq++
	m.flags[job] = f
	return nil
}

func (m *memState) TakeItem(_ context.Context, job, item, node string, token int64, now time.Time) (store.JobItem, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.items[job+"\x00"+item]
	if st == nil {
		st = &store.JobItem{Job: job, Item: item, Created: micro(now)}
		m.items[job+"\x00"+item] = st
	}
	was := *st
	st.Owner, st.Token = node, token
	if was.RunID != "" {
		if r := m.runs[was.RunID]; r != nil && r.Status == store.RunRunning && r.Node != node {
			r.Status, r.EndedAt = store.RunLost, micro(now)
		}
	}
	return was, nil
}

func (m *memState) StartRun(_ context.Context, r *store.JobRun, token int64) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.items[r.Job+"\x00"+r.Item]
	if st == nil || st.Token != token {
		return false, nil
	}
	if _, dup := m.runs[r.ID]; dup {
		return false, fmt.Errorf("start job run: run %s exists", r.ID)
	}
	st.RunID, st.Cursor = r.ID, r.Cursor
	if f := micro(r.FireAt); st.LastFire.Before(f) {
		st.LastFire = f
	}
	m.runs[r.ID] = &store.JobRun{ID: r.ID, Job: r.Job, Item: r.Item, Node: r.Node, Trigger: r.Trigger, FireAt: micro(r.FireAt),
		StartedAt: micro(r.StartedAt), Cursor: r.Cursor, Status: r.Status}
	return true, nil
}

func (m *memState) SaveRun(_ context.Context, r *store.JobRun, token int64, finished bool) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.items[r.Job+"\x00"+r.Item]
	if st == nil || st.Token != token {
		return false, nil
	}
	st.RunID, st.Cursor = r.ID, r.Cursor
	if finished {
		st.RunID = ""
	}
	if row := m.runs[r.ID]; row != nil {
		errText := r.Error
		if len(errText) > 1000 {
			errText = strings.ToValidUTF8(errText[:1000], "")
		}
		row.Fetched, row.Processed, row.Failed, row.Left = r.Fetched, r.Processed, r.Failed, r.Left
		row.Cursor, row.Status, row.Error, row.EndedAt = r.Cursor, r.Status, errText, micro(r.EndedAt)
	}
	return true, nil
}

func (m *memState) JobItems(_ context.Context, job string) ([]store.JobItem, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []store.JobItem
	for _, st := range m.items {
		if st.Job == job {
			out = append(out, *st)
		}
	}
	slices.SortFunc(out, func(a, b store.JobItem) int { return strings.Compare(a.Item, b.Item) })
	return out, nil
}

func (m *memState) Runs(_ context.Context, job, item string, limit int) ([]store.JobRun, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []store.JobRun
	for _, r := range m.runs {
		if r.Job == job && (item == "" || r.Item == item) {
			out = append(out, *r)
		}
	}
	slices.SortFunc(out, func(a, b store.JobRun) int {
		return cmp.Or(b.StartedAt.Compare(a.StartedAt), strings.Compare(b.ID, a.ID))
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func (m *memState) DeleteRuns(_ context.Context, cutoff time.Time) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cutoffs = append(m.cutoffs, cutoff)
	var n int64
	for id, r := range m.runs {
		if !r.EndedAt.IsZero() && r.EndedAt.UnixMicro() < cutoff.UnixMicro() {
			delete(m.runs, id)
			n++
		}
	}
	return n, nil
}

// Helpers of the tests.

func (m *memState) run(id string) store.JobRun {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.runs[id]; r != nil {
		return *r
	}
	return store.JobRun{}
}

func (m *memState) item(job, item string) store.JobItem {
	m.mu.Lock()
	defer m.mu.Unlock()
	if st := m.items[job+"\x00"+item]; st != nil {
		return *st
	}
	return store.JobItem{}
}

// allRuns lists the job's runs oldest first.
func (m *memState) allRuns(job string) []store.JobRun {
	rs, _ := m.Runs(context.Background(), job, "", 1<<30)
	slices.Reverse(rs)
	return rs
}

func (m *memState) reads() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.flagReads
}

func (m *memState) deletes() []time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.cutoffs)
}
