package cluster

import (
	"fmt"
	"testing"
)

// TestAssignGroups: each group is balanced on its own (a job's items
// spread over every node), and a leave moves only the leaver's items.
func TestAssignGroups(t *testing.T) {
	var items []string
	for i := range 12 {
		items = append(items, fmt.Sprintf("0.%d.0", i))
	}
	for i := range 10 {
		items = append(items, fmt.Sprintf("job:bill:%d.0.0", i), fmt.Sprintf("job:outbox:%d", i))
	}
	nodes := []string{"a", "b", "c"}
	got := AssignGroups(items, nodes, nil)
	per := map[string]map[string]int{}
	for it, n := range got {
		g := Group(it)
		if per[g] == nil {
			per[g] = map[string]int{}
		}
		per[g][n]++
	}
	for g, counts := range per {
		lo, hi := 100, 0
		for _, n := range nodes {
			lo, hi = min(lo, counts[n]), max(hi, counts[n])
		}
		if hi-lo > 1 || len(counts) != 3 {
			t.Errorf("group %q unbalanced: %v", g, counts)
		}
	}
	after := AssignGroups(items, []string{"a", "c"}, got)
	for it, n := range got {
		if n != "b" && after[it] != n {
			t.Errorf("%s moved from %s to %s though its owner stayed", it, n, after[it])
		}
	}
	if Group("0.1.2") != "" || Group("job:bill:0.1.2") != "job:bill" {
		t.Error("Group")
	}
}
