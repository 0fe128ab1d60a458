package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// testEndLeases: ending the leases of a gone holder makes its tasks
// claimable at once, by holder and by state, and a claim made afterwards
// fences the old holder off with a new token.
func testEndLeases(t *testing.T, open Opener) {
	b := setup(t, open, 1, 1, 1)
	now := time.Now()
	mk := func(key string) store.NewTask { return b.newTask("lease", key, now.Add(-time.Second)) }
	dead1, dead2, live, deadRunning := mk("dead1"), mk("dead2"), mk("live"), mk("running")
	b.insert(dead1, dead2, live, deadRunning)
	it := b.item(dead1)
	claim := func(owner string, token int64, n int) []store.Ref {
		t.Helper()
		refs, err := b.s.Claim(b.ctx, it, now, now, store.Lease{Owner: owner, Until: now.Add(time.Hour), Token: token}, n)
		if err != nil {
			t.Fatal(err)
		}
		return refs
	}
	byID := map[string]string{}
	for _, r := range claim("gone", 1, 3) {
		byID[r.ID] = "gone"
	}
	rest := claim("alive", 2, 10)
	if len(byID) != 3 || len(rest) != 1 {
		t.Fatalf("setup: %d and %d claimed", len(byID), len(rest))
	}
	// One of the gone node's tasks is running (mid-delivery when it died).
	var runningRef store.Ref
	for id := range byID {
		runningRef = store.Ref{ID: id, Token: 1}
		break
	}
	if st, err := b.s.Start(b.ctx, []store.Ref{runningRef}, now.Add(time.Hour)); err != nil || len(st) != 1 {
		t.Fatalf("start: %v %d", err, len(st))
	}

	// Nothing is claimable while the leases hold.
	if r := claim("new", 3, 10); len(r) != 0 {
		t.Fatalf("claimed %d under live leases", len(r))
	}
	// ClaimedOnly with Only: ends the gone node's two claimed leases, not
	// its running one, nor the live node's.
	n, err := b.s.EndLeases(b.ctx, it, now, store.Holders{Only: []string{"gone"}, ClaimedOnly: true})
	if err != nil || n != 2 {
		t.Fatalf("EndLeases claimed-only: %d %v, want 2", n, err)
	}
	got := claim("new", 3, 10)
	if len(got) != 2 {
		t.Fatalf("after ending claims: %d claimable, want 2", len(got))
	}
	for _, r := range got {
		if byID[r.ID] != "gone" || r.ID == runningRef.ID {
			t.Fatalf("claimed %s, which was not a gone claim", r.ID)
		}
	}
	// Except the live nodes: the running task of the gone node is ended;
	// the new claimer's and the live node's leases stay.
	n, err = b.s.EndLeases(b.ctx, it, now, store.Holders{Except: []string{"alive", "new"}})
	if err != nil || n != 1 {
		t.Fatalf("EndLeases except live: %d %v, want 1", n, err)
	}
	got = claim("new", 4, 10)
	if len(got) != 1 || got[0].ID != runningRef.ID {
		t.Fatalf("after ending the running lease: %+v", got)
	}
	// The old holder is fenced off: its token no longer starts or finishes.
	if err := b.s.Finish(b.ctx, []store.Outcome{{Ref: runningRef, Done: true}}); err != nil {
		t.Fatal(err)
	}
	if tk := b.get(runningRef.ID); tk.Status != task.StatusClaimed || tk.Owner != "new" {
		t.Fatalf("the old holder changed the task: %+v", tk)
	}
	// Rows self wrote before it restarted are its previous process's: their
	// leases end though self is alive; rows written since are kept.
	restarted := mk("restarted")
	b.insert(restarted)
	if r, err := b.s.Claim(b.ctx, it, now, now, store.Lease{Owner: "self", Until: now.Add(time.Hour), Token: 9}, 10); err != nil || len(r) != 1 {
		t.Fatalf("claim by self: %v %d", err, len(r))
	}
	time.Sleep(2 * time.Millisecond)
	boot := time.Now()
	if n, err := b.s.EndLeases(b.ctx, it, now, store.Holders{Except: []string{"self", "new", "alive"}, Restarted: map[string]time.Time{"self": boot, "alive": {}}}); err != nil || n != 1 {
		t.Fatalf("EndLeases of self's previous process: %d %v, want 1", n, err)
	}
	if got := claim("self", 10, 10); len(got) != 1 || got[0].ID != restarted.ID {
		t.Fatalf("after ending self's old lease: %+v", got)
	}
	if n, err := b.s.EndLeases(b.ctx, it, time.Now(), store.Holders{Except: []string{"self", "new", "alive"}, Restarted: map[string]time.Time{"self": boot, "alive": {}}}); err != nil || n != 0 {
		t.Fatalf("EndLeases ended a lease self took after it restarted: %d %v", n, err)
	}
	// By incarnation: the rows "inc" holds under another incarnation's
	// tokens are its previous processes', whatever the clock says; those
	// under its current incarnation's are kept, and those under an
	// unattributed token (a handoff to it) go by time.
	curInc := store.NewIncarnation()
	prevTok := store.NewIncarnation().Token()
	byTok := map[int64]string{}
	for _, tok := range []int64{prevTok, curInc.Token(), store.NewToken()} {
		nt := mk(fmt.Sprintf("inc-%d", tok))
		b.insert(nt)
		if r, err := b.s.Claim(b.ctx, it, now, now, store.Lease{Owner: "inc", Until: now.Add(time.Hour), Token: tok}, 10); err != nil || len(r) != 1 {
			t.Fatalf("claim by inc: %v %d", err, len(r))
		}
		byTok[tok] = nt.ID
	}
	longAgo := now.Add(-time.Hour)
	h := store.Holders{Except: []string{"self", "new", "alive", "inc"}, Incarnations: map[string]int64{"inc": curInc.ID()},
		Restarted: map[string]time.Time{"inc": longAgo}}
	if n, err := b.s.EndLeases(b.ctx, it, now, h); err != nil || n != 1 {
		t.Fatalf("EndLeases of inc's previous incarnation: %d %v, want 1", n, err)
	}
	if got := claim("self", 20, 10); len(got) != 1 || got[0].ID != byTok[prevTok] {
		t.Fatalf("after ending inc's previous incarnation: %+v, want %s", got, byTok[prevTok])
	}
	time.Sleep(2 * time.Millisecond)
	h.Restarted["inc"] = time.Now()
	if n, err := b.s.EndLeases(b.ctx, it, now, h); err != nil || n != 1 {
		t.Fatalf("EndLeases of inc's unattributed claim written before its start: %d %v, want 1", n, err)
	}
	for tok, id := range byTok {
		tk := b.get(id)
		if store.TokenIncarnation(tok) == curInc.ID() && (tk.Owner != "inc" || tk.Token != tok) {
			t.Fatalf("inc's current incarnation lost its claim: %+v", tk)
		}
		if store.TokenIncarnation(tok) == 0 && tk.Status != task.StatusClaimed {
			t.Fatalf("inc's handed claim: %+v", tk)
		}
	}
	// Only with an empty list touches nothing.
	if n, err := b.s.EndLeases(b.ctx, it, now, store.Holders{Only: []string{}}); err != nil || n != 0 {
		t.Fatalf("EndLeases with no holders: %d %v", n, err)
	}
	if _, err := b.s.EndLeases(b.ctx, store.Item{DB: 5}, now, store.Holders{}); err == nil {
		t.Fatal("EndLeases accepted an item outside the topology")
	}
}
