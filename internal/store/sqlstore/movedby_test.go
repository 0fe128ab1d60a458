package sqlstore

import (
	"context"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
	"github.com/ontimehq/ontime/internal/testdb"
)

// TestMovedBy: each way a task's due time moves is recorded beside it — a
// retry, an update, a requeue by ID or by topic — so a view can say which
// one moved it rather than guess; a new task has none, and an update that
// leaves the due time alone records nothing.
func TestMovedBy(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := openT(t, engine, testdb.DSNs(t, engine, 1), 1, 1)
			it := store.Item{}
			past := time.Now().Add(-time.Minute)
			retried, updated, requeued, byTopic := newTask(t, "", past, 1), newTask(t, "", past, 1), newTask(t, "", past, 1), newTask(t, "", past, 1)
			if _, err := s.Insert(ctx, []store.NewTask{retried, updated, requeued, byTopic}); err != nil {
				t.Fatal(err)
			}
			moved := func(id string, want task.Move) {
				t.Helper()
				got, err := s.Get(ctx, id)
				if err != nil || got.MovedBy != want {
					t.Fatalf("moved by of %s: %v %q, want %q", id, err, got.MovedBy, want)
				}
			}
			moved(retried.ID, task.MovedNone)

			// A payload change is no move; a due time change is one.
			if _, err := s.Update(ctx, updated.ID, store.Patch{Payload: []byte(`{"v":2}`)}); err != nil {
				t.Fatal(err)
			}
			moved(updated.ID, task.MovedNone)
			later := time.Now().Add(time.Hour)
			if _, err := s.Update(ctx, updated.ID, store.Patch{DueAt: &later}); err != nil {
				t.Fatal(err)
			}
			moved(updated.ID, task.MovedUpdate)

			now := time.Now()
			refs, err := s.Claim(ctx, it, now, now, store.Lease{Owner: "n", Until: now.Add(time.Minute), Token: 7}, 10)
			if err != nil || len(refs) != 3 {
				t.Fatalf("claim: %v %d refs, want 3", err, len(refs))
			}
			if _, err := s.Start(ctx, refs, now.Add(time.Minute)); err != nil {
				t.Fatal(err)
			}
			var outs []store.Outcome
			for _, r := range refs {
				o := store.Outcome{Ref: r, Error: "boom"}
				if r.ID == retried.ID {
					o.RetryAt = now.Add(time.Hour)
				} else {
					o.Dead = true
				}
				outs = append(outs, o)
			}
			if err := s.Finish(ctx, outs); err != nil {
				t.Fatal(err)
			}
			moved(retried.ID, task.MovedRetry)
			moved(requeued.ID, task.MovedNone) // dead: its due time did not move
			if _, err := s.Requeue(ctx, requeued.ID, time.Now()); err != nil {
				t.Fatal(err)
			}
			moved(requeued.ID, task.MovedRequeue)
			if n, err := s.RequeueTopic(ctx, "t", time.Now()); err != nil || n != 1 {
				t.Fatalf("requeue topic: %v %d, want 1", err, n)
			}
			moved(byTopic.ID, task.MovedRequeue)
			// The last move is the one recorded: an update after the retry.
			if _, err := s.Update(ctx, retried.ID, store.Patch{DueAt: &later}); err != nil {
				t.Fatal(err)
			}
			moved(retried.ID, task.MovedUpdate)
		})
	}
}

// TestMigrateAddsMovedBy: a database of schema version 9 gets moved_by,
// its rows none recorded; the step runs again whole without failing.
func TestMigrateAddsMovedBy(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dsns := testdb.DSNs(t, engine, 1)
			s := openT(t, engine, dsns, 2, 1)
			nt := newTask(t, "k", time.Now().Add(time.Hour), 1)
			if _, err := s.Insert(ctx, []store.NewTask{nt}); err != nil {
				t.Fatal(err)
			}
			backTo(t, s, "moved_by", 9)
			s.Close()

			s = openT(t, engine, dsns, 2, 1)
			if got, err := s.Get(ctx, nt.ID); err != nil || got.MovedBy != task.MovedNone {
				t.Fatalf("after migration: %v %+v", err, got)
			}
			stepAgain(t, s, 0, 10)
		})
	}
}
