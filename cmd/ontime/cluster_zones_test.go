package main

import (
	"strings"
	"testing"
	"time"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/client"
)

// TestPrintClusterZones: the node lines and, with --items, the item lines
// show the zone, "-" for none.
func TestPrintClusterZones(t *testing.T) {
	v := &client.ClusterView{Node: "a1", Coordinator: "database", Leader: "a1", Term: 3,
		Nodes: []apiv1.ClusterNodeView{{ID: "a1", Addr: "a1:7070", Zone: "dc-a", Live: true, Heartbeat: time.Now()}, {ID: "x", Addr: "x:7070", Live: true, Heartbeat: time.Now()}},
		Items: []apiv1.ClusterItemView{{Item: "0.0.0", Owner: "a1", Zone: "dc-a"}, {Item: "1.0.0", Owner: "a1", Zone: "dc-b"}, {Item: "job:j:0", Owner: "x"}}}
	var b strings.Builder
	if err := printCluster(&b, v, true); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range [][]string{{"NODE", "ADDRESS", "ZONE"}, {"a1", "a1:7070", "dc-a"}, {"x", "x:7070", "-"}, {"ITEM", "ZONE", "OWNER"},
		{"0.0.0", "dc-a", "a1"}, {"1.0.0", "dc-b", "a1"}, {"job:j:0", "-", "x"}} {
		found := false
		for _, l := range strings.Split(out, "\n") {
			f := strings.Fields(l)
			if len(f) >= len(want) && strings.Join(f[:len(want)], " ") == strings.Join(want, " ") {
				found = true
			}
		}
		if !found {
			t.Errorf("no line starting %v in:\n%s", want, out)
		}
	}
}
