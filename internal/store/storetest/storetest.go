// Package storetest is the contract suite every task store passes. It runs
// unchanged against each engine: Run(t, opener).
package storetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/router"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// Opener opens a store on fresh databases shaped by topo and segments and
// closes it when the test ends.
type Opener func(t *testing.T, topo router.Topology, segments int) store.Store

type bundle struct {
	t    *testing.T
	s    store.Store
	topo router.Topology
	segs int
	ctx  context.Context
}

func setup(t *testing.T, open Opener, dbs, tables, segs int) *bundle {
	t.Parallel()
	topo := router.Topology{Databases: dbs, Tables: tables}
	return &bundle{t: t, s: open(t, topo, segs), topo: topo, segs: segs, ctx: context.Background()}
}

// newTask builds a task due at due; key "" makes a keyless task.
func (b *bundle) newTask(topic, key string, due time.Time) store.NewTask {
	b.t.Helper()
	v, err := task.Validate(task.Spec{Topic: topic, Key: key, DueAt: &due, Payload: []byte(`{"k":"` + key + `"}`), Target: "http://127.0.0.1:1/hook"}, task.Limits{}, due.Add(-time.Hour))
	if err != nil {
		b.t.Fatal(err)
	}
	var hash uint32
	if key != "" {
		hash = router.HashKey(key)
	}
	id, p := router.NewID(time.Now(), hash, key != "")
	return store.NewTask{ID: id, ShardHash: p.ShardHash, Seg: p.Segment(b.segs), Validated: v}
}

func (b *bundle) insert(tasks ...store.NewTask) []store.Inserted {
	b.t.Helper()
	res, err := b.s.Insert(b.ctx, tasks)
	if err != nil {
		b.t.Fatal(err)
	}
	return res
}

func (b *bundle) item(nt store.NewTask) store.Item {
	db, table := b.topo.Locate(nt.ShardHash)
	return store.Item{DB: db, Table: table, Segment: nt.Seg}
}

func (b *bundle) get(id string) *task.Task {
	b.t.Helper()
	tk, err := b.s.Get(b.ctx, id)
	if err != nil {
		b.t.Fatal(err)
	}
	return tk
}

// claimAll claims everything claimable in every item.
func (b *bundle) claimAll(owner string, horizon, now time.Time, until time.Time) []store.Ref {
	b.t.Helper()
	var out []store.Ref
	lease := store.Lease{Owner: owner, Until: until, Token: time.Now().UnixNano()}
	for _, it := range b.s.Items() {
		for {
			refs, err := b.s.Claim(b.ctx, it, horizon, now, lease, 100)
			if err != nil {
				b.t.Fatal(err)
			}
			out = append(out, refs...)
			if len(refs) < 100 {
				break
			}
		}
	}
	return out
}

// Run runs the whole suite.
func Run(t *testing.T, open Opener) {
	t.Run("InsertGetRoundTrip", func(t *testing.T) { testRoundTrip(t, open) })
	t.Run("IdempotentInsertConcurrent", func(t *testing.T) { testIdempotent(t, open) })
	t.Run("StateMachine", func(t *testing.T) { testStateMachine(t, open) })
	t.Run("LeaseExpiry", func(t *testing.T) { testLeaseExpiry(t, open) })
	t.Run("EndLeases", func(t *testing.T) { testEndLeases(t, open) })
	t.Run("ExtendHeld", func(t *testing.T) { testExtendHeld(t, open) })
	t.Run("ConcurrentClaimsDisjoint", func(t *testing.T) { testConcurrentClaims(t, open) })
	t.Run("CancelRacesStart", func(t *testing.T) { testCancelRace(t, open) })
	t.Run("KeysetScanWithInserts", func(t *testing.T) { testKeysetScan(t, open) })
	t.Run("SegmentsPartition", func(t *testing.T) { testSegments(t, open) })
	t.Run("NextDue", func(t *testing.T) { testNextDue(t, open) })
	t.Run("ListAndCount", func(t *testing.T) { testListCount(t, open) })
	t.Run("BadIDs", func(t *testing.T) { testBadIDs(t, open) })
	t.Run("PausedTopics", func(t *testing.T) { testPausedTopics(t, open) })
	t.Run("TopicStatsRequeue", func(t *testing.T) { testTopicStatsRequeue(t, open) })
	t.Run("DueHistogram", func(t *testing.T) { testDueHistogram(t, open) })
	t.Run("ListDue", func(t *testing.T) { testListDue(t, open) })
	t.Run("FinishClaimCancel", func(t *testing.T) { testFinishClaimCancel(t, open) })
	t.Run("MixedBatches", func(t *testing.T) { testMixedBatches(t, open) })
	t.Run("Priority", func(t *testing.T) { testPriority(t, open) })
	t.Run("Purge", func(t *testing.T) { testPurge(t, open) })
	t.Run("InsertRunning", func(t *testing.T) { testInsertRunning(t, open) })
	t.Run("ClaimRunning", func(t *testing.T) { testClaimRunning(t, open) })
}

func testRoundTrip(t *testing.T, open Opener) {
	b := setup(t, open, 2, 3, 2)
	due := time.Now().Add(time.Hour).Truncate(time.Microsecond).Add(123 * time.Microsecond)
	var in []store.NewTask
	for i := range 60 {
		key := ""
		if i%2 == 0 {
			key = fmt.Sprintf("ключ-%d/é", i) // non-ASCII keys round-trip
		}
		nt := b.newTask("rt.topic", key, due.Add(time.Duration(i)*time.Second))
		nt.MaxAttempts = 1 + i
		in = append(in, nt)
	}
	res := b.insert(in...)
	if len(res) != len(in) {
		t.Fatalf("%d results for %d tasks", len(res), len(in))
	}
	for i, r := range res {
		if r.Existing || r.Task.ID != in[i].ID {
			t.Fatalf("result %d: %+v is not task %s (results must be in input order)", i, r, in[i].ID)
		}
		got := b.get(in[i].ID)
		w := in[i]
		if got.Topic != w.Topic || got.Key != w.Key || string(got.Payload) != string(w.Payload) || got.Target != w.Target ||
			got.MaxAttempts != w.MaxAttempts || !got.DueAt.Equal(w.DueAt) || !got.FirstDueAt.Equal(w.DueAt) || got.Status != task.StatusPending || got.ShardHash != w.ShardHash || got.Seg != w.Seg {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, w)
		}
	}
}

func testIdempotent(t *testing.T, open Opener) {
	b := setup(t, open, 2, 2, 1)
	due := time.Now().Add(time.Hour)
	ids := b.insertRacing(t, 12, func() store.NewTask { return b.newTask("idem", "same-key", due) })
	// Same key, other topic: a different task. Keyless tasks never collide.
	other := b.insert(b.newTask("idem.other", "same-key", due))[0]
	if other.Existing || other.Task.ID == ids[0] {
		t.Fatal("same key in another topic was treated as the same task")
	}
	k1, k2 := b.newTask("idem", "", due), b.newTask("idem", "", due)
	if r := b.insert(k1, k2); r[0].Existing || r[1].Existing {
		t.Fatal("keyless tasks collided")
	}
	// In one batch, a key that exists comes back Existing with the stored task.
	r := b.insert(b.newTask("idem", "same-key", due), b.newTask("idem", "fresh", due))
	if !r[0].Existing || r[0].Task.ID != ids[0] || r[1].Existing {
		t.Fatalf("mixed batch: %+v %+v", r[0], r[1])
	}
	counts, err := b.s.Count(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if counts[task.StatusPending] != 5 {
		t.Fatalf("pending count %d, want 5", counts[task.StatusPending])
	}
}

// insertRacing inserts workers tasks made by mk at once, each in its own
// call, and checks that they all got one task and exactly one created it;
// it returns the IDs they got, by worker.
func (b *bundle) insertRacing(t *testing.T, workers int, mk func() store.NewTask) []string {
	t.Helper()
	ids := make([]string, workers)
	created := make([]bool, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			res, err := b.s.Insert(b.ctx, []store.NewTask{mk()})
			if err != nil {
				t.Error(err)
				return
			}
			ids[w], created[w] = res[0].Task.ID, !res[0].Existing
		})
	}
	wg.Wait()
	n := 0
	for w := range workers {
		if ids[w] != ids[0] {
			t.Fatalf("concurrent submits of one key got different tasks: %v", ids)
		}
		if created[w] {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d concurrent submits of one key created a task; want exactly 1", n)
	}
	return ids
}

func testStateMachine(t *testing.T, open Opener) {
	b := setup(t, open, 1, 2, 1)
	now := time.Now()
	lease := func(tok int64) store.Lease {
		return store.Lease{Owner: "n1", Until: now.Add(time.Minute), Token: tok}
	}
	// pending → claimed → running → done; done is never claimed again.
	a := b.newTask("sm", "a", now.Add(-time.Second))
	b.insert(a)
	refs, err := b.s.Claim(b.ctx, b.item(a), now, now, lease(11), 10)
	if err != nil || len(refs) != 1 || refs[0].ID != a.ID || refs[0].Token != 11 {
		t.Fatalf("claim: %v %+v", err, refs)
	}
	if got := b.get(a.ID); got.Status != task.StatusClaimed || got.Owner != "n1" || got.Token != 11 {
		t.Fatalf("after claim: %+v", got)
	}
	if st, _ := b.s.Start(b.ctx, []store.Ref{{ID: a.ID, Token: 99}}, now.Add(time.Minute)); len(st) != 0 {
		t.Fatal("start under a wrong token succeeded")
	}
	st, err := b.s.Start(b.ctx, refs, now.Add(time.Minute))
	if err != nil || len(st) != 1 || st[0].Attempts != 1 || st[0].Status != task.StatusRunning {
		t.Fatalf("start: %v %+v", err, st)
	}
	if _, err := b.s.Cancel(b.ctx, a.ID); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("cancel running: %v, want ErrConflict", err)
	}
	if err := b.s.Finish(b.ctx, []store.Outcome{{Ref: store.Ref{ID: a.ID, Token: 12}, Done: true}}); err != nil {
		t.Fatal(err)
	}
	if got := b.get(a.ID); got.Status != task.StatusRunning {
		t.Fatalf("finish under a stale token changed the task to %s", got.Status)
	}
	if err := b.s.Finish(b.ctx, []store.Outcome{{Ref: refs[0], Done: true}}); err != nil {
		t.Fatal(err)
	}
	if got := b.get(a.ID); got.Status != task.StatusDone {
		t.Fatalf("after finish: %s", got.Status)
	}
	if again := b.claimAll("n2", now.Add(time.Hour), now.Add(time.Hour), now.Add(2*time.Hour)); len(again) != 0 {
		t.Fatalf("a done task was claimed: %+v", again)
	}
	if _, err := b.s.Cancel(b.ctx, a.ID); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("cancel done: %v, want ErrConflict", err)
	}
	if _, err := b.s.Requeue(b.ctx, a.ID, now); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("requeue done: %v, want ErrConflict", err)
	}

	// Retry keeps last_error and moves due_at; dead after Finish{Dead}; requeue.
	c := b.newTask("sm", "c", now.Add(-time.Second))
	b.insert(c)
	cr, _ := b.s.Claim(b.ctx, b.item(c), now, now, lease(21), 10)
	b.s.Start(b.ctx, cr, now.Add(time.Minute))
	retryAt := now.Add(time.Hour).Truncate(time.Microsecond)
	if err := b.s.Finish(b.ctx, []store.Outcome{{Ref: cr[0], RetryAt: retryAt, Error: "HTTP 500"}}); err != nil {
		t.Fatal(err)
	}
	got := b.get(c.ID)
	if got.Status != task.StatusPending || !got.DueAt.Equal(retryAt) || got.LastError != "HTTP 500" || got.Attempts != 1 || got.Owner != "" ||
		!got.FirstDueAt.Equal(c.DueAt.Truncate(time.Microsecond)) {
		t.Fatalf("after retry (first due %s): %+v", c.DueAt, got)
	}
	cr, _ = b.s.Claim(b.ctx, b.item(c), retryAt, now, lease(22), 10)
	if len(cr) != 1 {
		t.Fatal("retried task not claimable at its new due time")
	}
	b.s.Start(b.ctx, cr, now.Add(time.Minute))
	// A delivery that never reached its target does not use an attempt.
	if err := b.s.Finish(b.ctx, []store.Outcome{{Ref: cr[0], RetryAt: retryAt, Error: "queue full", NotAttempted: true}}); err != nil {
		t.Fatal(err)
	}
	if got := b.get(c.ID); got.Attempts != 1 || got.Status != task.StatusPending || got.LastError != "queue full" {
		t.Fatalf("after a not-attempted retry: %+v", got)
	}
	cr, _ = b.s.Claim(b.ctx, b.item(c), retryAt, now, lease(23), 10)
	b.s.Start(b.ctx, cr, now.Add(time.Minute))
	if err := b.s.Finish(b.ctx, []store.Outcome{{Ref: cr[0], Dead: true, Error: "gave up"}}); err != nil {
		t.Fatal(err)
	}
	if got := b.get(c.ID); got.Status != task.StatusDead || got.Attempts != 2 || got.LastError != "gave up" {
		t.Fatalf("after dead: %+v", got)
	}
	if again := b.claimAll("n2", now.Add(24*time.Hour), now.Add(24*time.Hour), now.Add(25*time.Hour)); len(again) != 0 {
		t.Fatal("a dead task was claimed")
	}
	rq, err := b.s.Requeue(b.ctx, c.ID, now)
	if err != nil || rq.Status != task.StatusPending || rq.Attempts != 0 {
		t.Fatalf("requeue: %v %+v", err, rq)
	}

	// Cancel pending and claimed; twice is fine; cancelled is never claimed.
	d, e := b.newTask("sm", "d", now.Add(time.Hour)), b.newTask("sm", "e", now.Add(-time.Second))
	b.insert(d, e)
	er, _ := b.s.Claim(b.ctx, b.item(e), now, now, lease(31), 10)
	for _, id := range []string{d.ID, e.ID, d.ID} {
		ct, err := b.s.Cancel(b.ctx, id)
		if err != nil || ct.Status != task.StatusCancelled {
			t.Fatalf("cancel %s: %v %+v", id, err, ct)
		}
	}
	st, err = b.s.Start(b.ctx, er, now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st {
		if s.ID == e.ID {
			t.Fatal("a cancelled task was started")
		}
	}
	for _, r := range b.claimAll("n2", now.Add(24*time.Hour), now.Add(24*time.Hour), now.Add(25*time.Hour)) {
		if r.ID == d.ID || r.ID == e.ID {
			t.Fatal("a cancelled task was claimed")
		}
	}

	// Release returns claimed to pending without counting an attempt.
	f := b.newTask("sm", "f", now.Add(-time.Second))
	b.insert(f)
	fr, _ := b.s.Claim(b.ctx, b.item(f), now, now, lease(41), 10)
	if err := b.s.Release(b.ctx, fr); err != nil {
		t.Fatal(err)
	}
	if got := b.get(f.ID); got.Status != task.StatusPending || got.Attempts != 0 || got.Owner != "" {
		t.Fatalf("after release: %+v", got)
	}
}

func testLeaseExpiry(t *testing.T, open Opener) {
	b := setup(t, open, 1, 1, 1)
	now := time.Now()
	a := b.newTask("lease", "a", now.Add(-time.Second))
	b.insert(a)
	it := b.item(a)
	r1, _ := b.s.Claim(b.ctx, it, now, now, store.Lease{Owner: "n1", Until: now.Add(time.Second), Token: 1}, 10)
	if len(r1) != 1 {
		t.Fatal("not claimed")
	}
	// While the lease holds nobody else gets it.
	if r, _ := b.s.Claim(b.ctx, it, now, now.Add(500*time.Millisecond), store.Lease{Owner: "n2", Until: now.Add(time.Hour), Token: 2}, 10); len(r) != 0 {
		t.Fatal("claimed under a live lease")
	}
	if _, err := b.s.Start(b.ctx, r1, now.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	// The running lease ends at now+2s: afterwards another node claims it.
	later := now.Add(3 * time.Second)
	r2, err := b.s.Claim(b.ctx, it, later, later, store.Lease{Owner: "n2", Until: later.Add(time.Hour), Token: 2}, 10)
	if err != nil || len(r2) != 1 || r2[0].Token != 2 {
		t.Fatalf("expired lease not reclaimed: %v %+v", err, r2)
	}
	if got := b.get(a.ID); got.Owner != "n2" || got.Status != task.StatusClaimed {
		t.Fatalf("after reclaim: %+v", got)
	}
	// The first holder's token is dead: it can neither finish nor start.
	if err := b.s.Finish(b.ctx, []store.Outcome{{Ref: r1[0], Done: true}}); err != nil {
		t.Fatal(err)
	}
	if st, _ := b.s.Start(b.ctx, r1, later.Add(time.Hour)); len(st) != 0 || b.get(a.ID).Status != task.StatusClaimed {
		t.Fatal("a superseded claim changed the task")
	}
	if st, _ := b.s.Start(b.ctx, r2, later.Add(time.Hour)); len(st) != 1 || st[0].Attempts != 2 {
		t.Fatalf("new holder start: %+v", st)
	}
}

func testConcurrentClaims(t *testing.T, open Opener) {
	b := setup(t, open, 1, 1, 1)
	now := time.Now().Truncate(time.Microsecond) // the stores' precision: task 0 is due exactly now
	var in []store.NewTask
	for i := range 600 {
		in = append(in, b.newTask("cc", fmt.Sprint(i), now.Add(-time.Duration(i)*time.Millisecond)))
	}
	for i := range 50 { // not yet due: must not be claimed
		in = append(in, b.newTask("cc", fmt.Sprint("later-", i), now.Add(time.Hour)))
	}
	b.insert(in...)
	it := store.Item{}
	const workers = 6
	got := make([][]store.Ref, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				refs, err := b.s.Claim(b.ctx, it, now, now, store.Lease{Owner: fmt.Sprint("w", w), Until: now.Add(time.Hour), Token: int64(w + 1)}, 25)
				if err != nil {
					t.Error(err)
					return
				}
				if len(refs) > 25 {
					t.Errorf("claim returned %d rows, limit 25", len(refs))
				}
				got[w] = append(got[w], refs...)
				if len(refs) == 0 {
					return
				}
			}
		}()
	}
	wg.Wait()
	seen := map[string]int{}
	for w, refs := range got {
		for _, r := range refs {
			if prev, dup := seen[r.ID]; dup {
				t.Fatalf("task %s claimed by workers %d and %d", r.ID, prev, w)
			}
			seen[r.ID] = w
			if r.DueAt.After(now) {
				t.Fatalf("task due %s claimed with horizon %s", r.DueAt, now)
			}
		}
	}
	if len(seen) != 600 {
		t.Fatalf("%d of 600 due tasks claimed", len(seen))
	}
}

// claimedDue inserts n tasks of topic due a second before now and claims
// them all for n1 until an hour after now.
func (b *bundle) claimedDue(topic string, n int, now time.Time) []store.Ref {
	b.t.Helper()
	var in []store.NewTask
	for i := range n {
		in = append(in, b.newTask(topic, fmt.Sprint(i), now.Add(-time.Second)))
	}
	b.insert(in...)
	refs := b.claimAll("n1", now, now, now.Add(time.Hour))
	if len(refs) != n {
		b.t.Fatalf("claimed %d", len(refs))
	}
	return refs
}

// startInTens starts refs ten at a time, lease until `until`, passing each
// batch started to got; an error fails the test and stops.
func (b *bundle) startInTens(refs []store.Ref, until time.Time, got func([]*task.Task)) {
	for i := 0; i < len(refs); i += 10 {
		st, err := b.s.Start(b.ctx, refs[i:i+10], until)
		if err != nil {
			b.t.Error(err)
			return
		}
		got(st)
	}
}

// fromTheEnd runs op on refs from the last to the first, racing whoever
// goes from the first, and records in won the IDs it succeeded on (under
// mu); ErrConflict is a lost race, any other error fails t.
func fromTheEnd(t *testing.T, refs []store.Ref, mu *sync.Mutex, won map[string]bool, op func(id string) error) {
	for i := len(refs) - 1; i >= 0; i-- {
		err := op(refs[i].ID)
		if err == nil {
			mu.Lock()
			won[refs[i].ID] = true
			mu.Unlock()
		} else if !errors.Is(err, store.ErrConflict) {
			t.Error(err)
			return
		}
	}
}

func testCancelRace(t *testing.T, open Opener) {
	b := setup(t, open, 1, 2, 1)
	now := time.Now()
	refs := b.claimedDue("race", 200, now)
	var started []*task.Task
	cancelled := map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		b.startInTens(refs, now.Add(time.Hour), func(st []*task.Task) {
			mu.Lock()
			started = append(started, st...)
			mu.Unlock()
		})
	}()
	go func() {
		defer wg.Done()
		fromTheEnd(t, refs, &mu, cancelled, func(id string) error {
			_, err := b.s.Cancel(b.ctx, id)
			return err
		})
	}()
	wg.Wait()
	for _, s := range started {
		if cancelled[s.ID] {
			t.Fatalf("task %s both started and cancelled", s.ID)
		}
	}
	if len(started)+len(cancelled) != 200 {
		t.Fatalf("started %d + cancelled %d != 200", len(started), len(cancelled))
	}
	for _, r := range refs {
		got := b.get(r.ID)
		if cancelled[r.ID] != (got.Status == task.StatusCancelled) {
			t.Fatalf("task %s: status %s, cancel said %v", r.ID, got.Status, cancelled[r.ID])
		}
	}
}

func testKeysetScan(t *testing.T, open Opener) {
	b := setup(t, open, 1, 1, 1)
	base := time.Now().Add(time.Minute).Truncate(time.Millisecond)
	var in []store.NewTask
	for i := range 300 {
		// Many equal due times: ties are ordered by id.
		in = append(in, b.newTask("scan", fmt.Sprint(i), base.Add(time.Duration(i/10)*time.Second)))
	}
	b.insert(in...)
	horizon := base.Add(time.Hour)
	seen := map[string]bool{}
	var cur store.Cursor
	var last store.Cursor
	added := 0
	for page := 0; ; page++ {
		rows, err := b.s.Scan(b.ctx, store.Item{}, horizon, cur, 17)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) == 0 {
			break
		}
		for _, r := range rows {
			if seen[r.ID] {
				t.Fatalf("row %s seen twice", r.ID)
			}
			seen[r.ID] = true
			if r.DueAt.Before(last.DueAt) || (r.DueAt.Equal(last.DueAt) && r.ID <= last.ID) {
				t.Fatalf("rows out of (due_at, id) order")
			}
			last = store.Cursor{DueAt: r.DueAt, ID: r.ID}
		}
		cur = last
		// Insert behind the cursor (never seen) and ahead of it (must be seen).
		if page%3 == 0 {
			ahead := b.newTask("scan", fmt.Sprint("ahead-", page), base.Add(40*time.Second))
			behind := b.newTask("scan", fmt.Sprint("behind-", page), base.Add(-time.Second))
			b.insert(ahead, behind)
			added++
		}
	}
	if len(seen) != 300+added {
		t.Fatalf("scan saw %d rows, want %d", len(seen), 300+added)
	}
	for id := range seen {
		if tk := b.get(id); tk.Key != "" && len(tk.Key) > 7 && tk.Key[:7] == "behind-" {
			t.Fatalf("row inserted behind the cursor was returned")
		}
	}
}

func testSegments(t *testing.T, open Opener) {
	b := setup(t, open, 1, 1, 4)
	now := time.Now()
	var in []store.NewTask
	for i := range 400 {
		in = append(in, b.newTask("seg", fmt.Sprint(i), now.Add(time.Duration(i)*time.Millisecond)))
	}
	b.insert(in...)
	seen := map[string]int{}
	for seg := range 4 {
		rows, err := b.s.Scan(b.ctx, store.Item{Segment: seg}, now.Add(time.Hour), store.Cursor{}, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) < 50 {
			t.Fatalf("segment %d has %d of 400 rows: segments do not split evenly", seg, len(rows))
		}
		for _, r := range rows {
			if prev, dup := seen[r.ID]; dup {
				t.Fatalf("row in segments %d and %d", prev, seg)
			}
			seen[r.ID] = seg
		}
	}
	if len(seen) != 400 {
		t.Fatalf("segments cover %d of 400 rows", len(seen))
	}
}

func testNextDue(t *testing.T, open Opener) {
	b := setup(t, open, 1, 1, 1)
	it := store.Item{}
	if d, l, err := b.s.NextDue(b.ctx, it); err != nil || !d.IsZero() || !l.IsZero() {
		t.Fatalf("empty item: %v %v %v", d, l, err)
	}
	now := time.Now().Truncate(time.Microsecond)
	b.insert(b.newTask("nd", "a", now.Add(time.Hour)), b.newTask("nd", "b", now.Add(2*time.Hour)), b.newTask("nd", "c", now.Add(-time.Second)))
	refs, _ := b.s.Claim(b.ctx, it, now, now, store.Lease{Owner: "n", Until: now.Add(5 * time.Minute), Token: 1}, 10)
	d, l, err := b.s.NextDue(b.ctx, it)
	if err != nil || !d.Equal(now.Add(time.Hour)) || !l.Equal(now.Add(5*time.Minute)) {
		t.Fatalf("next due %v (want %v), lease %v (want %v), %v", d, now.Add(time.Hour), l, now.Add(5*time.Minute), err)
	}
	// The earliest lease end of claimed and running tasks, whichever ends
	// first: a running lease before the claims, then one after.
	if _, err := b.s.Start(b.ctx, refs, now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	b.insert(b.newTask("nd", "d", now.Add(-2*time.Second)))
	if _, err := b.s.Claim(b.ctx, it, now, now, store.Lease{Owner: "n", Until: now.Add(3 * time.Minute), Token: 2}, 10); err != nil {
		t.Fatal(err)
	}
	if _, l, err := b.s.NextDue(b.ctx, it); err != nil || !l.Equal(now.Add(time.Minute)) {
		t.Fatalf("running lease first: lease %v (want %v), %v", l, now.Add(time.Minute), err)
	}
	if _, err := b.s.ExtendHeld(b.ctx, task.StatusRunning, []int64{1}, nil, now.Add(time.Hour), now.Add(10*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, l, err := b.s.NextDue(b.ctx, it); err != nil || !l.Equal(now.Add(3*time.Minute)) {
		t.Fatalf("claim first: lease %v (want %v), %v", l, now.Add(3*time.Minute), err)
	}
}

func testListCount(t *testing.T, open Opener) {
	b := setup(t, open, 2, 3, 1)
	now := time.Now()
	var ids []string
	for i := range 45 {
		topic := "list.a"
		if i%3 == 0 {
			topic = "list.b"
		}
		nt := b.newTask(topic, fmt.Sprint(i), now.Add(time.Hour))
		b.insert(nt)
		ids = append(ids, nt.ID)
	}
	// Walk all pages: every task once, in ID order.
	var walked []string
	after := ""
	for {
		page, err := b.s.List(b.ctx, store.ListFilter{Limit: 7, After: after})
		if err != nil {
			t.Fatal(err)
		}
		for _, tk := range page {
			walked = append(walked, tk.ID)
			if want := `{"k":"` + tk.Key + `"}`; string(tk.Payload) != want || tk.Topic == "" {
				t.Fatalf("listed task %s: payload %s topic %q, want the whole row", tk.ID, tk.Payload, tk.Topic)
			}
		}
		if len(page) < 7 {
			break
		}
		after = page[len(page)-1].ID
	}
	want := slices.Clone(ids)
	slices.Sort(want)
	if !slices.Equal(walked, want) {
		t.Fatalf("list walked %d tasks, want all %d in ID order", len(walked), len(want))
	}
	bOnly, err := b.s.List(b.ctx, store.ListFilter{Topic: "list.b", Limit: 1000})
	if err != nil || len(bOnly) != 15 {
		t.Fatalf("topic filter: %d rows, %v", len(bOnly), err)
	}
	// Filtered pages merge across tables too: 15 in pages of 4.
	var bWalk []string
	for after := ""; ; {
		page, err := b.s.List(b.ctx, store.ListFilter{Topic: "list.b", Limit: 4, After: after})
		if err != nil {
			t.Fatal(err)
		}
		for _, tk := range page {
			bWalk = append(bWalk, tk.ID)
		}
		if len(page) < 4 {
			break
		}
		after = page[len(page)-1].ID
	}
	if len(bWalk) != 15 || !slices.IsSorted(bWalk) || bWalk[0] != bOnly[0].ID || bWalk[14] != bOnly[14].ID {
		t.Fatalf("topic filter in pages of 4: %d tasks %v", len(bWalk), bWalk)
	}
	c, err := b.s.Cancel(b.ctx, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	st := task.StatusCancelled
	cancelled, err := b.s.List(b.ctx, store.ListFilter{Status: &st})
	if err != nil || len(cancelled) != 1 || cancelled[0].ID != c.ID {
		t.Fatalf("status filter: %+v %v", cancelled, err)
	}
	counts, err := b.s.Count(b.ctx)
	if err != nil || counts[task.StatusPending] != 44 || counts[task.StatusCancelled] != 1 {
		t.Fatalf("count %v %v", counts, err)
	}
	// By topic and status across tables, with the pending ones' earliest
	// due time (all are due in an hour; none earlier).
	byTopic, err := b.s.CountTopics(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, tc := range byTopic {
		got[tc.Topic+"/"+tc.Status.String()] += tc.N
		switch {
		case tc.Status == task.StatusPending && (tc.MinDue.Before(now.Add(time.Hour-time.Second)) || tc.MinDue.After(now.Add(time.Hour+time.Second))):
			t.Errorf("count topics: %s pending min due %v, want %v", tc.Topic, tc.MinDue, now.Add(time.Hour))
		case tc.Status != task.StatusPending && !tc.MinDue.IsZero():
			t.Errorf("count topics: %s %s has a min due", tc.Topic, tc.Status)
		}
	}
	wantTopics := map[string]int64{"list.a/pending": 30, "list.b/pending": 14, "list.b/cancelled": 1}
	if len(byTopic) != len(wantTopics) || !maps.Equal(got, wantTopics) {
		t.Fatalf("count topics: %v (%d groups), want %v", got, len(byTopic), wantTopics)
	}
}

func testBadIDs(t *testing.T, open Opener) {
	b := setup(t, open, 2, 2, 1)
	unknown, _ := router.NewID(time.Now(), 5, true)
	if _, err := b.s.Get(b.ctx, unknown); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
	for _, id := range []string{"", "nope", "UPPERCASE0000000000000000A"} {
		_, err := b.s.Get(b.ctx, id)
		if !errors.Is(err, store.ErrNotFound) || !errors.Is(err, router.ErrBadID) {
			t.Fatalf("malformed id %q: %v", id, err)
		}
		if _, err := b.s.Cancel(b.ctx, id); !errors.Is(err, router.ErrBadID) {
			t.Fatalf("cancel malformed id %q: %v", id, err)
		}
	}
}
