package storetest

import (
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// testExtendHeld: a heartbeat by token extends exactly the leases in the
// asked status, held under the asked tokens, that end before soon, across
// every table (one statement each), and leaves out the given-up IDs, other
// tokens, the other status and leases not near their end.
func testExtendHeld(t *testing.T, open Opener) {
	b := setup(t, open, 2, 2, 1)
	now := time.Now()
	var news []store.NewTask
	for i := range 40 {
		news = append(news, b.newTask("held", "k"+string(rune('a'+i%26))+string(rune('a'+i/26)), now.Add(-time.Second)))
	}
	b.insert(news...)
	soonEnd := now.Add(2 * time.Second) // near its end: extended
	farEnd := now.Add(time.Hour)        // not near: left alone
	const held, other, far = 11, 22, 33 // tokens
	var items []store.Item
	seen := map[store.Item]bool{}
	for _, nt := range news {
		if it := b.item(nt); !seen[it] {
			seen[it] = true
			items = append(items, it)
		}
	}
	if len(items) < 2 {
		t.Fatalf("setup: the tasks landed in %d items, want several tables", len(items))
	}
	// Claim every task under one of three tokens, per item in turn.
	byToken := map[int64][]store.Ref{}
	for i, it := range items {
		for j, tok := range []int64{held, other, far} {
			until := soonEnd
			if tok == far {
				until = farEnd
			}
			refs, err := b.s.Claim(b.ctx, it, now, now, store.Lease{Owner: "n1", Until: until, Token: tok + int64(100*i)}, 2+j)
			if err != nil {
				t.Fatal(err)
			}
			byToken[tok] = append(byToken[tok], refs...)
		}
	}
	tokens := func(base int64) []int64 {
		var out []int64
		for i := range items {
			out = append(out, base+int64(100*i))
		}
		return out
	}
	// Start half of the held ones: running, not claimed.
	heldRefs := byToken[held]
	if len(heldRefs) < 4 {
		t.Fatalf("setup: %d held tasks", len(heldRefs))
	}
	startedRefs := heldRefs[:len(heldRefs)/2]
	if st, err := b.s.Start(b.ctx, startedRefs, soonEnd); err != nil || len(st) != len(startedRefs) {
		t.Fatalf("start: %d %v", len(st), err)
	}
	claimedRefs := heldRefs[len(heldRefs)/2:]
	gaveUp := claimedRefs[0].ID
	until := now.Add(time.Minute)
	all := append(append(tokens(held), tokens(far)...), 999)
	n, err := b.s.ExtendHeld(b.ctx, task.StatusClaimed, all, []string{gaveUp}, now.Add(10*time.Second), until)
	if err != nil {
		t.Fatal(err)
	}
	if n != len(claimedRefs)-1 {
		t.Fatalf("ExtendHeld moved %d leases, want %d (the held claims but the given-up one)", n, len(claimedRefs)-1)
	}
	lease := func(id string) time.Time { return b.get(id).LeaseUntil }
	for _, r := range claimedRefs[1:] {
		if got := lease(r.ID); !got.Equal(until.Truncate(time.Microsecond)) && got.Sub(until).Abs() > time.Millisecond {
			t.Fatalf("held claim %s: lease %s, want %s", r.ID, got, until)
		}
	}
	for _, r := range append([]store.Ref{claimedRefs[0]}, startedRefs...) {
		if got := lease(r.ID); got.After(soonEnd.Add(time.Millisecond)) {
			t.Fatalf("%s (given up or running) extended to %s", r.ID, got)
		}
	}
	for _, r := range byToken[other] {
		if got := lease(r.ID); got.After(soonEnd.Add(time.Millisecond)) {
			t.Fatalf("%s of a token not asked for extended to %s", r.ID, got)
		}
	}
	for _, r := range byToken[far] {
		if got := lease(r.ID); got.Sub(farEnd).Abs() > time.Millisecond {
			t.Fatalf("%s, not near its end, rewritten to %s", r.ID, got)
		}
	}
	// Running: the started ones.
	n, err = b.s.ExtendHeld(b.ctx, task.StatusRunning, tokens(held), nil, now.Add(10*time.Second), until)
	if err != nil || n != len(startedRefs) {
		t.Fatalf("ExtendHeld running: %d %v, want %d", n, err, len(startedRefs))
	}
	if _, err := b.s.ExtendHeld(b.ctx, task.StatusDone, tokens(held), nil, now, until); err == nil {
		t.Fatal("ExtendHeld of done tasks: no error")
	}
}
