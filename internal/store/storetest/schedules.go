package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// fireWithdrawer is the store's side of a schedule change (the schedule
// stage's Store has it).
type fireWithdrawer interface {
	WithdrawFires(ctx context.Context, topic, lo, hi string, after time.Time, reason string) (int64, error)
}

// RunSchedules runs the suite of what the schedule stage asks of a task
// store.
func RunSchedules(t *testing.T, open KeyOpener) {
	t.Run("WithdrawFires", func(t *testing.T) { testWithdrawFires(t, open) })
}

// testWithdrawFires: the pending and claimed tasks of one schedule's key
// range due after the change end cancelled with the reason, answer by
// their ids, and give up their keys, so the same key makes a new task at
// once despite the key hold; a claim of one starts nothing. Running tasks,
// tasks due before the change, other topics, the keys just outside the
// range (a trigger's, a schedule whose name extends this one's) stay.
func testWithdrawFires(t *testing.T, open KeyOpener) {
	b := setupKeys(t, open, 2, 3, 2, time.Hour)
	w, ok := b.s.(fireWithdrawer)
	if !ok {
		t.Fatalf("%T has no WithdrawFires", b.s)
	}
	const topic, reason = "wf", "withdrawn: schedule s updated"
	now := time.Now()
	fire := func(i int) string { return "s@" + now.Add(time.Duration(i)*time.Minute).UTC().Format(time.RFC3339Nano) }
	var gone []store.NewTask
	for i := 1; i <= 6; i++ {
		gone = append(gone, b.newTask(topic, fire(i), now.Add(time.Duration(i)*time.Minute)))
	}
	claimed := b.newTask(topic, fire(7), now.Add(7*time.Minute))
	running := b.newTask(topic, fire(8), now.Add(8*time.Minute))
	stay := []store.NewTask{
		running,
		b.newTask(topic, fire(-1), now.Add(-time.Minute)),      // due before the change
		b.newTask(topic, "s+trigger@x", now.Add(time.Minute)),  // a trigger: before the range
		b.newTask(topic, "s.x@"+fire(1), now.Add(time.Minute)), // schedule s.x: before it
		b.newTask(topic, "sA", now.Add(time.Minute)),           // its end, excluded
		b.newTask("wf.other", fire(1), now.Add(time.Minute)),   // another topic
		b.newTask(topic, "", now.Add(time.Minute)),             // no key
	}
	b.insert(append(append(append([]store.NewTask{}, gone...), claimed), stay...)...)
	lease := store.Lease{Owner: "n", Until: now.Add(time.Minute), Token: store.NewToken()}
	for _, nt := range []store.NewTask{claimed, running} {
		if _, err := b.s.Update(b.ctx, nt.ID, store.Patch{DueAt: &nt.DueAt, Claim: &lease}); err != nil {
			t.Fatal(err)
		}
	}
	runRef := store.Ref{ID: running.ID, Token: lease.Token, DueAt: running.DueAt, Topic: topic}
	if s, err := b.s.Start(b.ctx, []store.Ref{runRef}, now.Add(time.Minute)); err != nil || len(s) != 1 {
		t.Fatalf("start: %d, %v", len(s), err)
	}
	gone = append(gone, claimed)

	n, err := w.WithdrawFires(b.ctx, topic, "s@", "sA", now, reason)
	if err != nil || n != int64(len(gone)) {
		t.Fatalf("withdraw: %d, %v; want %d", n, err, len(gone))
	}
	for _, nt := range gone {
		got := b.get(nt.ID)
		if got.Status != task.StatusCancelled || got.LastError != reason || got.Key != "" || got.Owner != "" || !got.DueAt.Equal(nt.DueAt) {
			t.Fatalf("withdrawn %s: %+v", nt.Key, got)
		}
		if _, err := b.s.GetByKey(b.ctx, topic, nt.Key); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("withdrawn %s still named by its key: %v", nt.Key, err)
		}
	}
	for _, nt := range stay {
		if got := b.get(nt.ID); got.Status == task.StatusCancelled || got.Key != nt.Key {
			t.Fatalf("%s (%s) withdrawn: %+v", nt.Key, nt.Topic, got)
		}
	}
	// The claim of a withdrawn task starts nothing.
	claimRef := store.Ref{ID: claimed.ID, Token: lease.Token, DueAt: claimed.DueAt, Topic: topic}
	if s, err := b.s.Start(b.ctx, []store.Ref{claimRef}, now.Add(time.Minute)); err != nil || len(s) != 0 {
		t.Fatalf("start of a withdrawn claim: %d started, %v", len(s), err)
	}
	// The keys are free at once, the hour's key hold notwithstanding.
	again := b.newTask(topic, gone[0].Key, gone[0].DueAt)
	if r := b.insert(again)[0]; r.Existing || r.Task.ID != again.ID {
		t.Fatalf("the same key after the withdrawal: existing=%v id=%s", r.Existing, r.Task.ID)
	}
	if n, err := w.WithdrawFires(b.ctx, topic, "s@", "sA", now, reason); err != nil || n != 1 {
		t.Fatalf("withdraw again: %d, %v; want the new task only", n, err)
	}
}
