package fire

import (
	"context"
	"time"

	"github.com/ontimehq/ontime/internal/hot"
	"github.com/ontimehq/ontime/internal/task"
)

// taskGetter reads one task by ID (the SQL store does). Without it, a
// claim whose entry was lost waits out its lease.
type taskGetter interface {
	Get(ctx context.Context, id string) (*task.Task, error)
}

// tierAdder is the feeding side of the tier (every tier has it).
type tierAdder interface {
	Add(ctx context.Context, entries ...hot.Entry) error
}

// restoreLost looks, in the background, at the rows of entries whose Start
// lost (started holds those that won).
func (f *Firer) restoreLost(ctx context.Context, entries []hot.Entry, started []*task.Task) {
	won := make(map[string]bool, len(started))
	for _, t := range started {
		won[t.ID] = true
	}
	var lost []hot.Entry
	for _, en := range entries {
		if !won[en.ID] {
			lost = append(lost, en)
		}
	}
	if len(lost) == 0 {
		return
	}
	f.restoring.Add(1)
	go func() {
		defer f.restoring.Done()
		f.restore(ctx, lost)
	}()
}

// restore puts back in the tier the live claims of tasks whose entry lost
// its Start. A Start loses to a cancel, to a start elsewhere, or to a newer
// claim, and that newer claim's own entry may be gone: the Redis tier keeps
// one entry per task, and an Add under an older token that reaches it late
// replaces the live one. That happens after a FLUSHALL: a node's reclaim
// ends every claim in its items, among them one another node's submit has
// just committed and not yet added; the reclaim claims the task again and
// adds it, then the submit's late Add replaces that entry with its own,
// whose Start loses. The new claim then waited out its lease (30 s and
// more). So a row still claimed, under a lease not over, with another
// token than the entry's gets its entry back; a tier that holds it
// already keeps one, and the row's token still decides who starts it.
func (f *Firer) restore(ctx context.Context, lost []hot.Entry) {
	g, ok := f.cfg.Store.(taskGetter)
	if !ok {
		return
	}
	a, ok := f.cfg.Tier.(tierAdder)
	if !ok {
		return
	}
	var back []hot.Entry
	for _, en := range lost {
		t, err := g.Get(ctx, en.ID)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			continue // gone, or the store is away: the claim's lease covers it
		}
		now := time.Now()
		if t.Status == task.StatusClaimed && t.Token != en.Token && t.LeaseUntil.After(now) {
			back = append(back, f.cfg.Planner.Entry(now, t.ID, t.Topic, t.DueAt, t.Token))
		}
	}
	if len(back) == 0 {
		return
	}
	if err := a.Add(ctx, back...); err != nil {
		f.log.Warn("putting back the entries of live claims failed; they wait for their leases", "count", len(back), "err", err)
		return
	}
	f.m.EntriesRestored.Add(float64(len(back)))
}
