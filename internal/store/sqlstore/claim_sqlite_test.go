package sqlstore

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/store"
)

func claimedIDs(refs []store.Ref) []string {
	var out []string
	for _, r := range refs {
		out = append(out, r.ID)
	}
	return out
}

// Claims through statements kept by text claim what the statements parsed
// anew claim, in the same order: expired leases first, due tasks by due
// time, paused topics passed over (each set of them its own statement),
// the limit kept. Then, past liteTextMax statements, claims still work
// and keep no more.
func TestLiteClaimLikeGeneric(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tw := newLiteTwin(t)
	now := time.Now()
	var tasks []store.NewTask
	for i := range 120 {
		nt := newTask(t, "", now.Add(-time.Duration(i%13)*time.Second), 2)
		if i%4 == 0 {
			nt.Topic = "u"
		}
		if i%10 == 3 { // a lease that has ended
			nt.Claim = &store.Lease{Owner: "gone", Until: now.Add(-time.Duration(i) * time.Millisecond), Token: 5}
		}
		tasks = append(tasks, nt)
	}
	tw.insert(t, tasks)
	lease := store.Lease{Owner: "n1", Until: now.Add(time.Hour), Token: 77}
	for round, paused := range [][]string{nil, {"u"}, {"u", "v"}, nil, {"u"}, nil} {
		for _, s := range []*Store{tw.fast, tw.generic} {
			s.SetClaimFilter(paused)
		}
		for _, it := range tw.fast.Items() {
			var got [2][]store.Ref
			for j, s := range []*Store{tw.fast, tw.generic} {
				refs, err := s.Claim(ctx, it, now, now, lease, 3)
				if err != nil {
					t.Fatalf("round %d, item %+v: %v", round, it, err)
				}
				got[j] = refs
			}
			if a, b := claimedIDs(got[0]), claimedIDs(got[1]); !slices.Equal(a, b) || len(a) > 3 {
				t.Fatalf("round %d, item %+v: claimed %v fast, %v generic", round, it, a, b)
			}
			for _, r := range got[0] {
				if r.Token != lease.Token {
					t.Fatalf("claimed %+v: token %d, want %d", r, r.Token, lease.Token)
				}
			}
		}
	}
	tw.same(t, now, "claims")
	// Per table, two kinds of claim, the due one under three filters.
	if n, want := tw.fast.liteOps.text.len(), 4*len(tw.fast.names)*len(tw.fast.w); n != want {
		t.Fatalf("%d claim statements kept, want %d", n, want)
	}

	// Full: claims run unprepared and keep nothing more.
	s := tw.fast
	for i := s.liteOps.text.len(); i < liteTextMax; i++ {
		if _, err := s.liteOps.byText(ctx, s.w[0], 0, fmt.Sprintf("SELECT %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	s.SetClaimFilter([]string{"w"})
	nt := newTask(t, "", now, 2)
	if _, err := s.Insert(ctx, []store.NewTask{nt}); err != nil {
		t.Fatal(err)
	}
	var claimed []string
	for _, it := range s.Items() {
		refs, err := s.Claim(ctx, it, time.Now().Add(time.Minute), time.Now(), lease, 500)
		if err != nil {
			t.Fatal(err)
		}
		claimed = append(claimed, claimedIDs(refs)...)
	}
	if !slices.Contains(claimed, nt.ID) {
		t.Fatalf("claims of a full cache missed task %s: claimed %v", nt.ID, claimed)
	}
	if n := s.liteOps.text.len(); n != liteTextMax {
		t.Fatalf("%d statements kept, want the bound %d", n, liteTextMax)
	}
}

// A closed store's claims fail, and its claim statements are closed.
func TestLiteClaimClosed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tw := newLiteTwin(t)
	s := tw.fast
	it := s.Items()[0]
	lease := store.Lease{Owner: "n1", Until: time.Now().Add(time.Hour), Token: 1}
	if _, err := s.Claim(ctx, it, time.Now(), time.Now(), lease, 10); err != nil {
		t.Fatal(err)
	}
	if s.liteOps.text.len() == 0 {
		t.Fatal("no claim statement kept")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := s.liteOps.len(); n != 0 {
		t.Fatalf("%d statements left after Close", n)
	}
	if _, err := s.Claim(ctx, it, time.Now(), time.Now(), lease, 10); err == nil {
		t.Fatal("claim after Close answered no error")
	}
}
