package fire

import (
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/hot"
)

// notePop measures the tier's delay only: from the call when its entries
// were due before it (a backlog, a restart's overdue claims), from the
// latest entry's fire time when it came due during the call.
func TestNotePopMeasuresTheTiersDelayOnly(t *testing.T) {
	for _, c := range []struct {
		name  string
		dues  []time.Duration // fire times, from the call
		now   time.Duration   // the return, from the call
		delay time.Duration
	}{
		{"due long before the call", []time.Duration{-time.Minute, -time.Hour}, 30 * time.Millisecond, 30 * time.Millisecond},
		{"due during the call", []time.Duration{-time.Minute, 5 * time.Millisecond}, 45 * time.Millisecond, 40 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := hot.NewPlanner(time.Millisecond, 5*time.Second)
			f := &Firer{cfg: Config{Planner: p}}
			popAt := time.Unix(1_000_000, 0)
			var entries []hot.Entry
			for _, d := range c.dues {
				entries = append(entries, hot.Entry{ID: "x", DueAt: popAt.Add(d)})
			}
			f.notePop(popAt, popAt.Add(c.now), 0, entries)
			if got := p.Lead(); got != 2*c.delay {
				t.Fatalf("lead %s, want twice the delay %s", got, c.delay)
			}
			f.notePop(popAt, popAt.Add(time.Hour), 0, nil) // no entries: nothing measured
			if got := p.Lead(); got != 2*c.delay {
				t.Fatalf("an empty Pop moved the lead to %s", got)
			}
		})
	}
}
