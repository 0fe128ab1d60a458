package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// topicsOf is the store's topics side; every engine has it.
func topicsOf(t *testing.T, s store.Store) store.Topics {
	t.Helper()
	ts, ok := s.(store.Topics)
	if !ok {
		t.Fatalf("%T does not implement store.Topics", s)
	}
	return ts
}

// testPausedTopics: the paused flag round-trips and is shared by every
// store opened on the same databases; the claim filter keeps Claim, Scan
// and NextDue off a paused topic's pending tasks, not off expired leases.
func testPausedTopics(t *testing.T, open Opener) {
	b := setup(t, open, 2, 2, 2)
	tp := topicsOf(t, b.s)
	if err := tp.SetTopicPaused(b.ctx, "bad topic!", true); err == nil || !errors.Is(err, task.ErrInvalid) {
		t.Fatalf("pausing an invalid topic: %v, want ErrInvalid", err)
	}
	for _, tc := range []struct {
		topic  string
		paused bool
	}{{"p.one", true}, {"p.two", true}, {"p.one", false}, {"p.three", true}, {"p.three", true}} {
		if err := tp.SetTopicPaused(b.ctx, tc.topic, tc.paused); err != nil {
			t.Fatal(err)
		}
	}
	got, err := tp.PausedTopics(b.ctx)
	if err != nil || len(got) != 2 || got[0] != "p.three" || got[1] != "p.two" {
		t.Fatalf("paused topics: %v %v, want [p.three p.two]", err, got)
	}

	now := time.Now()
	paused, live := b.newTask("p.two", "x", now.Add(-time.Minute)), b.newTask("p.live", "x", now.Add(-time.Second))
	// Same item for both: the filter must pass over the earlier paused row.
	for b.item(paused) != b.item(live) {
		live = b.newTask("p.live", live.Key+"x", now.Add(-time.Second))
	}
	b.insert(paused, live)
	it := b.item(paused)
	tp.SetClaimFilter([]string{"p.two", "p.three"})
	due, _, err := b.s.NextDue(b.ctx, it)
	if err != nil || !due.Equal(b.get(live.ID).DueAt) {
		t.Fatalf("next due with p.two paused: %v %v, want the live task's %v", err, due, live.DueAt)
	}
	sc, err := b.s.Scan(b.ctx, it, now, store.Cursor{}, 10)
	if err != nil || len(sc) != 1 || sc[0].ID != live.ID {
		t.Fatalf("scan with p.two paused: %v %+v", err, sc)
	}
	refs, err := b.s.Claim(b.ctx, it, now, now, store.Lease{Owner: "n1", Until: now.Add(time.Minute), Token: 5}, 10)
	if err != nil || len(refs) != 1 || refs[0].ID != live.ID {
		t.Fatalf("claim with p.two paused: %v %+v", err, refs)
	}
	// Resumed: claimable again.
	tp.SetClaimFilter(nil)
	refs, err = b.s.Claim(b.ctx, it, now, now, store.Lease{Owner: "n1", Until: now.Add(time.Minute), Token: 6}, 10)
	if err != nil || len(refs) != 1 || refs[0].ID != paused.ID {
		t.Fatalf("claim after resume: %v %+v", err, refs)
	}
	// An expired lease of a paused topic is still claimed (the fire stage
	// hands it back): otherwise a dead node's tasks would stay claimed.
	tp.SetClaimFilter([]string{"p.two"})
	later := now.Add(2 * time.Minute)
	refs, err = b.s.Claim(b.ctx, it, later, later, store.Lease{Owner: "n2", Until: later.Add(time.Minute), Token: 7}, 10)
	if err != nil || len(refs) != 2 {
		t.Fatalf("claim of expired leases with p.two paused: %v %+v, want both", err, refs)
	}
}

// testTopicStatsRequeue: counts per topic and status across shards, the
// oldest pending due time, paused topics without tasks, a topic's dead
// tasks requeued at once.
func testTopicStatsRequeue(t *testing.T, open Opener) {
	b := setup(t, open, 2, 2, 2)
	tp := topicsOf(t, b.s)
	now := time.Now().Truncate(time.Microsecond)
	var in []store.NewTask
	for i := range 12 {
		in = append(in, b.newTask("ts.a", "k"+string(rune('a'+i)), now.Add(time.Duration(i+1)*time.Hour)))
	}
	in = append(in, b.newTask("ts.b", "only", now.Add(-time.Hour)))
	b.insert(in...)
	// Make 5 of ts.a dead (claimed, started, finished dead) and 1 done.
	for i := range 6 {
		tk := in[i]
		refs, err := b.s.Claim(b.ctx, b.item(tk), tk.DueAt, now, store.Lease{Owner: "n", Until: now.Add(48 * time.Hour), Token: int64(100 + i)}, 20)
		if err != nil {
			t.Fatal(err)
		}
		var mine []store.Ref
		for _, r := range refs {
			if r.ID == tk.ID {
				mine = append(mine, r)
			}
		}
		// Others claimed on the way go back.
		var others []store.Ref
		for _, r := range refs {
			if r.ID != tk.ID {
				others = append(others, r)
			}
		}
		if err := b.s.Release(b.ctx, others); err != nil {
			t.Fatal(err)
		}
		if len(mine) != 1 {
			t.Fatalf("task %d not claimed: %+v", i, refs)
		}
		if _, err := b.s.Start(b.ctx, mine, now.Add(48*time.Hour)); err != nil {
			t.Fatal(err)
		}
		o := store.Outcome{Ref: mine[0], Dead: i < 5, Done: i == 5, Error: "boom"}
		if err := b.s.Finish(b.ctx, []store.Outcome{o}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tp.SetTopicPaused(b.ctx, "ts.empty", true); err != nil {
		t.Fatal(err)
	}
	stats, err := tp.TopicStats(b.ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(stats) != 3 || stats[0].Topic != "ts.a" || stats[1].Topic != "ts.b" || stats[2].Topic != "ts.empty" {
		t.Fatalf("topics: %+v", stats)
	}
	a := stats[0]
	if a.Counts[task.StatusDead] != 5 || a.Counts[task.StatusDone] != 1 || a.Counts[task.StatusPending] != 6 || a.Paused {
		t.Fatalf("ts.a: %+v", a)
	}
	if !a.OldestDueAt.Equal(in[6].DueAt) {
		t.Fatalf("ts.a oldest pending due %v, want %v", a.OldestDueAt, in[6].DueAt)
	}
	if e := stats[2]; !e.Paused || len(e.Counts) != 0 || !e.OldestDueAt.IsZero() {
		t.Fatalf("ts.empty: %+v", e)
	}
	one, err := tp.TopicStats(b.ctx, "ts.b")
	if err != nil || len(one) != 1 || one[0].Counts[task.StatusPending] != 1 || !one[0].OldestDueAt.Equal(in[12].DueAt) {
		t.Fatalf("ts.b alone: %v %+v", err, one)
	}
	none, err := tp.TopicStats(b.ctx, "ts.none")
	if err != nil || len(none) != 1 || none[0].Topic != "ts.none" || len(none[0].Counts) != 0 || none[0].Paused {
		t.Fatalf("a topic without tasks: %v %+v", err, none)
	}

	n, err := tp.RequeueTopic(b.ctx, "ts.a", now)
	if err != nil || n != 5 {
		t.Fatalf("requeue topic: %v %d, want 5", err, n)
	}
	for i := range 5 {
		if got := b.get(in[i].ID); got.Status != task.StatusPending || got.Attempts != 0 || !got.DueAt.Equal(now) || got.Token != 0 {
			t.Fatalf("requeued task %d: %+v", i, got)
		}
	}
	if got := b.get(in[5].ID); got.Status != task.StatusDone {
		t.Fatalf("a done task was requeued: %+v", got)
	}
	if n, err := tp.RequeueTopic(b.ctx, "ts.a", now); err != nil || n != 0 {
		t.Fatalf("second requeue: %v %d, want 0", err, n)
	}
	if _, err := tp.RequeueTopic(b.ctx, "", now); !errors.Is(err, task.ErrInvalid) {
		t.Fatalf("requeue of an empty topic name: %v, want ErrInvalid", err)
	}
}

// testFinishClaimCancel: a retry written with a Claim goes back claimed
// under the new lease (the caller's hot tier holds it), not pending; a
// Cancelled outcome makes the task cancelled, final.
func testFinishClaimCancel(t *testing.T, open Opener) {
	b := setup(t, open, 1, 2, 1)
	now := time.Now()
	a, c := b.newTask("fc", "a", now.Add(-time.Second)), b.newTask("fc", "c", now.Add(-time.Second))
	b.insert(a, c)
	refs := b.claimAll("n1", now, now, now.Add(time.Minute))
	if len(refs) != 2 {
		t.Fatalf("claimed %d", len(refs))
	}
	if st, err := b.s.Start(b.ctx, refs, now.Add(time.Minute)); err != nil || len(st) != 2 {
		t.Fatalf("start: %v %d", err, len(st))
	}
	ref := map[string]store.Ref{}
	for _, r := range refs {
		ref[r.ID] = r
	}
	retryAt := now.Add(200 * time.Millisecond).Truncate(time.Microsecond)
	lease := &store.Lease{Owner: "n1", Until: retryAt.Add(time.Minute).Truncate(time.Microsecond), Token: 4242}
	err := b.s.Finish(b.ctx, []store.Outcome{
		{Ref: ref[a.ID], RetryAt: retryAt, Error: "HTTP 503", Claim: lease},
		{Ref: ref[c.ID], Cancelled: true, Error: "handler cancelled: order gone"},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := b.get(a.ID)
	if got.Status != task.StatusClaimed || got.Token != 4242 || got.Owner != "n1" || !got.LeaseUntil.Equal(lease.Until) ||
		!got.DueAt.Equal(retryAt) || got.Attempts != 1 || got.LastError != "HTTP 503" {
		t.Fatalf("retry with a claim: %+v", got)
	}
	// Startable under the new token at once: the hot tier's entry works.
	st, err := b.s.Start(b.ctx, []store.Ref{{ID: a.ID, Token: 4242}}, now.Add(time.Minute))
	if err != nil || len(st) != 1 || st[0].Attempts != 2 {
		t.Fatalf("start of the reclaimed retry: %v %+v", err, st)
	}
	got = b.get(c.ID)
	if got.Status != task.StatusCancelled || got.LastError != "handler cancelled: order gone" || got.Owner != "" {
		t.Fatalf("cancelled by its handler: %+v", got)
	}
	if _, err := b.s.Requeue(b.ctx, c.ID, now); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("requeue of a cancelled task: %v, want ErrConflict", err)
	}
}

// testDueHistogram: pending tasks counted per topic and bucket of due
// time across every shard and segment; tasks outside the range, and not
// pending, are left out.
func testDueHistogram(t *testing.T, open Opener) {
	b := setup(t, open, 2, 2, 2)
	tp := topicsOf(t, b.s)
	from := time.Now().Truncate(time.Minute).Add(time.Hour)
	var in []store.NewTask
	for i := range 20 {
		// h.a: 2 per bucket in buckets 0..9; h.b: one in bucket 3.
		in = append(in, b.newTask("h.a", fmt.Sprintf("a%d", i), from.Add(time.Duration(i/2)*time.Minute+time.Duration(i%2)*59*time.Second)))
	}
	in = append(in, b.newTask("h.b", "b", from.Add(3*time.Minute+30*time.Second)),
		b.newTask("h.b", "early", from.Add(-time.Microsecond)),
		b.newTask("h.b", "late", from.Add(10*time.Minute)))
	b.insert(in...)
	got, err := tp.DueHistogram(b.ctx, from, time.Minute, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Topic != "h.a" || got[1].Topic != "h.b" {
		t.Fatalf("topics: %+v", got)
	}
	for i, c := range got[0].Counts {
		if c != 2 {
			t.Errorf("h.a bucket %d: %d, want 2 (%v)", i, c, got[0].Counts)
		}
	}
	want := make([]int64, 10)
	want[3] = 1
	if fmt.Sprint(got[1].Counts) != fmt.Sprint(want) {
		t.Errorf("h.b: %v, want %v", got[1].Counts, want)
	}
	// A cancelled task is not due any more.
	if _, err := b.s.Cancel(b.ctx, in[20].ID); err != nil {
		t.Fatal(err)
	}
	if got, err := tp.DueHistogram(b.ctx, from, time.Minute, 10); err != nil || len(got) != 1 {
		t.Fatalf("after cancel: %+v %v", got, err)
	}
	for _, n := range []int{0, store.MaxDueBuckets + 1} {
		if _, err := tp.DueHistogram(b.ctx, from, time.Minute, n); err == nil {
			t.Errorf("%d buckets accepted", n)
		}
	}
}

// testListDue: a list's due range keeps tasks due in [DueAfter,
// DueBefore), across tables and pages, with the other filters.
func testListDue(t *testing.T, open Opener) {
	b := setup(t, open, 2, 2, 1)
	base := time.Now().Truncate(time.Second).Add(time.Hour)
	var in []store.NewTask
	for i := range 30 {
		in = append(in, b.newTask("ld", fmt.Sprint(i), base.Add(time.Duration(i)*time.Minute)))
	}
	b.insert(in...)
	want := map[string]bool{}
	for _, nt := range in[10:20] {
		want[nt.ID] = true
	}
	f := store.ListFilter{Topic: "ld", Limit: 4, DueAfter: base.Add(10 * time.Minute), DueBefore: base.Add(20 * time.Minute)}
	got := map[string]bool{}
	for range 10 {
		page, err := b.s.List(b.ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, tk := range page {
			if !want[tk.ID] || got[tk.ID] {
				t.Fatalf("listed %s due %v (twice: %v)", tk.ID, tk.DueAt, got[tk.ID])
			}
			got[tk.ID] = true
		}
		if len(page) < f.Limit {
			break
		}
		f.After = page[len(page)-1].ID
	}
	if len(got) != len(want) {
		t.Fatalf("listed %d of the %d tasks in the range", len(got), len(want))
	}
	st := task.StatusDone
	if page, err := b.s.List(b.ctx, store.ListFilter{Status: &st, DueAfter: base}); err != nil || len(page) != 0 {
		t.Fatalf("done in range: %v %v", page, err)
	}
}
