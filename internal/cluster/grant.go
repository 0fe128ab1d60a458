package cluster

import (
	"slices"
	"sync"
	"time"
)

// DefaultLeaseTTL is how long a silent node keeps its items (cluster.lease_ttl):
// both coordinators and the config default to it.
const DefaultLeaseTTL = 10 * time.Second

// Grant is one item's assignment as a coordinator stores it: the owner,
// from when it may act on the item (a handover from a live node waits for
// the old owner to let go), and the leader term that wrote it.
type Grant struct {
	Node  string
	Since time.Time
	Term  int64
}

// Lease is the leader lease as a coordinator stores it: the node holding
// it, its term (the fencing token: it grows each time the lease changes
// hands) and when it expires unless renewed.
type Lease struct {
	Node  string
	Term  int64
	Until time.Time
}

// Owned returns the highest term among the grants and, sorted, the items
// node may act on at now (in Tracker.Set's order).
func Owned(grants map[string]Grant, node string, now time.Time) (int64, []string) {
	var mine []string
	var term int64
	for it, g := range grants {
		term = max(term, g.Term)
		if g.Node == node && !g.Since.After(now) {
			mine = append(mine, it)
		}
	}
	slices.Sort(mine)
	return term, mine
}

// Tracker tells a node when the set of items it owns changes.
type Tracker struct {
	mu       sync.Mutex
	owned    []string
	onAssign func(term int64, items []string)
}

// NewTracker calls onAssign (may be nil) on every change.
func NewTracker(onAssign func(term int64, items []string)) *Tracker {
	return &Tracker{onAssign: onAssign}
}

// Set records the node's items; the callback runs when they differ from
// the last set.
func (t *Tracker) Set(term int64, items []string) {
	t.mu.Lock()
	same := slices.Equal(t.owned, items)
	t.owned = items
	t.mu.Unlock()
	if !same && t.onAssign != nil {
		t.onAssign(term, items)
	}
}
