package task

import (
	"testing"
	"time"
)

// TestDueAtRoundsUp: the stores keep microseconds; a due time given in
// nanoseconds is stored at the next microsecond, never the one before, so
// the task cannot fire before the time its submitter asked for.
func TestDueAtRoundsUp(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct{ in, want time.Duration }{
		{time.Hour + 999, time.Hour + time.Microsecond},
		{time.Hour + 1001, time.Hour + 2*time.Microsecond},
		{time.Hour + 5*time.Microsecond, time.Hour + 5*time.Microsecond},
	} {
		due := now.Add(c.in)
		v, err := Validate(Spec{Topic: "t", DueAt: &due}, Limits{}, now)
		if err != nil {
			t.Fatal(err)
		}
		if want := now.Add(c.want); !v.DueAt.Equal(want) {
			t.Errorf("due_at %s stored as %s, want %s", due.Format(time.RFC3339Nano), v.DueAt.Format(time.RFC3339Nano), want.Format(time.RFC3339Nano))
		}
		d := c.in
		v, err = Validate(Spec{Topic: "t", Delay: &d}, Limits{}, now)
		if err != nil || v.DueAt.Before(due) {
			t.Errorf("delay %s: due %s before %s (%v)", d, v.DueAt, due, err)
		}
	}
}
