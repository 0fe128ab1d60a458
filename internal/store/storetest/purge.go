package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// testPurge: a final task (done, dead, cancelled) is deleted and returned
// as it was; a live one is refused with its state; an unknown or already
// purged one is not found; the key is free again at once.
func testPurge(t *testing.T, open Opener) {
	b := setup(t, open, 2, 2, 1)
	now := time.Now()
	lease := store.Lease{Owner: "n1", Until: now.Add(time.Minute), Token: 41}
	done, dead, gone, live := b.newTask("pg", "done", now.Add(-time.Second)), b.newTask("pg", "dead", now.Add(-time.Second)),
		b.newTask("pg", "gone", now.Add(time.Hour)), b.newTask("pg", "live", now.Add(time.Hour))
	b.insert(done, dead, gone, live)
	var refs []store.Ref
	for _, nt := range []store.NewTask{done, dead} {
		r, err := b.s.Claim(b.ctx, b.item(nt), now, now, lease, 10)
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, r...)
	}
	if _, err := b.s.Start(b.ctx, refs, now.Add(time.Minute)); err != nil || len(refs) != 2 {
		t.Fatalf("start: %v %+v", err, refs)
	}
	var outs []store.Outcome
	for _, r := range refs {
		outs = append(outs, store.Outcome{Ref: r, Done: r.ID == done.ID, Dead: r.ID == dead.ID, Error: "HTTP 500"})
	}
	if err := b.s.Finish(b.ctx, outs); err != nil {
		t.Fatal(err)
	}
	if _, err := b.s.Cancel(b.ctx, gone.ID); err != nil {
		t.Fatal(err)
	}

	var ce *store.ConflictError
	if _, err := b.s.Purge(b.ctx, live.ID); !errors.As(err, &ce) || ce.Status != task.StatusPending || ce.Op != "purge" {
		t.Fatalf("purge of a pending task: %v, want a conflict naming pending", err)
	}
	for nt, st := range map[*store.NewTask]task.Status{&done: task.StatusDone, &dead: task.StatusDead, &gone: task.StatusCancelled} {
		was, err := b.s.Purge(b.ctx, nt.ID)
		if err != nil || was.ID != nt.ID || was.Status != st {
			t.Fatalf("purge of a %s task: %v %+v", st, err, was)
		}
		if st == task.StatusDead && was.LastError != "HTTP 500" {
			t.Fatalf("purge answers the task as it was: %+v", was)
		}
		if _, err := b.s.Get(b.ctx, nt.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("get after purge: %v, want ErrNotFound", err)
		}
		if _, err := b.s.Purge(b.ctx, nt.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("purge again: %v, want ErrNotFound", err)
		}
	}
	if got := b.get(live.ID); got.Status != task.StatusPending {
		t.Fatalf("the live task after the others' purges: %+v", got)
	}
	// The purged dead task's key holds nothing: a new task takes it.
	again := b.newTask("pg", "dead", now.Add(time.Hour))
	if res := b.insert(again); res[0].Existing || res[0].Task.ID != again.ID {
		t.Fatalf("insert of a purged task's key: %+v", res[0])
	}
	if _, err := b.s.Purge(b.ctx, "not-an-id"); err == nil {
		t.Fatal("purge of a malformed ID succeeded")
	}
}
