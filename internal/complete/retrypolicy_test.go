package complete_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/complete"
	"github.com/ontimehq/ontime/internal/deliver"
	"github.com/ontimehq/ontime/internal/stagetest"
	"github.com/ontimehq/ontime/internal/task"
)

// A failed attempt waits by the policy Policy gives (the task's own, its
// topic's); a Retry-After overrides it, capped by the node's Max (said in
// last_error); a lane's hold (ThrottledError) defers the task to the end
// of the wait without using an attempt.
func TestRetryPolicyAndRetryAfter(t *testing.T) {
	policy := task.Retry{Schedule: []time.Duration{10 * time.Minute, time.Hour}}
	x := setupWith(t, complete.Config{Retry: deliver.RetryPolicy{Base: retryBase, Max: 30 * time.Minute},
		Policy: func(*task.Task) task.Retry { return policy }})
	ts := x.running(t, "policy", 4, 5)
	x.c.Expect(ts, time.Now().Add(time.Minute))
	before := time.Now()
	until := before.Add(90 * time.Second).Truncate(time.Microsecond)
	x.c.Finish(ts[0], errors.New("HTTP 500"))
	x.c.Finish(ts[1], deliver.RetryAfter(errors.New("HTTP 429"), 45*time.Second))
	x.c.Finish(ts[2], deliver.RetryAfter(errors.New("HTTP 503"), 2*time.Hour))
	x.c.Finish(ts[3], &deliver.ThrottledError{Dest: "http://x", Until: until, Why: "HTTP 429"})
	within := func(row *task.Task, d time.Duration) bool {
		return !row.DueAt.Before(before.Add(d-time.Millisecond)) && !row.DueAt.After(time.Now().Add(d))
	}
	if row := stagetest.StatusIs(t, x.st, ts[0].ID, task.StatusPending); !within(row, 10*time.Minute) || row.Attempts != 1 {
		t.Errorf("by the schedule: due in %s, attempts %d; want 10m, 1", row.DueAt.Sub(before), row.Attempts)
	}
	if row := stagetest.StatusIs(t, x.st, ts[1].ID, task.StatusPending); !within(row, 45*time.Second) || row.Attempts != 1 {
		t.Errorf("Retry-After 45s: due in %s, attempts %d", row.DueAt.Sub(before), row.Attempts)
	}
	if row := stagetest.StatusIs(t, x.st, ts[2].ID, task.StatusPending); !within(row, 30*time.Minute) ||
		!strings.Contains(row.LastError, "(waiting 30m0s: delivery.retry_max)") {
		t.Errorf("Retry-After over the cap: due in %s, last_error %q", row.DueAt.Sub(before), row.LastError)
	}
	if row := stagetest.StatusIs(t, x.st, ts[3].ID, task.StatusPending); !row.DueAt.Equal(until) || row.Attempts != 0 ||
		!strings.Contains(row.LastError, "destination asked to wait until") {
		t.Errorf("held by its lane: due %s (want %s), attempts %d (want 0), last_error %q", row.DueAt, until, row.Attempts, row.LastError)
	}
}
