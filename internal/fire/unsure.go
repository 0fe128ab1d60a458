package fire

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/ontimehq/ontime/internal/hot"
	"github.com/ontimehq/ontime/internal/task"
)

// A Start that fails may have committed: the store crashed after the
// commit and before its answer (PostgreSQL killed, a connection reset).
// Its entries are retried a second later; the retry's Start then finds
// the rows running under the entries' own tokens and starts nothing, and
// nobody delivers them until their running lease (delivery.lease_ttl, 30 s
// by default) runs out. Measured: 2 nodes, PostgreSQL crashed twice for
// 10 s, 24 tasks more than 30 s late (max 52 s), every one in a Start
// that failed with "unexpected EOF" or "connection reset by peer".
//
// So the firer remembers the entries of a failed Start (unsure), and when
// one of them loses its retried Start, reads its row: running under the
// entry's token — which only this node's Start of that entry could have
// written, and this node delivered nothing of it — it is this node's to
// deliver, under the lease that Start wrote.

// maxUnsure bounds the entries remembered: past it, the oldest answers are
// lost and those tasks wait for their leases as before.
const maxUnsure = 100000

// unsure is the entries whose Start failed, by task ID, with their tokens.
type unsure struct {
	mu sync.Mutex
	by map[string]int64
}

// add remembers entries whose Start failed.
func (u *unsure) add(entries []hot.Entry) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.by == nil {
		u.by = map[string]int64{}
	}
	for _, en := range entries {
		if len(u.by) >= maxUnsure {
			return
		}
		u.by[en.ID] = en.Token
	}
}

// take forgets entries and returns those that were remembered with their
// token and are not among started.
func (u *unsure) take(entries []hot.Entry, started []*task.Task) []hot.Entry {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.by) == 0 {
		return nil
	}
	won := make(map[string]bool, len(started))
	for _, t := range started {
		won[t.ID] = true
	}
	var out []hot.Entry
	for _, en := range entries {
		tok, ok := u.by[en.ID]
		if !ok {
			continue
		}
		delete(u.by, en.ID)
		if tok == en.Token && !won[en.ID] {
			out = append(out, en)
		}
	}
	return out
}

// startedBefore returns the tasks of entries that an earlier Start of this
// node did start (running under the entry's token, lease not over), and
// the earliest of their leases.
func (f *Firer) startedBefore(ctx context.Context, entries []hot.Entry) ([]*task.Task, time.Time) {
	g, ok := f.cfg.Store.(taskGetter)
	if !ok || len(entries) == 0 {
		return nil, time.Time{}
	}
	var out []*task.Task
	var lease time.Time
	now := time.Now()
	for _, en := range entries {
		t, err := g.Get(ctx, en.ID)
		if err != nil {
			continue // the store is away again: the lease covers it
		}
		if t.Status != task.StatusRunning || t.Token != en.Token || !t.LeaseUntil.After(now) {
			continue
		}
		out = append(out, t)
		if lease.IsZero() || t.LeaseUntil.Before(lease) {
			lease = t.LeaseUntil
		}
	}
	slices.SortFunc(out, func(a, b *task.Task) int { return a.DueAt.Compare(b.DueAt) }) // release's order
	return out, lease
}
