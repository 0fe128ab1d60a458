package cluster

import (
	"maps"
	"slices"
	"strings"
)

// Group is the balancing group of an item key: what comes before its last
// colon ("job:bill-settle" for "job:bill-settle:0.3.0"), "" for the task
// store's items ("0.3.1"). Each group is balanced on its own, so that one
// scan job's items spread over every node rather than wherever the task
// items left room.
func Group(item string) string {
	if i := strings.LastIndexByte(item, ':'); i >= 0 {
		return item[:i]
	}
	return ""
}

// AssignGroups is Assign applied to each Group of items separately: within
// a group, counts per node differ by at most one, and items stay with
// their live previous owner as Assign keeps them. A pure function, like
// Assign.
func AssignGroups(items, nodes []string, prev map[string]string) map[string]string {
	groups := map[string][]string{}
	for _, it := range items {
		g := Group(it)
		groups[g] = append(groups[g], it)
	}
	out := make(map[string]string, len(items))
	for _, g := range slices.Sorted(maps.Keys(groups)) {
		maps.Copy(out, Assign(groups[g], nodes, prev))
	}
	return out
}
