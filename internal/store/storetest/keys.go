package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/router"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// KeyOpener opens a store like Opener, with a key hold (how long a final
// task keeps its key from a new task).
type KeyOpener func(t *testing.T, topo router.Topology, segments int, keyHold time.Duration) store.Store

// RunKeys runs the suite of store.Keys: by key, update, key reuse,
// retention.
func RunKeys(t *testing.T, open KeyOpener) {
	t.Run("GetByKey", func(t *testing.T) { testGetByKey(t, open) })
	t.Run("KeyHeldThenReused", func(t *testing.T) { testKeyReuse(t, open) })
	t.Run("ConcurrentSubmitsOfAFreedKey", func(t *testing.T) { testConcurrentReuse(t, open) })
	t.Run("ReplaceOfAFinalTask", func(t *testing.T) { testReplaceFinal(t, open) })
	t.Run("ConcurrentReplacesOfAFinalTask", func(t *testing.T) { testConcurrentReplaceFinal(t, open) })
	t.Run("RequeueOfAReusedKey", func(t *testing.T) { testRequeueReused(t, open) })
	t.Run("Update", func(t *testing.T) { testUpdate(t, open) })
	t.Run("UpdateRacesStart", func(t *testing.T) { testUpdateRace(t, open) })
	t.Run("DeleteExpired", func(t *testing.T) { testDeleteExpired(t, open) })
}

func setupKeys(t *testing.T, open KeyOpener, dbs, tables, segs int, hold time.Duration) *bundle {
	t.Parallel()
	topo := router.Topology{Databases: dbs, Tables: tables}
	return &bundle{t: t, s: open(t, topo, segs, hold), topo: topo, segs: segs, ctx: context.Background()}
}

// end takes nt through claim and start to an outcome (done, dead), or
// cancels it (cancelled).
func (b *bundle) end(nt store.NewTask, st task.Status) {
	b.t.Helper()
	if st == task.StatusCancelled {
		if _, err := b.s.Cancel(b.ctx, nt.ID); err != nil {
			b.t.Fatal(err)
		}
		return
	}
	// Claimed alone through Update, whatever else is due in its item.
	now := time.Now()
	lease := store.Lease{Owner: "n", Until: now.Add(time.Minute), Token: store.NewToken()}
	if _, err := b.s.Update(b.ctx, nt.ID, store.Patch{DueAt: &nt.DueAt, Claim: &lease}); err != nil {
		b.t.Fatal(err)
	}
	mine := []store.Ref{{ID: nt.ID, Token: lease.Token, DueAt: nt.DueAt, Topic: nt.Topic}}
	if s, err := b.s.Start(b.ctx, mine, now.Add(time.Minute)); err != nil || len(s) != 1 {
		b.t.Fatalf("start %s: %v %d", nt.ID, err, len(s))
	}
	o := store.Outcome{Ref: mine[0], Done: st == task.StatusDone, Dead: st == task.StatusDead, Error: "x"}
	if err := b.s.Finish(b.ctx, []store.Outcome{o}); err != nil {
		b.t.Fatal(err)
	}
	if got := b.get(nt.ID); got.Status != st {
		b.t.Fatalf("task %s is %s, want %s", nt.ID, got.Status, st)
	}
}

func testGetByKey(t *testing.T, open KeyOpener) {
	b := setupKeys(t, open, 2, 3, 2, 0)
	now := time.Now()
	if _, err := b.s.GetByKey(b.ctx, "gk", "nobody"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown key: %v, want ErrNotFound", err)
	}
	if _, err := b.s.GetByKey(b.ctx, "gk", ""); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("empty key: %v, want ErrNotFound", err)
	}
	// Many keys over every table; each is found where its hash routes it.
	var in []store.NewTask
	for i := range 40 {
		in = append(in, b.newTask("gk", fmt.Sprintf("order-%d/é", i), now.Add(time.Hour)))
	}
	b.insert(in...)
	for _, nt := range in {
		got, err := b.s.GetByKey(b.ctx, "gk", nt.Key)
		if err != nil || got.ID != nt.ID {
			t.Fatalf("get by key %q: %v %+v, want %s", nt.Key, err, got, nt.ID)
		}
	}
	if _, err := b.s.GetByKey(b.ctx, "gk.other", in[0].Key); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("same key, other topic: %v, want ErrNotFound", err)
	}
	// A key whose task ended and was reused (hold 0) names the live task;
	// once that ends too, the one that ended last.
	k := in[0]
	b.end(k, task.StatusDone)
	if got, err := b.s.GetByKey(b.ctx, "gk", k.Key); err != nil || got.ID != k.ID || got.Status != task.StatusDone {
		t.Fatalf("final task by key: %v %+v", err, got)
	}
	k2 := b.newTask("gk", k.Key, now.Add(-time.Second))
	if r := b.insert(k2)[0]; r.Existing {
		t.Fatalf("key not reused with no hold: got %s", r.Task.ID)
	}
	if got, err := b.s.GetByKey(b.ctx, "gk", k.Key); err != nil || got.ID != k2.ID {
		t.Fatalf("reused key: %v %+v, want the live %s", err, got, k2.ID)
	}
	b.end(k2, task.StatusCancelled)
	if got, err := b.s.GetByKey(b.ctx, "gk", k.Key); err != nil || got.ID != k2.ID || got.Status != task.StatusCancelled {
		t.Fatalf("two final tasks: %v %+v, want the last ended %s", err, got, k2.ID)
	}
}

func testKeyReuse(t *testing.T, open KeyOpener) {
	const hold = 300 * time.Millisecond
	b := setupKeys(t, open, 1, 2, 1, hold)
	now := time.Now()
	for _, st := range store.FinalStatuses {
		key := "reuse-" + st.String()
		first := b.newTask("ku", key, now.Add(-time.Second))
		b.insert(first)
		// While live: the same task, nothing written.
		if r := b.insert(b.newTask("ku", key, now))[0]; !r.Existing || r.Task.ID != first.ID {
			t.Fatalf("%s: resubmit of a live key: %+v", st, r)
		}
		b.end(first, st)
		ended := time.Now()
		// Within the hold: the final task, so a retried submit never
		// delivers twice.
		if r := b.insert(b.newTask("ku", key, now))[0]; !r.Existing || r.Task.ID != first.ID || r.Task.Status != st {
			if time.Since(ended) < hold {
				t.Fatalf("%s: resubmit within the key hold: existing=%v %s %s", st, r.Existing, r.Task.ID, r.Task.Status)
			}
		}
		time.Sleep(hold + 50*time.Millisecond)
		// After it: a new task under the same key.
		second := b.newTask("ku", key, now.Add(time.Hour))
		r := b.insert(second)[0]
		if r.Existing || r.Task.ID != second.ID || r.Task.ID == first.ID {
			t.Fatalf("%s: resubmit after the key hold: existing=%v id=%s (first %s)", st, r.Existing, r.Task.ID, first.ID)
		}
		if got := b.get(first.ID); got.Status != st {
			t.Fatalf("%s: the old task changed to %s", st, got.Status)
		}
		// The new one holds the key while live.
		if r := b.insert(b.newTask("ku", key, now))[0]; !r.Existing || r.Task.ID != second.ID {
			t.Fatalf("%s: resubmit of the reused key: %+v", st, r)
		}
	}
	// In one batch: a held key, a freed key and a fresh key.
	held, freed := b.newTask("ku", "batch-held", now.Add(-time.Second)), b.newTask("ku", "batch-freed", now.Add(-time.Second))
	b.insert(held, freed)
	b.end(freed, task.StatusDone)
	time.Sleep(hold + 50*time.Millisecond)
	b.end(held, task.StatusDone)
	in := []store.NewTask{b.newTask("ku", "batch-held", now), b.newTask("ku", "batch-freed", now), b.newTask("ku", "batch-fresh", now)}
	res := b.insert(in...)
	if time.Since(b.get(held.ID).UpdatedAt) < hold && (!res[0].Existing || res[0].Task.ID != held.ID) {
		t.Fatalf("batch: held key: %+v", res[0])
	}
	if res[1].Existing || res[1].Task.ID != in[1].ID || res[2].Existing {
		t.Fatalf("batch: freed %+v, fresh %+v", res[1], res[2])
	}
}

func testConcurrentReuse(t *testing.T, open KeyOpener) {
	b := setupKeys(t, open, 1, 2, 1, 0)
	now := time.Now()
	for round := range 5 {
		key := fmt.Sprintf("hot-key-%d", round)
		old := b.newTask("cr", key, now.Add(-time.Second))
		b.insert(old)
		b.end(old, task.StatusDone)
		ids := b.insertRacing(t, 12, func() store.NewTask { return b.newTask("cr", key, now.Add(time.Hour)) })
		if ids[0] == old.ID {
			t.Fatalf("round %d: concurrent submits of a freed key got the old task %s", round, old.ID)
		}
	}
	counts, err := b.s.Count(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if counts[task.StatusPending] != 5 || counts[task.StatusDone] != 5 {
		t.Fatalf("counts %v, want 5 pending and 5 done", counts)
	}
}

// replacing marks nt as a submit with if_exists: replace.
func replacing(nt store.NewTask) store.NewTask {
	nt.ReplaceFinal = true
	return nt
}

func testReplaceFinal(t *testing.T, open KeyOpener) {
	// A hold far longer than the test: every final task holds its key.
	const hold = time.Hour
	b := setupKeys(t, open, 2, 3, 1, hold)
	now := time.Now()
	for _, st := range store.FinalStatuses {
		key := "order-42-" + st.String()
		first := b.newTask("rf", key, now.Add(-time.Second))
		b.insert(first)
		// A replace of a live task finds it (the submit path updates it).
		if r := b.insert(replacing(b.newTask("rf", key, now)))[0]; !r.Existing || r.Task.ID != first.ID || !r.HeldUntil.IsZero() {
			t.Fatalf("%s: replace of a live key: %+v", st, r)
		}
		b.end(first, st)
		ended := b.get(first.ID).UpdatedAt
		// Keep: the final task, and until when it holds the key.
		r := b.insert(b.newTask("rf", key, now))[0]
		if !r.Existing || r.Task.ID != first.ID || r.Task.Status != st {
			t.Fatalf("%s: keep over a final task: existing=%v %s %s", st, r.Existing, r.Task.ID, r.Task.Status)
		}
		if want := ended.Add(hold); !r.HeldUntil.Equal(want) {
			t.Fatalf("%s: held until %v, want %v (ended %v + hold)", st, r.HeldUntil, want, ended)
		}
		// Replace: a new task, although the hold has not passed.
		second := replacing(b.newTask("rf", key, now.Add(time.Hour)))
		r = b.insert(second)[0]
		if r.Existing || r.Task.ID != second.ID || !r.HeldUntil.IsZero() {
			t.Fatalf("%s: replace over a final task: existing=%v id=%s (want new %s, first %s)", st, r.Existing, r.Task.ID, second.ID, first.ID)
		}
		if got := b.get(first.ID); got.Status != st {
			t.Fatalf("%s: the final task changed to %s", st, got.Status)
		}
		// The same replace again (a retry) meets the live task it made.
		if r := b.insert(replacing(b.newTask("rf", key, now.Add(time.Hour))))[0]; !r.Existing || r.Task.ID != second.ID || !r.HeldUntil.IsZero() {
			t.Fatalf("%s: retried replace: existing=%v id=%s, want %s", st, r.Existing, r.Task.ID, second.ID)
		}
		if got, err := b.s.GetByKey(b.ctx, "rf", key); err != nil || got.ID != second.ID {
			t.Fatalf("%s: by key after the replace: %v %+v, want %s", st, err, got, second.ID)
		}
	}
	// One batch over several tables: replace over a final task, keep over
	// a final task, replace of a fresh key, and two replaces of one final
	// key (the first makes the task, the second meets it).
	var ends []store.NewTask
	for _, k := range []string{"b-repl", "b-keep", "b-twice"} {
		nt := b.newTask("rf", k, now.Add(-time.Second))
		b.insert(nt)
		b.end(nt, task.StatusCancelled)
		ends = append(ends, nt)
	}
	in := []store.NewTask{
		replacing(b.newTask("rf", "b-repl", now)),
		b.newTask("rf", "b-keep", now),
		replacing(b.newTask("rf", "b-fresh", now)),
		replacing(b.newTask("rf", "b-twice", now)),
		replacing(b.newTask("rf", "b-twice", now)),
	}
	for i := range 20 { // enough rows for several statements per table
		in = append(in, replacing(b.newTask("rf", fmt.Sprintf("b-more-%d", i), now)))
	}
	res := b.insert(in...)
	if res[0].Existing || res[0].Task.ID != in[0].ID {
		t.Fatalf("batch: replace over a final task: %+v", res[0])
	}
	if !res[1].Existing || res[1].Task.ID != ends[1].ID || res[1].HeldUntil.IsZero() {
		t.Fatalf("batch: keep over a final task: %+v", res[1])
	}
	if res[2].Existing || res[2].Task.ID != in[2].ID {
		t.Fatalf("batch: replace of a fresh key: %+v", res[2])
	}
	if res[3].Existing || res[3].Task.ID != in[3].ID || !res[4].Existing || res[4].Task.ID != in[3].ID {
		t.Fatalf("batch: two replaces of one final key: %+v, %+v", res[3], res[4])
	}
	for i, r := range res[5:] {
		if r.Existing {
			t.Fatalf("batch: fresh key %d: %+v", i, r)
		}
	}
}

func testConcurrentReplaceFinal(t *testing.T, open KeyOpener) {
	b := setupKeys(t, open, 1, 2, 1, time.Hour)
	now := time.Now()
	for round := range 5 {
		key := fmt.Sprintf("replaced-key-%d", round)
		old := b.newTask("crf", key, now.Add(-time.Second))
		b.insert(old)
		b.end(old, task.StatusCancelled)
		// Exactly one of the racing replaces makes the new task; the rest
		// meet it.
		ids := b.insertRacing(t, 12, func() store.NewTask { return replacing(b.newTask("crf", key, now.Add(time.Hour))) })
		if ids[0] == old.ID {
			t.Fatalf("round %d: concurrent replaces of a final key got the final task %s", round, old.ID)
		}
	}
	counts, err := b.s.Count(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if counts[task.StatusPending] != 5 || counts[task.StatusCancelled] != 5 {
		t.Fatalf("counts %v, want 5 pending and 5 cancelled", counts)
	}
}

func testRequeueReused(t *testing.T, open KeyOpener) {
	b := setupKeys(t, open, 1, 1, 1, 0)
	now := time.Now()
	old := b.newTask("rq", "k", now.Add(-time.Second))
	b.insert(old)
	b.end(old, task.StatusDead)
	fresh := b.newTask("rq", "k", now.Add(time.Hour))
	if r := b.insert(fresh)[0]; r.Existing {
		t.Fatal("dead task kept its key with no hold")
	}
	_, err := b.s.Requeue(b.ctx, old.ID, now)
	var kc *store.KeyConflictError
	if !errors.Is(err, store.ErrConflict) || !errors.As(err, &kc) || kc.Key != "k" {
		t.Fatalf("requeue of a dead task whose key is live again: %v, want a KeyConflictError", err)
	}
	if got := b.get(old.ID); got.Status != task.StatusDead {
		t.Fatalf("refused requeue changed the task to %s", got.Status)
	}
	b.end(fresh, task.StatusCancelled)
	if rq, err := b.s.Requeue(b.ctx, old.ID, now); err != nil || rq.Status != task.StatusPending {
		t.Fatalf("requeue once the key is free: %v %+v", err, rq)
	}
}

func testUpdate(t *testing.T, open KeyOpener) {
	b := setupKeys(t, open, 2, 2, 2, 0)
	now := time.Now()
	ptr := func(v time.Time) *time.Time { return &v }
	if _, err := b.s.Update(b.ctx, "not-an-id", store.Patch{DueAt: ptr(now)}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("bad id: %v", err)
	}
	ghost := b.newTask("up", "", now)
	if _, err := b.s.Update(b.ctx, ghost.ID, store.Patch{DueAt: ptr(now)}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown id: %v", err)
	}

	// Pending: every field; the row keeps its identity.
	a := b.newTask("up", "a", now.Add(time.Hour))
	b.insert(a)
	due := now.Add(2 * time.Hour).Truncate(time.Microsecond)
	target, maxA := "https://example.com/new", 7
	got, err := b.s.Update(b.ctx, a.ID, store.Patch{DueAt: &due, Payload: []byte(`{"v":2}`), Target: &target, MaxAttempts: &maxA})
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != a.ID || !got.DueAt.Equal(due) || string(got.Payload) != `{"v":2}` || got.Target != target || got.MaxAttempts != 7 ||
		got.Status != task.StatusPending || got.Key != "a" {
		t.Fatalf("after update: %+v", got)
	}
	if stored := b.get(a.ID); !stored.DueAt.Equal(due) || string(stored.Payload) != `{"v":2}` {
		t.Fatalf("stored after update: %+v", stored)
	}
	// Payload only: due time and state stay.
	got, err = b.s.Update(b.ctx, a.ID, store.Patch{Payload: []byte(`3`)})
	if err != nil || !got.DueAt.Equal(due) || string(got.Payload) != "3" || got.Target != target {
		t.Fatalf("payload only: %v %+v", err, got)
	}

	// Claimed, due time moved: the old claim is void (its Start fails),
	// the task is pending at the new time and claimable then, not before.
	c := b.newTask("up", "c", now.Add(-time.Second))
	b.insert(c)
	old := b.claimAll("holder", now, now, now.Add(time.Minute))
	if len(old) != 1 {
		t.Fatalf("claimed %d", len(old))
	}
	later := now.Add(time.Hour).Truncate(time.Microsecond)
	got, err = b.s.Update(b.ctx, c.ID, store.Patch{DueAt: &later})
	if err != nil || got.Status != task.StatusPending || got.Token != 0 || got.Owner != "" || !got.DueAt.Equal(later) {
		t.Fatalf("claimed moved later: %v %+v", err, got)
	}
	if st, err := b.s.Start(b.ctx, old, now.Add(time.Minute)); err != nil || len(st) != 0 {
		t.Fatalf("the old holder started a moved task: %v %d", err, len(st))
	}
	if r := b.claimAll("n2", now.Add(time.Minute), now, now.Add(time.Minute)); len(r) != 0 {
		t.Fatal("a task moved later was claimed before its new time")
	}
	if r := b.claimAll("n2", later, now, later.Add(time.Minute)); len(r) != 1 || r[0].ID != c.ID || !r[0].DueAt.Equal(later) {
		t.Fatalf("at its new time: %+v", r)
	}

	// Claimed, moved with a new claim: only the new token starts it.
	d := b.newTask("up", "d", now.Add(-time.Second))
	b.insert(d)
	old = b.claimAll("holder", now, now, now.Add(time.Minute))
	if len(old) != 1 {
		t.Fatalf("claimed %d", len(old))
	}
	sooner := now.Add(-time.Millisecond).Truncate(time.Microsecond)
	lease := store.Lease{Owner: "updater", Until: now.Add(time.Minute), Token: store.NewToken()}
	got, err = b.s.Update(b.ctx, d.ID, store.Patch{DueAt: &sooner, Claim: &lease})
	if err != nil || got.Status != task.StatusClaimed || got.Token != lease.Token || got.Owner != "updater" || !got.DueAt.Equal(sooner) {
		t.Fatalf("moved with a claim: %v %+v", err, got)
	}
	if st, _ := b.s.Start(b.ctx, old, now.Add(time.Minute)); len(st) != 0 {
		t.Fatal("the old token started the task")
	}
	st, err := b.s.Start(b.ctx, []store.Ref{{ID: d.ID, Token: lease.Token}}, now.Add(time.Minute))
	if err != nil || len(st) != 1 {
		t.Fatalf("the new token: %v %d", err, len(st))
	}
	// Claimed, payload only: the claim stands.
	e := b.newTask("up", "e", now.Add(-time.Second))
	b.insert(e)
	er := b.claimAll("holder", now, now, now.Add(time.Minute))
	if _, err := b.s.Update(b.ctx, e.ID, store.Patch{Payload: []byte(`"new"`)}); err != nil {
		t.Fatal(err)
	}
	if st, err := b.s.Start(b.ctx, er, now.Add(time.Minute)); err != nil || len(st) != 1 || string(st[0].Payload) != `"new"` {
		t.Fatalf("start after a payload change: %v %+v", err, st)
	}

	// Running and final: conflict, nothing changed.
	for _, id := range []string{d.ID, e.ID} {
		_, err := b.s.Update(b.ctx, id, store.Patch{DueAt: &later})
		var ce *store.ConflictError
		if !errors.As(err, &ce) || ce.Status != task.StatusRunning {
			t.Fatalf("update running: %v", err)
		}
	}
	for _, st := range store.FinalStatuses {
		f := b.newTask("up", "f-"+st.String(), now.Add(-time.Second))
		b.insert(f)
		b.end(f, st)
		_, err := b.s.Update(b.ctx, f.ID, store.Patch{Payload: []byte(`1`)})
		var ce *store.ConflictError
		if !errors.As(err, &ce) || ce.Status != st {
			t.Fatalf("update %s: %v", st, err)
		}
		if got := b.get(f.ID); string(got.Payload) == "1" {
			t.Fatalf("update of a %s task changed it", st)
		}
	}
}

func testUpdateRace(t *testing.T, open KeyOpener) {
	b := setupKeys(t, open, 1, 2, 1, 0)
	now := time.Now()
	refs := b.claimedDue("urace", 200, now)
	later := now.Add(time.Hour)
	started := map[string]bool{}
	moved := map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		b.startInTens(refs, now.Add(time.Hour), func(st []*task.Task) {
			mu.Lock()
			for _, s := range st {
				started[s.ID] = true
			}
			mu.Unlock()
		})
	}()
	go func() {
		defer wg.Done()
		fromTheEnd(t, refs, &mu, moved, func(id string) error {
			_, err := b.s.Update(b.ctx, id, store.Patch{DueAt: &later})
			return err
		})
	}()
	wg.Wait()
	for id := range started {
		if moved[id] {
			t.Fatalf("task %s both started and moved", id)
		}
	}
	if len(started)+len(moved) != 200 {
		t.Fatalf("started %d + moved %d != 200", len(started), len(moved))
	}
}

func testDeleteExpired(t *testing.T, open KeyOpener) {
	b := setupKeys(t, open, 1, 2, 2, 0)
	now := time.Now()
	// Per item: 3 rows of each final status, and live rows that must stay.
	byItem := map[store.Item]map[task.Status][]string{}
	var live []string
	n := 0
	for len(byItem) < 4 || n < 400 {
		n++
		nt := b.newTask("ret", fmt.Sprintf("r-%d", n), now.Add(-time.Second))
		it := b.item(nt)
		m := byItem[it]
		if m == nil {
			m = map[task.Status][]string{}
			byItem[it] = m
		}
		b.insert(nt)
		placed := false
		for _, st := range store.FinalStatuses {
			if len(m[st]) < 3 {
				b.end(nt, st)
				m[st] = append(m[st], nt.ID)
				placed = true
				break
			}
		}
		if !placed {
			live = append(live, nt.ID)
		}
	}
	ended := time.Now()
	it0 := b.s.Items()[0]
	// Nothing ended before now-1h.
	if d, err := b.s.DeleteExpired(b.ctx, it0, task.StatusDone, now.Add(-time.Hour), 100); err != nil || d != 0 {
		t.Fatalf("nothing expired: deleted %d, %v", d, err)
	}
	if _, err := b.s.DeleteExpired(b.ctx, it0, task.StatusPending, ended, 100); err == nil {
		t.Fatal("deleting pending rows was allowed")
	}
	// Limit: 2 of 3, then the last one, then none.
	for _, want := range []int64{2, 1, 0} {
		d, err := b.s.DeleteExpired(b.ctx, it0, task.StatusDone, ended.Add(time.Millisecond), 2)
		if err != nil || d != want {
			t.Fatalf("deleted %d, %v; want %d", d, err, want)
		}
	}
	for _, id := range byItem[it0][task.StatusDone] {
		if _, err := b.s.Get(b.ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("expired done task %s still there: %v", id, err)
		}
	}
	// Only that item and status went.
	for it, m := range byItem {
		for st, ids := range m {
			if it == it0 && st == task.StatusDone {
				continue
			}
			for _, id := range ids {
				if got := b.get(id); got.Status != st {
					t.Fatalf("%s changed", id)
				}
			}
		}
	}
	for _, it := range b.s.Items() {
		for _, st := range store.FinalStatuses {
			if _, err := b.s.DeleteExpired(b.ctx, it, st, ended.Add(time.Millisecond), 1000); err != nil {
				t.Fatal(err)
			}
		}
	}
	counts, err := b.s.Count(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if counts[task.StatusDone]+counts[task.StatusDead]+counts[task.StatusCancelled] != 0 || counts[task.StatusPending] != int64(len(live)) {
		t.Fatalf("after deleting every expired row: %v, want %d pending only", counts, len(live))
	}
}
