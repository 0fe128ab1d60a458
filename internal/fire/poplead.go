package fire

import (
	"time"

	"github.com/ontimehq/ontime/internal/hot"
)

// notePop tells the planner the tier's delay in a Pop called at popAt that
// returned entries at now: from the latest of its entries' fire times, or
// from the call when they were all due before it, to now. That is the
// tier's own delay (a wake-up, a Redis round trip), not a backlog's, which
// waited before the call (backpressure, the gate) or was due long before
// (a burst, a restart). The planner's lead takes it in, so the tasks
// planned next are started before they are due despite it
// (hot.Planner.PopEnd); delivery still waits for each due time.
func (f *Firer) notePop(popAt, now time.Time, ahead time.Duration, entries []hot.Entry) {
	if len(entries) == 0 {
		return
	}
	// An entry could be taken ahead of its time: from then on, a Pop
	// that had not returned it was late.
	from := popAt
	for _, e := range entries {
		from = later(from, e.DueAt.Add(-ahead))
	}
	f.cfg.Planner.PopEnd(now, now.Sub(from))
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
