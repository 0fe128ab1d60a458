package api_test

import (
	"testing"
	"time"
)

// GET /v1/cluster through the OpenAPI checker: the node shows when it
// started and the build's version.
func TestClusterNodeStartedAndVersion(t *testing.T) {
	t.Parallel()
	before := time.Now()
	base := server(t)
	code, m := call(t, "GET", base+"/v1/cluster", "")
	nodes, _ := m["nodes"].([]any)
	if code != 200 || len(nodes) != 1 {
		t.Fatalf("cluster: %d %v", code, m)
	}
	n := nodes[0].(map[string]any)
	started, err := time.Parse(time.RFC3339Nano, n["started"].(string))
	if err != nil || started.Before(before.Add(-time.Second)) || started.After(time.Now()) {
		t.Fatalf("started %v (%v), want between %v and now", n["started"], err, before)
	}
	if v, _ := n["version"].(string); v == "" {
		t.Fatalf("no version: %v", n)
	}
}
