// Package cluster shares sharding items among live nodes.
package cluster

import (
	"cmp"
	"slices"

	"github.com/ontimehq/ontime/internal/store"
)

// Status is a coordinator's view of the cluster, for GET /v1/cluster.
type Status struct {
	Leader     string
	Term       int64
	Nodes      []store.NodeStatus
	Assignment map[string]string // item → owner
}

// Assign hands items to nodes: balanced (node counts differ by at most one)
// and sticky (an item stays with its previous owner whenever that owner is
// alive and within its quota, so a join or leave moves as few items as
// balance allows). It is a pure function of its inputs: every node that
// computes it from the same inputs gets the same answer.
//
// Quotas: each node gets len(items)/len(nodes) items, and the nodes that
// already hold the most get the remainder's extra one each, which is what
// keeps moves minimal. O(items + nodes·log nodes).
func Assign[I comparable](items []I, nodes []string, prev map[I]string) map[I]string {
	out := make(map[I]string, len(items))
	if len(nodes) == 0 || len(items) == 0 {
		return out
	}
	alive := make(map[string]int, len(nodes)) // node → index in order
	sorted := slices.Clone(nodes)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	held := make([]int, len(sorted))
	for i, n := range sorted {
		alive[n] = i
	}
	for _, it := range items {
		if i, ok := alive[prev[it]]; ok {
			held[i]++
		}
	}
	// Nodes holding the most get the extra items of the remainder.
	order := make([]int, len(sorted))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(held[b], held[a]) })
	base, extra := len(items)/len(sorted), len(items)%len(sorted)
	quota := make([]int, len(sorted))
	for rank, i := range order {
		quota[i] = base
		if rank < extra {
			quota[i]++
		}
	}
	count := make([]int, len(sorted))
	var free []I
	for _, it := range items {
		if i, ok := alive[prev[it]]; ok && count[i] < quota[i] {
			out[it] = sorted[i]
			count[i]++
			continue
		}
		free = append(free, it)
	}
	next := 0
	for _, it := range free {
		for count[next] >= quota[next] {
			next++
		}
		out[it] = sorted[next]
		count[next]++
	}
	return out
}

// Moved counts items whose owner differs between two assignments.
func Moved[I comparable](before, after map[I]string) int {
	n := 0
	for it, owner := range after {
		if before[it] != owner {
			n++
		}
	}
	return n
}
