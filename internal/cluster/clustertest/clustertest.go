// Package clustertest holds what the coordinator tests share: a recorder of
// the items a node was told it owns, and a check that a set of nodes owns
// every item exactly once, balanced.
package clustertest

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/cluster"
	"github.com/ontimehq/ontime/internal/store"
)

// Recorder keeps the latest assignment a node received.
type Recorder struct {
	ID    string
	mu    sync.Mutex
	items []string
	term  int64
}

// OnAssign is the coordinator callback.
func (r *Recorder) OnAssign(term int64, items []string) {
	r.mu.Lock()
	r.items, r.term = slices.Clone(items), term
	r.mu.Unlock()
}

// Owned is the node's current items.
func (r *Recorder) Owned() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.items)
}

// WaitBalanced waits until nodes own every item, counts within one. At every
// look it fails at once if two of them own the same item: two live owners
// at a time is the bug this guards against.
func WaitBalanced(t *testing.T, nodes []*Recorder, items []string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		owner := map[string]string{}
		lo, hi := len(items), 0
		for _, n := range nodes {
			mine := n.Owned()
			lo, hi = min(lo, len(mine)), max(hi, len(mine))
			for _, it := range mine {
				if prev, dup := owner[it]; dup {
					t.Fatalf("item %s owned by %s and %s", it, prev, n.ID)
				}
				owner[it] = n.ID
			}
		}
		if len(owner) == len(items) && hi-lo <= 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not balanced within %s: %d of %d items owned, counts %d..%d", within, len(owner), len(items), lo, hi)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// KeptOnJoin fails if a node that was there before a join gained items.
func KeptOnJoin(t *testing.T, before map[string][]string, nodes []*Recorder) {
	t.Helper()
	for _, n := range nodes {
		for _, it := range n.Owned() {
			if !slices.Contains(before[n.ID], it) {
				t.Errorf("node %s gained item %s on a join", n.ID, it)
			}
		}
	}
}

// WaitHandedOver waits until the assignment (read by grants) gives node to
// some items and every such grant has started, and old no longer owns any
// of them; it fails once within has passed since the first grant was seen
// (or a minute since joined with no grant). A grant seen waiting must
// start before the end of its TTL wait (its Since then): the old owner
// ended it. The handover tests use it: node joined, and only old, the
// owner, can end the wait.
func WaitHandedOver(t *testing.T, grants func() (map[string]store.Grant, error), node string, old *Recorder, joined time.Time, within time.Duration) {
	t.Helper()
	// The handover is timed from the grant, not from the join: how soon a
	// busy leader plans is not what this checks, only that the old owner
	// ends the TTL wait once it sees the grant.
	var deadline time.Time
	planBy := joined.Add(60 * time.Second)
	ttlEnd := map[string]time.Time{} // item → its grant's Since while waiting
	for {
		all, err := grants()
		if err != nil {
			t.Fatal(err)
		}
		var toNode, waiting []string
		for it, g := range all {
			if g.Node == node {
				toNode = append(toNode, it)
				if g.Since.After(time.Now()) {
					waiting = append(waiting, it)
					if _, ok := ttlEnd[it]; !ok {
						ttlEnd[it] = g.Since
					}
				}
			}
		}
		if len(toNode) > 0 && len(waiting) == 0 {
			for it, end := range ttlEnd {
				if g := all[it]; g.Node == node && !g.Since.Before(end) {
					t.Fatalf("%s was handed to %s at the end of the TTL wait (%s), not by %s letting go", it, node, end, old.ID)
				}
			}
			for _, it := range old.Owned() {
				if slices.Contains(toNode, it) {
					t.Fatalf("%s still owns %s, granted to %s", old.ID, it, node)
				}
			}
			return
		}
		if len(toNode) > 0 && deadline.IsZero() {
			deadline = time.Now().Add(within)
		}
		if (!deadline.IsZero() && time.Now().After(deadline)) || (deadline.IsZero() && time.Now().After(planBy)) {
			t.Fatalf("%s after %s joined: items granted to it %v, still waiting for their handover %v", time.Since(joined).Round(time.Millisecond), node, toNode, waiting)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// WaitHandlers waits until h shows exactly want (sorted) as the live nodes
// handling topic, failing once within passes.
func WaitHandlers(t *testing.T, h *cluster.Handlers, topic string, want []string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !slices.Equal(h.Nodes(topic), want) {
		if time.Now().After(deadline) {
			t.Fatalf("handlers of %s: %v after %s; want %v", topic, h.Nodes(topic), within, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
