package storetest

import (
	"fmt"
	"sync"
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

// testClaimRunning: ClaimRunning takes the tasks due by now — pending
// ones and those whose lease ended — straight to running under its lease,
// their attempt counted, sorted by due time, never one not due yet or of
// a paused topic; ClaimAhead takes the pending tasks not due yet and every
// expired lease, never a pending task due already; two concurrent
// ClaimRunning get disjoint sets.
func testClaimRunning(t *testing.T, open Opener) {
	b := setup(t, open, 1, 1, 1)
	tp := topicsOf(t, b.s)
	now := time.Now().Truncate(time.Microsecond)
	var overdue []store.NewTask
	for i := range 30 {
		overdue = append(overdue, b.newTask("cr.live", fmt.Sprintf("o%02d", i), now.Add(-time.Duration(30-i)*time.Second)))
	}
	future := b.newTask("cr.live", "future", now.Add(time.Minute))
	pausedDue := b.newTask("cr.paused", "p", now.Add(-time.Minute))
	expiredDue := b.newTask("cr.live", "expired-due", now.Add(-2*time.Minute))
	expiredDue.Claim = &store.Lease{Owner: "gone", Until: now.Add(-time.Second), Token: 5}
	expiredAhead := b.newTask("cr.live", "expired-ahead", now.Add(time.Minute))
	expiredAhead.Claim = &store.Lease{Owner: "gone", Until: now.Add(-time.Second), Token: 6}
	b.insert(append(overdue, future, pausedDue, expiredDue, expiredAhead)...)
	tp.SetClaimFilter([]string{"cr.paused"})
	it := b.item(future)

	// ClaimAhead: the not-due pending task and both expired leases.
	ahead, err := b.s.ClaimAhead(b.ctx, it, now.Add(time.Hour), now, store.Lease{Owner: "n1", Until: now.Add(time.Hour), Token: 10}, 100)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, r := range ahead {
		got[r.ID] = true
	}
	if len(ahead) != 3 || !got[future.ID] || !got[expiredDue.ID] || !got[expiredAhead.ID] {
		t.Fatalf("ClaimAhead took %d: %v", len(ahead), got)
	}
	// Their leases end again, at once: ClaimRunning takes the expired one
	// due already, never the one ahead.
	if _, err := b.s.EndLeases(b.ctx, it, now, store.Holders{Only: []string{"n1"}}); err != nil {
		t.Fatal(err)
	}

	lease := store.Lease{Owner: "n2", Until: now.Add(time.Minute), Token: 20}
	var mu sync.Mutex
	won := map[string]int{}
	var all []*task.Task
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			l := lease
			l.Token += int64(w)
			for {
				ts, err := b.s.ClaimRunning(b.ctx, it, time.Now(), l, 4)
				if err != nil {
					t.Error(err)
					return
				}
				if len(ts) == 0 {
					return
				}
				for i := 1; i < len(ts); i++ {
					if ts[i].DueAt.Before(ts[i-1].DueAt) {
						t.Errorf("ClaimRunning answered out of due order")
					}
				}
				mu.Lock()
				for _, tk := range ts {
					won[tk.ID]++
				}
				all = append(all, ts...)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(won) != len(overdue)+1 || len(all) != len(won) {
		t.Fatalf("ClaimRunning took %d distinct in %d: want the %d overdue and the expired one, each once", len(won), len(all), len(overdue)+1)
	}
	if won[future.ID]+won[pausedDue.ID]+won[expiredAhead.ID] != 0 || won[expiredDue.ID] != 1 {
		t.Fatalf("ClaimRunning took a task not due, or paused: %v", won)
	}
	for _, tk := range all {
		row := b.get(tk.ID)
		wantAttempts := 1 // the expired one was claimed twice, never started
		if tk.Status != task.StatusRunning || row.Status != task.StatusRunning || row.Attempts != wantAttempts || tk.Attempts != wantAttempts ||
			row.Owner != "n2" || row.Token != tk.Token || !row.LeaseUntil.Equal(lease.Until) {
			t.Fatalf("claimed running: answered %v/%d, stored %+v", tk.Status, tk.Attempts, row)
		}
	}
	// A task claimed running finishes under its token; its Start would
	// find nothing claimed.
	tk := all[0]
	ref := store.Ref{ID: tk.ID, Token: tk.Token, DueAt: tk.DueAt, Topic: tk.Topic}
	if st, err := b.s.Start(b.ctx, []store.Ref{ref}, now.Add(time.Hour)); err != nil || len(st) != 0 {
		t.Fatalf("start of a task claimed running: %v %+v", err, st)
	}
	if err := b.s.Finish(b.ctx, []store.Outcome{{Ref: ref, Done: true}}); err != nil {
		t.Fatal(err)
	}
	if row := b.get(tk.ID); row.Status != task.StatusDone || row.Attempts != 1 {
		t.Fatalf("finished: %+v", row)
	}
	// Resumed, the paused topic's overdue task is taken too.
	tp.SetClaimFilter(nil)
	ts, err := b.s.ClaimRunning(b.ctx, it, time.Now(), lease, 10)
	if err != nil || len(ts) != 1 || ts[0].ID != pausedDue.ID {
		t.Fatalf("after resume: %v %+v", err, ts)
	}
}
