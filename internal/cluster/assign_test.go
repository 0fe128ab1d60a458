package cluster

import (
	"fmt"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/store"
)

func nodesN(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("node-%04d", i)
	}
	return out
}

func itemsN(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func checkBalanced(t *testing.T, a map[int]string, items []int, nodes []string) {
	t.Helper()
	if len(a) != len(items) {
		t.Fatalf("%d of %d items assigned", len(a), len(items))
	}
	per := map[string]int{}
	live := map[string]bool{}
	for _, n := range nodes {
		live[n] = true
		per[n] = 0
	}
	for it, n := range a {
		if !live[n] {
			t.Fatalf("item %d assigned to dead node %q", it, n)
		}
		per[n]++
	}
	lo, hi := len(items), 0
	for _, c := range per {
		lo, hi = min(lo, c), max(hi, c)
	}
	if hi-lo > 1 {
		t.Fatalf("unbalanced: counts from %d to %d", lo, hi)
	}
}

func TestAssignBalancedAndSticky(t *testing.T) {
	for _, tc := range []struct{ items, nodes int }{{64, 1}, {64, 3}, {64, 5}, {7, 10}, {1000, 7}, {100, 100}} {
		t.Run(fmt.Sprintf("%dx%d", tc.items, tc.nodes), func(t *testing.T) {
			items, nodes := itemsN(tc.items), nodesN(tc.nodes)
			a := Assign(items, nodes, nil)
			checkBalanced(t, a, items, nodes)
			if again := Assign(items, nodes, a); Moved(a, again) != 0 {
				t.Fatalf("reassigning a balanced assignment moved %d items", Moved(a, again))
			}
			// Join: the new node takes only its share; nothing else moves.
			joined := append(nodesN(tc.nodes), "node-new")
			b := Assign(items, joined, a)
			checkBalanced(t, b, items, joined)
			share := tc.items / len(joined)
			if m := Moved(a, b); m > share+1 {
				t.Fatalf("join moved %d items, the new node's share is %d", m, share)
			}
			for it, n := range b {
				if a[it] != n && n != "node-new" {
					t.Fatalf("join moved item %d between old nodes %s → %s", it, a[it], n)
				}
			}
			// Leave: only the leaver's items move (plus at most one per node to rebalance).
			left := nodesN(tc.nodes)[1:]
			if len(left) == 0 {
				return
			}
			c := Assign(items, left, a)
			checkBalanced(t, c, items, left)
			lost := 0
			for _, n := range a {
				if n == "node-0000" {
					lost++
				}
			}
			if m := Moved(a, c); m > lost+len(left) {
				t.Fatalf("leave moved %d items, the leaver held %d", m, lost)
			}
		})
	}
}

func TestAssignDeterministicAndDuplicateNodes(t *testing.T) {
	items := itemsN(50)
	a := Assign(items, []string{"b", "a", "c", "a"}, nil)
	b := Assign(items, []string{"c", "a", "b"}, nil)
	if Moved(a, b) != 0 {
		t.Fatal("assignment depends on node order or duplicates")
	}
	checkBalanced(t, a, items, []string{"a", "b", "c"})
	if len(Assign(items, nil, nil)) != 0 || len(Assign[int](nil, []string{"a"}, nil)) != 0 {
		t.Fatal("empty inputs must give an empty assignment")
	}
}

// BenchmarkAssign: 1,000 nodes × 100,000 items; time per rebalance and items
// moved on one join and one leave.
func BenchmarkAssign(b *testing.B) {
	items, nodes := itemsN(100000), nodesN(1000)
	base := Assign(items, nodes, nil)
	joined := append(nodesN(1000), "node-new")
	left := nodesN(1000)[1:]
	b.Run("join", func(b *testing.B) {
		var moved int
		for b.Loop() {
			moved = Moved(base, Assign(items, joined, base))
		}
		b.ReportMetric(float64(moved), "moved")
	})
	b.Run("leave", func(b *testing.B) {
		var moved int
		for b.Loop() {
			moved = Moved(base, Assign(items, left, base))
		}
		b.ReportMetric(float64(moved), "moved")
	})
}

func TestOwnedAndTracker(t *testing.T) {
	now := time.Now()
	grants := map[string]store.Grant{
		"b": {Node: "n1", Since: now.Add(-time.Second), Term: 3},
		"a": {Node: "n1", Since: now.Add(-time.Second), Term: 4},
		"c": {Node: "n1", Since: now.Add(time.Second), Term: 4}, // handed over later
		"d": {Node: "n2", Since: now, Term: 2},
	}
	term, mine := Owned(grants, "n1", now)
	if term != 4 || len(mine) != 2 || mine[0] != "a" || mine[1] != "b" {
		t.Fatalf("Owned = %d %v", term, mine)
	}
	calls := 0
	tr := NewTracker(func(int64, []string) { calls++ })
	tr.Set(1, []string{"a"})
	tr.Set(2, []string{"a"}) // unchanged: no call
	tr.Set(2, nil)
	if calls != 2 {
		t.Fatalf("tracker called %d times, want 2", calls)
	}
}
