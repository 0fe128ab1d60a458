package fire

import (
	"context"
	"time"

	"github.com/ontimehq/ontime/internal/hot"
)

// DefaultStartGap is the least time between the beginnings of two
// Store.Start calls of a node (Config.StartGap).
//
// Steady traffic makes entries due a few at a time: with nothing spacing
// them, each worker started whatever one Pop found, so at 2,400 tasks/s
// the node made 360 start transactions a second of 6.6 tasks each. Every
// one of them rewrites the same hot index pages (SQLite: a WAL frame per
// page per commit), takes the store's one writer (SQLite) away from the
// submits' group commits, and parses its statement anew: profiles of a
// steady 2,400/s run put a fifth of the node's CPU in Start. Spacing the
// starts by 5 ms lets the entries of 5 ms gather into one Start (25 at
// 5,000/s, 200 transactions a second at most), well inside the 20 ms a
// task leaves the tier before it is due. An idle node starts at once: the
// gap only counts from a start that happened less than a gap ago. A burst
// is not slowed: its Starts of thousands take far longer than the gap,
// and the workers still overlap them.
const DefaultStartGap = 5 * time.Millisecond

// gate lets one worker at a time pop, no sooner than gap after the
// previous pop that found entries: the entries due meanwhile wait in the
// tier and leave together in the next Pop.
type gate struct {
	gap  time.Duration
	turn chan struct{} // cap 1: held by the worker popping
	last time.Time     // when the previous pop found entries; guarded by turn
	// after makes the gap's timer (time.After; tests hold the gap open).
	after func(time.Duration) <-chan time.Time
}

func newGate(gap time.Duration) *gate {
	return &gate{gap: gap, turn: make(chan struct{}, 1), after: time.After}
}

// pop takes the turn, waits out the gap, pops, and gives the turn back.
// Pop blocks until an entry is due, so the worker waiting for it holds
// the turn: the others would only wait in Pop beside it.
func (g *gate) pop(ctx context.Context, pop func(context.Context) ([]hot.Entry, error)) ([]hot.Entry, error) {
	select {
	case g.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-g.turn }()
	if g.gap > 0 && !g.last.IsZero() {
		if wait := g.gap - time.Since(g.last); wait > 0 {
			select {
			case <-g.after(wait):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	}
	entries, err := pop(ctx)
	if len(entries) > 0 {
		g.last = time.Now()
	}
	return entries, err
}
