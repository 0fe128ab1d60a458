package e2e

import (
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/metrics"
	"github.com/ontimehq/ontime/internal/testdb"
)

// TestClusterViewStartAndVersion: with the database coordinator, each
// node's start comes from its registration (ontime_nodes.started_at), so
// either node shows both; so does each node's build version
// (ontime_nodes.version, schema 19).
func TestClusterViewStartAndVersion(t *testing.T) {
	t.Parallel()
	before := time.Now()
	dsns := testdb.DSNs(t, "postgres", 1)
	n1 := startClusterNode(t, "postgres", dsns, "v1")
	startClusterNode(t, "postgres", dsns, "v2")
	waitFor(t, 30*time.Second, "both nodes in node 1's view, each with its start", func() bool {
		v, err := n1.Cluster(t.Context())
		if err != nil || len(v.Nodes) != 2 {
			return false
		}
		for _, n := range v.Nodes {
			if n.ID != "v1" && n.Version == "" {
				return false // v2's registration read before it carried one
			}
			if n.Started == nil || n.Started.Before(before.Add(-time.Second)) || n.Started.After(time.Now()) {
				return false
			}
		}
		return true
	})
	v, err := n1.Cluster(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range v.Nodes {
		if n.Version != metrics.BuildVersion() {
			t.Fatalf("node %s: version %q, want %q (every node's, from its registration)", n.ID, n.Version, metrics.BuildVersion())
		}
	}
}
