package cluster

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/store"
)

// zoneItems are task items of 4 databases × 8 tables, databases 0 and 1
// in zone a, 2 and 3 in zone b, and 6 items of scan job j without a zone.
func zoneItems() ([]string, func(string) string) {
	var items []string
	for db := range 4 {
		for tb := range 8 {
			items = append(items, fmt.Sprintf("%d.%d.0", db, tb))
		}
	}
	for i := range 6 {
		items = append(items, fmt.Sprintf("job:j:%d", i))
	}
	zones := []string{"a", "a", "b", "b"}
	return items, func(it string) string {
		if it, ok := ParseItemKey(it); ok {
			return zones[it.DB]
		}
		return ""
	}
}

// perNode counts each node's items of zone z ("" : of no zone).
func perNode(a map[string]string, zoneOf func(string) string, z string) map[string]int {
	out := map[string]int{}
	for it, n := range a {
		if zoneOf(it) == z {
			out[n]++
		}
	}
	return out
}

func checkSpread(t *testing.T, what string, counts map[string]int, nodes ...string) {
	t.Helper()
	lo, hi := 1<<30, 0
	for _, n := range nodes {
		lo, hi = min(lo, counts[n]), max(hi, counts[n])
	}
	total := 0
	for _, c := range counts {
		total += c
	}
	sum := 0
	for _, n := range nodes {
		sum += counts[n]
	}
	if sum != total || hi-lo > 1 {
		t.Fatalf("%s: %v, want all on %v within one of each other", what, counts, nodes)
	}
}

func TestAssignZonesPrefersAndBalancesWithinZone(t *testing.T) {
	items, zoneOf := zoneItems()
	live := map[string]string{"a1": "a", "a2": "a", "a3": "a", "b1": "b", "b2": "b", "x": ""}
	got := AssignZones(items, live, zoneOf, nil)
	if len(got) != len(items) {
		t.Fatalf("%d of %d items assigned", len(got), len(items))
	}
	checkSpread(t, "zone a's items", perNode(got, zoneOf, "a"), "a1", "a2", "a3")
	checkSpread(t, "zone b's items", perNode(got, zoneOf, "b"), "b1", "b2")
	// The items of no zone spread over every node, zone-less x included.
	checkSpread(t, "items of no zone", perNode(got, zoneOf, ""), "a1", "a2", "a3", "b1", "b2", "x")
	if again := AssignZones(items, live, zoneOf, got); Moved(got, again) != 0 {
		t.Fatalf("reassigning moved %d items", Moved(got, again))
	}
}

func TestAssignZonesFailoverAndReturn(t *testing.T) {
	items, zoneOf := zoneItems()
	both := map[string]string{"a1": "a", "a2": "a", "b1": "b", "b2": "b"}
	start := AssignZones(items, both, zoneOf, nil)

	// Zone a goes dark: zone b's nodes take its items, balanced, and keep
	// their own.
	onlyB := map[string]string{"b1": "b", "b2": "b"}
	dark := AssignZones(items, onlyB, zoneOf, start)
	checkSpread(t, "zone a's items with a dark", perNode(dark, zoneOf, "a"), "b1", "b2")
	for it, n := range start {
		if zoneOf(it) == "b" && dark[it] != n {
			t.Fatalf("zone b's item %s moved from %s to %s when zone a went dark", it, n, dark[it])
		}
	}

	// Zone a is back (new processes): its items return to it, and only
	// they (and the zone-less items balance allows) move.
	back := map[string]string{"a3": "a", "b1": "b", "b2": "b"}
	ret := AssignZones(items, back, zoneOf, dark)
	checkSpread(t, "zone a's items once back", perNode(ret, zoneOf, "a"), "a3")
	for it, n := range dark {
		if zoneOf(it) == "b" && ret[it] != n {
			t.Fatalf("zone b's item %s moved when zone a came back", it)
		}
	}
}

func TestAssignZonesNoZones(t *testing.T) {
	// Without zones it is AssignGroups.
	items, _ := zoneItems()
	live := map[string]string{"n1": "", "n2": "", "n3": ""}
	got := AssignZones(items, live, nil, nil)
	want := AssignGroups(items, []string{"n1", "n2", "n3"}, nil)
	if Moved(want, got) != 0 {
		t.Fatalf("AssignZones without zones differs from AssignGroups in %d items", Moved(want, got))
	}
	// Nodes of a zone with items of no zone: every node.
	got = AssignZones(items, map[string]string{"a1": "a", "b1": "b"}, func(string) string { return "" }, nil)
	checkSpread(t, "task items", perNode(got, func(it string) string { return Group(it) }, ""), "a1", "b1")
}

// TestPlanZoneReturnWaitsForHandover: items moving back to their zone
// come from live nodes, so they start a TTL later, like any move from a
// live owner; items of a dark zone taken from dead nodes start at once.
func TestPlanZoneReturnWaitsForHandover(t *testing.T) {
	items, zoneOf := zoneItems()
	core := NewCore(NodeConfig{NodeID: "b1", TTL: 9 * time.Second, Items: items, ItemZone: zoneOf})
	now := time.Unix(1_700_000_000, 0)
	cur := map[string]store.Grant{}
	for it, n := range AssignZones(items, map[string]string{"a1": "a", "b1": "b"}, zoneOf, nil) {
		cur[it] = store.Grant{Node: n, Since: now.Add(-time.Hour), Term: 1}
	}
	grants, _, _ := core.Plan(map[string]string{"b1": "b"}, cur, now, 2)
	for it, g := range grants {
		if g.Node != "b1" || !g.Since.Equal(now) {
			t.Fatalf("a dark zone's item %s: %+v, want b1 at once", it, g)
		}
		cur[it] = g
	}
	grants, _, _ = core.Plan(map[string]string{"a2": "a", "b1": "b"}, cur, now, 3)
	moved := 0
	for it, g := range grants {
		if zoneOf(it) == "a" {
			moved++
			if g.Node != "a2" || !g.Since.Equal(now.Add(9*time.Second)) {
				t.Fatalf("returning item %s: %+v, want a2 after a TTL", it, g)
			}
		}
	}
	if moved != 16 {
		t.Fatalf("%d of zone a's 16 items returned", moved)
	}
}

func TestCheckZone(t *testing.T) {
	for _, z := range []string{"", "a", "eu-west-1", strings.Repeat("z", 32)} {
		if err := CheckZone("cluster.zone", z); err != nil {
			t.Errorf("%q: %v", z, err)
		}
	}
	for _, z := range []string{"EU", "a b", "a_b", strings.Repeat("z", 33), "zone/1"} {
		if err := CheckZone("cluster.zone", z); err == nil || !strings.HasPrefix(err.Error(), "cluster.zone: ") {
			t.Errorf("%q: %v, want an error naming cluster.zone", z, err)
		}
	}
	if err := (&NodeConfig{NodeID: "n", Zone: "Bad"}).Check(time.Second, ""); err == nil || !strings.Contains(err.Error(), "cluster.zone") {
		t.Errorf("NodeConfig.Check: %v, want an error naming cluster.zone", err)
	}
}

// BenchmarkAssignZones: 100,000 task items of 4 databases on 100 nodes,
// one leader's plan: without zones through AssignGroups (the baseline),
// then AssignZones without zones and with the databases in 2 zones.
func BenchmarkAssignZones(b *testing.B) {
	var items []string
	for db := range 4 {
		for tb := range 1000 {
			for seg := range 25 {
				items = append(items, fmt.Sprintf("%d.%d.%d", db, tb, seg))
			}
		}
	}
	zoneOf := func(it string) string { return map[byte]string{'0': "a", '1': "a", '2': "b", '3': "b"}[it[0]] }
	plain, zoned := map[string]string{}, map[string]string{}
	var ids []string
	for i := range 100 {
		id := fmt.Sprintf("node-%03d", i)
		ids = append(ids, id)
		plain[id] = ""
		zoned[id] = []string{"a", "b"}[i%2]
	}
	b.Run("groups", func(b *testing.B) {
		for b.Loop() {
			AssignGroups(items, ids, nil)
		}
	})
	b.Run("zones=none", func(b *testing.B) {
		for b.Loop() {
			AssignZones(items, plain, nil, nil)
		}
	})
	b.Run("zones=2", func(b *testing.B) {
		for b.Loop() {
			AssignZones(items, zoned, zoneOf, nil)
		}
	})
}
