package cluster

import (
	"slices"
	"sync"
	"time"

	"github.com/ontimehq/ontime/internal/store"
)

// DefaultLeaseTTL is how long a silent node keeps its items (cluster.lease_ttl):
// both coordinators and the config default to it.
const DefaultLeaseTTL = 10 * time.Second

// Owned returns the highest term among the grants and, sorted, the items
// node may act on at now (in Tracker.Set's order).
func Owned(grants map[string]store.Grant, node string, now time.Time) (int64, []string) {
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

// LetGo returns the items of before (what node owned until now) that the
// grants give to another node from a later time: handovers that wait for
// node to let go. The wait covers a node that has not yet read the change;
// one that has, and stopped acting on the items, may end the wait by
// moving those grants' Since to the present, so the new owner starts at
// its next read instead of a lease TTL later (until then nobody scans the
// items, and their tasks coming due would be late).
// Only items eager accepts count (nil: none).
func LetGo(before []string, grants map[string]store.Grant, node string, now time.Time, eager func(string) bool) []string {
	if eager == nil {
		return nil
	}
	var out []string
	for _, it := range before {
		if g, ok := grants[it]; ok && g.Node != node && g.Since.After(now) && eager(it) {
			out = append(out, it)
		}
	}
	return out
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

// Items returns the items of the last Set.
func (t *Tracker) Items() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.owned)
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
