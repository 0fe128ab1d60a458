package complete_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/complete"
	"github.com/ontimehq/ontime/internal/deliver"
	"github.com/ontimehq/ontime/internal/hot"
	"github.com/ontimehq/ontime/internal/stagetest"
	"github.com/ontimehq/ontime/internal/task"
)

// syncBuffer is a log sink the completer's goroutine and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// records returns the JSON log records at level.
func (s *syncBuffer) records(t *testing.T, level string) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		if line == "" {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if r["level"] == level {
			out = append(out, r)
		}
	}
	return out
}

// setupWith builds a started completer over a fresh store with cfg's
// optional parts (Hot, Logger) and retryBase.
func setupWith(t *testing.T, cfg complete.Config) *fixture {
	t.Helper()
	t.Parallel()
	x := &fixture{st: stagetest.Store(t), ctx: context.Background()}
	cfg.Store = x.st
	if cfg.Retry.Base == 0 {
		cfg.Retry = deliver.RetryPolicy{Base: retryBase, Max: time.Hour}
	}
	c, err := complete.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(x.ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	x.c = c
	return x
}

// A task that goes dead is logged at WARN with its ID, topic and last
// error (issue 13: it used to be a Debug line), whether its attempts ran
// out, its error was permanent, or no node had a handler for its topic.
func TestDeadIsLoggedAtWarn(t *testing.T) {
	var logs syncBuffer
	x := setupWith(t, complete.Config{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	last := x.running(t, "warn-last", 1, 1)[0]
	perm := x.running(t, "warn-perm", 1, 9)[0]
	retry := x.running(t, "warn-retry", 1, 9)[0]
	x.c.Expect([]*task.Task{last, perm, retry}, time.Now().Add(time.Minute))
	x.c.Finish(last, errors.New("HTTP 502 from the receiver"))
	x.c.Finish(perm, deliver.Permanent(errors.New("410 gone")))
	x.c.Finish(retry, errors.New("HTTP 503"))
	stagetest.StatusIs(t, x.st, last.ID, task.StatusDead)
	stagetest.StatusIs(t, x.st, perm.ID, task.StatusDead)
	stagetest.StatusIs(t, x.st, retry.ID, task.StatusPending)
	byID := map[string]map[string]any{}
	for _, r := range logs.records(t, "WARN") {
		if r["msg"] == "task dead" {
			byID[r["id"].(string)] = r
		}
	}
	if len(byID) != 2 {
		t.Fatalf("%d task-dead WARN lines, want 2 (the retried task is not dead): %v", len(byID), logs.records(t, "WARN"))
	}
	for tk, want := range map[*task.Task]string{last: "HTTP 502 from the receiver", perm: "410 gone"} {
		r := byID[tk.ID]
		if r == nil || r["topic"] != tk.Topic || !strings.Contains(r["err"].(string), want) {
			t.Fatalf("WARN line of %s: %v; want topic %s and error %q", tk.ID, r, tk.Topic, want)
		}
	}
}

// Snooze: delivered again after d without using an attempt; Cancel:
// cancelled, final, with the handler's reason as last error.
func TestSnoozeAndCancel(t *testing.T) {
	x := setup(t)
	sn := x.running(t, "snooze", 1, 1)[0] // its only attempt: a Snooze must not make it dead
	cn := x.running(t, "cancel", 1, 5)[0]
	x.c.Expect([]*task.Task{sn, cn}, time.Now().Add(time.Minute))
	before := time.Now()
	x.c.Finish(sn, deliver.Snooze(2*time.Hour))
	x.c.Finish(cn, deliver.Cancel(errors.New("order paid meanwhile")))
	row := stagetest.StatusIs(t, x.st, sn.ID, task.StatusPending)
	if row.Attempts != 0 || row.DueAt.Before(before.Add(2*time.Hour-time.Millisecond)) || row.DueAt.After(time.Now().Add(2*time.Hour)) ||
		!strings.Contains(row.LastError, "snoozed for 2h") {
		t.Fatalf("snoozed row: attempts %d (want 0), due in %s (want 2h), last_error %q", row.Attempts, row.DueAt.Sub(before), row.LastError)
	}
	row = stagetest.StatusIs(t, x.st, cn.ID, task.StatusCancelled)
	if row.Attempts != 1 || !strings.Contains(row.LastError, "order paid meanwhile") || row.Owner != "" {
		t.Fatalf("cancelled row: attempts %d, last_error %q, owner %q", row.Attempts, row.LastError, row.Owner)
	}
}

// A retry due within the window goes back claimed by this node and into
// the hot tier once written, so it fires at its due time without a scan;
// one due beyond the window goes back pending for the scanner.
func TestRetryWithinWindowGoesToTheHotTier(t *testing.T) {
	tier := stagetest.Tier(t)
	planner := hot.NewPlanner(20*time.Millisecond, time.Second)
	x := setupWith(t, complete.Config{
		Retry: deliver.RetryPolicy{Base: 200 * time.Millisecond, Max: time.Hour},
		Hot:   &complete.HotRetry{Tier: tier, Planner: planner, NodeID: "n1", Window: 30 * time.Second, LeaseTTL: time.Minute},
	})
	soon := x.running(t, "soon", 1, 5)[0]
	far := x.running(t, "far", 1, 5)[0]
	x.c.Expect([]*task.Task{soon, far}, time.Now().Add(time.Minute))
	failedAt := time.Now()
	x.c.Finish(soon, errors.New("HTTP 500"))
	x.c.Finish(far, deliver.Snooze(time.Hour)) // beyond the window
	row := stagetest.StatusIs(t, x.st, soon.ID, task.StatusClaimed)
	if row.Owner != "n1" || row.Token == 0 || row.Token == soon.Token || !row.LeaseUntil.Equal(row.DueAt.Add(time.Minute)) {
		t.Fatalf("retry row: owner %q token %d (old %d), lease %s after due", row.Owner, row.Token, soon.Token, row.LeaseUntil.Sub(row.DueAt))
	}
	// The entry pops at its due time less the planner's lead, under the row's token.
	ctx, cancel := context.WithTimeout(context.Background(), stagetest.Deadline)
	defer cancel()
	got, err := tier.Pop(ctx, 10, 0)
	if err != nil || len(got) != 1 || got[0].ID != soon.ID || got[0].Token != row.Token || got[0].DueAt.After(row.DueAt) {
		t.Fatalf("hot tier pop: %v %+v; want the retry under token %d due %s", err, got, row.Token, row.DueAt)
	}
	if poppedAfter := time.Since(failedAt); poppedAfter > 10*time.Second {
		t.Fatalf("the retry left the tier %s after the failure; its due time was %s after", poppedAfter, row.DueAt.Sub(failedAt))
	}
	row = stagetest.StatusIs(t, x.st, far.ID, task.StatusPending)
	if row.Owner != "" || row.Token != 0 {
		t.Fatalf("a retry beyond the window was claimed: %+v", row)
	}
	if n, _ := tier.Len(ctx); n != 1 { // the popped one, in flight
		t.Fatalf("tier holds %d entries; want only the retry within the window", n)
	}
}

// A task refused by an open breaker is deferred until the breaker lets a
// probe through, and for four times as long as the destination has been
// failing: the wait grows with the outage instead of a fixed retry_base.
func TestBreakerDeferralGrowsWithTheOutage(t *testing.T) {
	x := setupWith(t, complete.Config{Retry: deliver.RetryPolicy{Base: time.Second, Max: time.Hour}})
	tasks := x.running(t, "parked", 3, 5)
	x.c.Expect(tasks, time.Now().Add(time.Minute))
	now := time.Now()
	cases := []struct {
		tk        *task.Task
		err       error
		min, maxd time.Duration
	}{
		// Failing for a moment, probe in 10s: wait 10s, rounded up to a multiple of 10s.
		{tasks[0], &deliver.CircuitOpenError{Dest: "http://x", Until: now.Add(10 * time.Second), Since: now.Add(-time.Second), OpenFor: 10 * time.Second},
			10 * time.Second, 20 * time.Second},
		// Failing for 10 minutes: wait 40 minutes, not 10s (rounded up to 320s).
		{tasks[1], &deliver.CircuitOpenError{Dest: "http://x", Until: now.Add(10 * time.Second), Since: now.Add(-10 * time.Minute), OpenFor: 10 * time.Second},
			40 * time.Minute, 40*time.Minute + 320*time.Second},
		// Failing for days: capped by the retry policy's Max (1h), rounded up to 640s.
		{tasks[2], &deliver.CircuitOpenError{Dest: "http://x", Until: now.Add(10 * time.Second), Since: now.Add(-72 * time.Hour), OpenFor: 10 * time.Second},
			time.Hour, time.Hour + 640*time.Second},
	}
	for _, c := range cases {
		x.c.Finish(c.tk, c.err)
	}
	var dues []time.Time
	for i, c := range cases {
		row := stagetest.StatusIs(t, x.st, c.tk.ID, task.StatusPending)
		dues = append(dues, row.DueAt)
		wait := row.DueAt.Sub(now)
		if wait < c.min || wait > c.maxd+time.Second || row.Attempts != 0 {
			t.Fatalf("case %d: deferred %s with %d attempts; want %s..%s and no attempt used", i, wait, row.Attempts, c.min, c.maxd)
		}
	}
	// Rounded to the boundaries that make refused tasks come back together.
	for i, q := range []time.Duration{10 * time.Second, 320 * time.Second, 640 * time.Second} {
		if dues[i].UnixMicro()%q.Microseconds() != 0 {
			t.Fatalf("case %d: due %s is not on a %s boundary", i, dues[i], q)
		}
	}
}

// A node that is stopping (Open false) writes its retries pending, for any
// node to claim, not claimed into a tier nobody pops any more.
func TestRetryWhileStoppingGoesPending(t *testing.T) {
	tier := stagetest.Tier(t)
	x := setupWith(t, complete.Config{
		Retry: deliver.RetryPolicy{Base: 200 * time.Millisecond, Max: time.Hour},
		Hot: &complete.HotRetry{Tier: tier, Planner: hot.NewPlanner(20*time.Millisecond, time.Second), NodeID: "n1",
			Window: 30 * time.Second, LeaseTTL: time.Minute, Open: func() bool { return false }},
	})
	tk := x.running(t, "stopping", 1, 5)[0]
	x.c.Expect([]*task.Task{tk}, time.Now().Add(time.Minute))
	x.c.Finish(tk, deliver.ErrStopped)
	row := stagetest.StatusIs(t, x.st, tk.ID, task.StatusPending)
	if row.Owner != "" || row.Token != 0 || row.Attempts != 0 {
		t.Fatalf("retry of a stopping node: %+v", row)
	}
	if n, err := tier.Len(context.Background()); err != nil || n != 0 {
		t.Fatalf("tier holds %d entries (%v); want none", n, err)
	}
}
