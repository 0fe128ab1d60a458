package complete_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/complete"
	"github.com/ontimehq/ontime/internal/deliver"
	"github.com/ontimehq/ontime/internal/stagetest"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/store/sqlstore"
	"github.com/ontimehq/ontime/internal/task"
)

// retryBase is long, so a retried task is visibly due later.
const retryBase = time.Minute

type fixture struct {
	st  *sqlstore.Store
	c   *complete.Completer
	ctx context.Context
}

func setup(t *testing.T) *fixture {
	t.Helper()
	t.Parallel()
	x := &fixture{st: stagetest.Store(t), ctx: context.Background()}
	c, err := complete.New(complete.Config{Store: x.st, Retry: deliver.RetryPolicy{Base: retryBase, Max: time.Hour}})
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

// running inserts and starts n tasks (attempt 1) allowing maxAttempts.
func (x *fixture) running(t *testing.T, prefix string, n, maxAttempts int) []*task.Task {
	t.Helper()
	var news []store.NewTask
	for i := range n {
		nt := stagetest.NewTask(t, "complete", fmt.Sprintf("%s-%d", prefix, i), time.Now())
		nt.MaxAttempts = maxAttempts
		news = append(news, nt)
	}
	return stagetest.Running(t, x.st, news...)
}

// A delivered task is written done while the completer runs, in batches.
func TestDeliveredIsDone(t *testing.T) {
	x := setup(t)
	tasks := x.running(t, "ok", 50, 3)
	x.c.Expect(tasks, time.Now().Add(time.Minute))
	if n := x.c.Busy(); n != int64(len(tasks)) {
		t.Fatalf("Busy = %d after Expect(%d)", n, len(tasks))
	}
	for _, tk := range tasks {
		x.c.Finish(tk, nil)
	}
	for _, tk := range tasks {
		row := stagetest.StatusIs(t, x.st, tk.ID, task.StatusDone)
		if row.Attempts != 1 || row.Owner != "" {
			t.Fatalf("done row: %d attempts, owner %q", row.Attempts, row.Owner)
		}
	}
	if n := x.c.Busy(); n != 0 {
		t.Fatalf("Busy = %d after every outcome", n)
	}
}

// A failure with attempts left returns the task to pending, due later by
// the retry policy, with the error kept and the attempt counted.
func TestFailureWithAttemptsLeftRetries(t *testing.T) {
	x := setup(t)
	tk := x.running(t, "fail", 1, 3)[0]
	x.c.Expect([]*task.Task{tk}, time.Now().Add(time.Minute))
	before := time.Now()
	x.c.Finish(tk, errors.New("receiver said 500"))
	row := stagetest.StatusIs(t, x.st, tk.ID, task.StatusPending)
	// Base ± 20 % jitter.
	if earliest := before.Add(retryBase * 3 / 4); row.DueAt.Before(earliest) {
		t.Fatalf("retry due %s after the failure; want about %s", row.DueAt.Sub(before), retryBase)
	}
	if row.LastError != "receiver said 500" || row.Attempts != 1 || row.Owner != "" || row.Token != 0 {
		t.Fatalf("retried row: last_error %q, attempts %d, owner %q, token %d", row.LastError, row.Attempts, row.Owner, row.Token)
	}
}

// A permanent error, or a failure of the last attempt, makes the task dead.
func TestPermanentOrLastAttemptIsDead(t *testing.T) {
	x := setup(t)
	perm := x.running(t, "perm", 1, 5)[0]
	last := x.running(t, "last", 1, 1)[0]
	x.c.Expect([]*task.Task{perm, last}, time.Now().Add(time.Minute))
	x.c.Finish(perm, deliver.Permanent(errors.New("410 gone")))
	x.c.Finish(last, errors.New("timeout"))
	row := stagetest.StatusIs(t, x.st, perm.ID, task.StatusDead)
	if !strings.Contains(row.LastError, "410 gone") || row.Attempts != 1 {
		t.Fatalf("dead row: last_error %q, attempts %d", row.LastError, row.Attempts)
	}
	row = stagetest.StatusIs(t, x.st, last.ID, task.StatusDead)
	if row.LastError != "timeout" {
		t.Fatalf("dead row: last_error %q", row.LastError)
	}
}

// A delivery that never reached its target (lane full, circuit open,
// dispatcher stopping) returns the task to pending without using an
// attempt: started again, it is on attempt 1.
func TestNotAttemptedKeepsAttempt(t *testing.T) {
	x := setup(t)
	errs := []error{deliver.ErrLaneFull, deliver.ErrCircuitOpen, deliver.ErrStopped}
	tasks := x.running(t, "na", len(errs), 1) // one attempt only: a counted failure would be dead
	x.c.Expect(tasks, time.Now().Add(time.Minute))
	before := time.Now()
	for i, tk := range tasks {
		x.c.Finish(tk, fmt.Errorf("http://dest: %w", errs[i]))
	}
	var refs []store.Ref
	for i, tk := range tasks {
		row := stagetest.StatusIs(t, x.st, tk.ID, task.StatusPending)
		if row.Attempts != 0 || !strings.Contains(row.LastError, errs[i].Error()) || !row.DueAt.After(before) {
			t.Fatalf("%v: row attempts %d, last_error %q, due %s after; want 0, the error, later",
				errs[i], row.Attempts, row.LastError, row.DueAt.Sub(before))
		}
		refs = append(refs, store.Ref{ID: tk.ID, Topic: tk.Topic})
	}
	// Claim and start them again: attempt 1, not 2.
	token := store.NewToken()
	claimed := 0
	for _, it := range x.st.Items() {
		got, err := x.st.Claim(x.ctx, it, time.Now().Add(2*time.Hour), time.Now(), store.Lease{Owner: "n", Until: time.Now().Add(3 * time.Hour), Token: token}, 100)
		if err != nil {
			t.Fatal(err)
		}
		claimed += len(got)
	}
	if claimed != len(tasks) {
		t.Fatalf("claimed %d tasks again; want %d", claimed, len(tasks))
	}
	for i := range refs {
		refs[i].Token = token
	}
	started, err := x.st.Start(x.ctx, refs, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(started) != len(tasks) {
		t.Fatalf("started %d again; want %d", len(started), len(tasks))
	}
	for _, tk := range started {
		if tk.Attempts != 1 {
			t.Fatalf("restarted task is on attempt %d; want 1 (the refused delivery used none)", tk.Attempts)
		}
	}
}

// Stop, called while an expected outcome is outstanding, returns only after
// it arrived and was written; so does a second, concurrent Stop.
func TestStopWaitsForOutstanding(t *testing.T) {
	x := setup(t)
	tk := x.running(t, "late", 1, 3)[0]
	x.c.Expect([]*task.Task{tk}, time.Now().Add(time.Minute))
	var finished atomic.Bool
	go func() {
		time.Sleep(300 * time.Millisecond)
		finished.Store(true)
		x.c.Finish(tk, nil)
	}()
	var wg sync.WaitGroup
	statuses := make([]task.Status, 2)
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x.c.Stop()
			if !finished.Load() {
				t.Error("Stop returned before the outstanding outcome arrived")
			}
			if row, err := x.st.Get(x.ctx, tk.ID); err != nil {
				t.Error(err)
			} else {
				statuses[i] = row.Status
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	stagetest.Done(t, "Stop returns", done)
	for i, s := range statuses {
		if s != task.StatusDone {
			t.Fatalf("Stop %d returned with the row %s; want done (written before Stop returns)", i, s)
		}
	}
}

// HeldBytes adds up the payloads of the started tasks not delivered yet:
// Expect adds them, Finish (delivered or not) takes each off.
func TestHeldBytes(t *testing.T) {
	x := setup(t)
	tasks := x.running(t, "bytes", 4, 3)
	var want int64
	for _, tk := range tasks {
		want += int64(len(tk.Payload))
	}
	if want == 0 {
		t.Fatal("the fixture's tasks have no payload")
	}
	x.c.Expect(tasks, time.Now().Add(time.Minute))
	if got := x.c.HeldBytes(); got != want {
		t.Fatalf("HeldBytes = %d after Expect; want %d", got, want)
	}
	x.c.Finish(tasks[0], nil)
	x.c.Finish(tasks[1], errors.New("receiver down"))
	want -= int64(len(tasks[0].Payload) + len(tasks[1].Payload))
	if got := x.c.HeldBytes(); got != want {
		t.Fatalf("HeldBytes = %d after two Finish; want %d", got, want)
	}
	x.c.Finish(tasks[2], nil)
	x.c.Finish(tasks[3], nil)
	if got := x.c.HeldBytes(); got != 0 {
		t.Fatalf("HeldBytes = %d with nothing outstanding", got)
	}
}
