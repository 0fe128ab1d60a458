package ontime_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/apiv1"
)

// TestClusterZonesShown: a node of zone a over two databases, one per
// zone. /v1/cluster shows the node's zone and each item's; zone b has no
// live node, so the node runs its items too; the metrics count live nodes
// per zone, the dark zone at 0.
func TestClusterZonesShown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := ontime.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.NodeID = "zone-node"
	cfg.Store.Databases = []string{filepath.Join(cfg.DataDir, "a.db"), filepath.Join(cfg.DataDir, "b.db")}
	cfg.Store.Zones = []string{"dc-a", "dc-b"}
	cfg.Store.Tables = 2
	cfg.Cluster.Coordinator = "database"
	cfg.Cluster.Zone = "dc-a"
	cfg.Cluster.LeaseTTL = ontime.Duration(time.Second)
	node, err := ontime.NewNode(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer node.Stop(context.Background())
	srv := httptest.NewServer(node.HTTPHandler())
	defer srv.Close()

	deadline := time.Now().Add(20 * time.Second)
	var v apiv1.ClusterView
	for {
		resp, err := http.Get(srv.URL + "/v1/cluster")
		if err != nil {
			t.Fatal(err)
		}
		v = apiv1.ClusterView{}
		err = json.NewDecoder(resp.Body).Decode(&v)
		resp.Body.Close()
		owned := err == nil && len(v.Items) > 0
		for _, it := range v.Items {
			owned = owned && it.Owner == "zone-node"
		}
		if owned {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node does not own every item: %+v %v", v, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(v.Nodes) != 1 || v.Nodes[0].Zone != "dc-a" {
		t.Fatalf("nodes %+v, want zone-node in dc-a", v.Nodes)
	}
	for _, it := range v.Items {
		want := map[byte]string{'0': "dc-a", '1': "dc-b"}[it.Item[0]]
		if it.Zone != want {
			t.Errorf("item %s in zone %q, want %q", it.Item, it.Zone, want)
		}
	}

	for {
		m := scrape(t, srv.URL)
		if strings.Contains(m, "\nontime_cluster_zone_nodes_live{zone=\"dc-a\"} 1\n") &&
			strings.Contains(m, "\nontime_cluster_zone_nodes_live{zone=\"dc-b\"} 0\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no zone gauges in the metrics:\n%s", grepLines(m, "ontime_cluster_zone"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func scrape(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
