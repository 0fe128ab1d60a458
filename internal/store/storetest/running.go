package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// testInsertRunning: a task inserted running (store.NewTask.Running, a
// task due at once that its node delivers without a Start) is stored
// running with its first attempt begun, by every insert path (a keyless
// batch: PostgreSQL's COPY, MariaDB's multi-statement, SQLite's prepared
// rows; keyed batches over many tables: PostgreSQL's one statement; one
// keyed task; one keyless task), answered as stored, finished under its
// token, and taken over with its attempt counted once its lease lapses.
func testInsertRunning(t *testing.T, open Opener) {
	b := setup(t, open, 2, 4, 1)
	now := time.Now().Truncate(time.Microsecond)
	lease := now.Add(time.Minute)
	mk := func(key string, running bool) store.NewTask {
		nt := b.newTask("run", key, now)
		nt.Claim = &store.Lease{Owner: "n1", Until: lease, Token: 77}
		nt.Running = running
		return nt
	}
	var batches [][]store.NewTask
	var keyless, keyed, mixed []store.NewTask
	for range 300 {
		keyless = append(keyless, mk("", true))
	}
	for i := range 40 {
		keyed = append(keyed, mk(fmt.Sprintf("k%02d", i), true))
		// Running and claimed rows side by side in one statement.
		mixed = append(mixed, mk(fmt.Sprintf("m%02d", i), i%2 == 0))
	}
	batches = append(batches, keyless, keyed, mixed, []store.NewTask{mk("alone", true)}, []store.NewTask{mk("", true)})
	var all []store.NewTask
	for _, batch := range batches {
		ins := b.insert(batch...)
		for i, r := range ins {
			nt := batch[i]
			want, attempts := task.StatusClaimed, 0
			if nt.Running {
				want, attempts = task.StatusRunning, 1
			}
			if r.Existing || r.Task.Status != want || r.Task.Attempts != attempts || r.Task.Token != 77 || r.Task.Owner != "n1" {
				t.Fatalf("insert of %s (running %v) answered %+v", nt.ID, nt.Running, r.Task)
			}
			got := b.get(nt.ID)
			if got.Status != want || got.Attempts != attempts || got.Token != 77 || got.Owner != "n1" || !got.LeaseUntil.Equal(lease) {
				t.Fatalf("%s (running %v) stored as %v attempts %d token %d owner %q lease %v", nt.ID, nt.Running, got.Status, got.Attempts, got.Token, got.Owner, got.LeaseUntil)
			}
			all = append(all, nt)
		}
	}
	// A running row is not started again: its Start finds nothing
	// claimed under the token.
	first := all[0]
	ref := store.Ref{ID: first.ID, Token: 77, DueAt: first.DueAt, Topic: first.Topic}
	if st, err := b.s.Start(b.ctx, []store.Ref{ref}, lease); err != nil || len(st) != 0 {
		t.Fatalf("start of a row inserted running: %v %+v", err, st)
	}
	// Finished under its token: done, one attempt.
	if err := b.s.Finish(b.ctx, []store.Outcome{{Ref: ref, Done: true}}); err != nil {
		t.Fatal(err)
	}
	if got := b.get(first.ID); got.Status != task.StatusDone || got.Attempts != 1 {
		t.Fatalf("finished running insert: %v attempts %d", got.Status, got.Attempts)
	}
	// A retry outcome counts the attempt it had begun.
	second := all[1]
	ref2 := store.Ref{ID: second.ID, Token: 77, DueAt: second.DueAt, Topic: second.Topic}
	if err := b.s.Finish(b.ctx, []store.Outcome{{Ref: ref2, RetryAt: now.Add(time.Hour), Error: "503"}}); err != nil {
		t.Fatal(err)
	}
	if got := b.get(second.ID); got.Status != task.StatusPending || got.Attempts != 1 || got.LastError != "503" {
		t.Fatalf("retried running insert: %v attempts %d error %q", got.Status, got.Attempts, got.LastError)
	}
	// Its node gone, the lease lapses: another node claims it and its
	// Start counts the second attempt.
	third := all[2]
	later := lease.Add(time.Second)
	refs, err := b.s.Claim(b.ctx, b.item(third), later, later, store.Lease{Owner: "n2", Until: later.Add(time.Hour), Token: 88}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var again []store.Ref
	for _, r := range refs {
		if r.ID == third.ID {
			again = append(again, r)
		}
	}
	if len(again) != 1 {
		t.Fatalf("a running insert whose lease lapsed was not claimed again (%d claimed)", len(refs))
	}
	if st, err := b.s.Start(b.ctx, again, later.Add(time.Hour)); err != nil || len(st) != 1 || st[0].Attempts != 2 {
		t.Fatalf("start after the lapse: %v %+v", err, st)
	}
}
