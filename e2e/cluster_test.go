package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/internal/testdb"
	"github.com/ontimehq/ontime/internal/testdb/testetcd"
)

func clusterView(t *testing.T, addr string) (*apiv1.ClusterView, bool) {
	v, err := newAPIClient(t, "http://"+addr).Cluster(t.Context())
	return v, err == nil
}

// balanced: every item owned by one of want, counts within one.
func balanced(v *apiv1.ClusterView, want []string) bool {
	live := map[string]bool{}
	for _, n := range want {
		live[n] = true
	}
	per := map[string]int{}
	for _, it := range v.Items {
		if !live[it.Owner] {
			return false
		}
		per[it.Owner]++
	}
	if len(per) != len(want) {
		return false
	}
	lo, hi := len(v.Items), 0
	for _, c := range per {
		lo, hi = min(lo, c), max(hi, c)
	}
	return hi-lo <= 1
}

// startServeCluster starts one `ontime serve` per name, each with its own
// address and ONTIME_NODE_ID=name.
func startServeCluster(t *testing.T, cfgPath string, names []string) (addrs map[string]string, procs map[string]*serveProc) {
	t.Helper()
	addrs = map[string]string{}
	procs = map[string]*serveProc{}
	for _, n := range names {
		addrs[n] = freeAddr(t)
		procs[n] = startServe(t, cfgPath, addrs[n], "ONTIME_NODE_ID="+n)
	}
	return addrs, procs
}

// waitBalanced waits up to 30 s until the cluster view through addr shows
// the named nodes balanced.
func waitBalanced(t *testing.T, addr string, names []string) {
	t.Helper()
	waitFor(t, 30*time.Second, fmt.Sprintf("%d nodes balanced", len(names)), func() bool {
		v, ok := clusterView(t, addr)
		return ok && balanced(v, names)
	})
}

// TestClusterFailover: three `ontime serve` processes share one MariaDB;
// tasks are submitted through all of them; one is killed with SIGKILL mid-
// delivery, later restarted, and a fourth joins. Every task is delivered,
// none early; items are rebalanced after each change.
func TestClusterFailover(t *testing.T) {
	t.Run("database", func(t *testing.T) { t.Parallel(); clusterFailover(t, "coordinator: database") })
	t.Run("etcd", func(t *testing.T) {
		t.Parallel()
		clusterFailover(t, fmt.Sprintf("coordinator: etcd\n  etcd_endpoints: [%q]", testetcd.Start(t)))
	})
}

func clusterFailover(t *testing.T, coordinator string) {
	dir := t.TempDir()
	dsn := testdb.MySQL(t)
	cfgPath := filepath.Join(dir, "ontime.yaml")
	cfg := fmt.Sprintf(`data_dir: %s
store:
  driver: mysql
  databases: [%q]
  tables: 4
  segments: 3
hot:
  window: 1s
cluster:
  %s
  lease_ttl: 2s
delivery:
  lease_ttl: 60s
  retry_base: 50ms
  retry_max: 200ms
`, filepath.Join(dir, "data"), dsn, coordinator)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	rcv := newReceiver(t)
	names := []string{"n1", "n2", "n3"}
	addrs, procs := startServeCluster(t, cfgPath, names)
	waitBalanced(t, addrs["n1"], names)
	// 20,000 tasks due over ~10 s, submitted in batches through every node.
	const n, batch = 20000, 500
	due := map[string]time.Time{}
	for start := 0; start < n; start += batch {
		c := newAPIClient(t, "http://"+addrs[names[(start/batch)%3]])
		var tasks []apiv1.TaskRequest
		for i := start; i < start+batch; i++ {
			delay := 500*time.Millisecond + time.Duration(i%1000)*10*time.Millisecond // 0.5 .. 10.5 s
			tasks = append(tasks, apiv1.TaskRequest{Topic: "e2e.cluster", Key: fmt.Sprint(i), Delay: delay.String(), Target: rcv.srv.URL})
		}
		items, err := c.SubmitBatch(t.Context(), tasks)
		if err != nil || len(items) != batch {
			t.Fatalf("batch submit: %v, %d answers for %d tasks", err, len(items), batch)
		}
		for _, it := range items {
			if it.Error != nil {
				t.Fatalf("batch item failed: %+v", *it.Error)
			}
			due[it.ID] = it.DueAt
		}
	}
	waitFor(t, 30*time.Second, "deliveries under way", func() bool { return len(rcv.delivered()) >= n/4 })
	killedAt := time.Now()
	procs["n2"].signal(t, syscall.SIGKILL)
	waitFor(t, 30*time.Second, "survivors take n2's items", func() bool {
		v, ok := clusterView(t, addrs["n1"])
		return ok && balanced(v, []string{"n1", "n3"})
	})
	t.Logf("items reassigned %s after the kill", time.Since(killedAt).Round(time.Millisecond))
	// The survivors took n2's claimed and running tasks when its items
	// came to them, not when the leases ran out: delivery leases last 60 s,
	// far beyond the waits below, so only the adoption can have ended them
	// (with 2 s leases a reassignment slowed past 2 s by a loaded machine
	// found them run out already and ended none).
	waitFor(t, 30*time.Second, "n2's leases ended by the survivors", func() bool {
		return counter(t, "http://"+addrs["n1"], `ontime_leases_ended_total{reason="node_gone"}`)+
			counter(t, "http://"+addrs["n3"], `ontime_leases_ended_total{reason="node_gone"}`) > 0
	})
	waitFor(t, 180*time.Second, "every task delivered", func() bool { return len(rcv.delivered()) == n })
	dups := 0
	for _, c := range rcv.delivered() {
		if c > 1 {
			dups++
		}
	}
	for _, cl := range rcv.allCalls() {
		if cl.At.Before(due[cl.ID]) {
			t.Fatalf("task %s delivered early", cl.ID)
		}
	}
	// Duplicates can only be deliveries the killed node made whose outcome
	// it had not yet written (in flight or in its group-commit queue).
	t.Logf("kill -9 of one node of three: %d of %d tasks delivered twice", dups, n)
	if dups > n/20 {
		t.Fatalf("%d duplicates: far more than one node can have in flight", dups)
	}
	// The killed node comes back, then a fourth joins: balanced each time.
	procs["n2"] = startServe(t, cfgPath, addrs["n2"], "ONTIME_NODE_ID=n2")
	waitFor(t, 30*time.Second, "n2 back in", func() bool {
		v, ok := clusterView(t, addrs["n1"])
		return ok && balanced(v, names)
	})
	addrs["n4"] = freeAddr(t)
	procs["n4"] = startServe(t, cfgPath, addrs["n4"], "ONTIME_NODE_ID=n4")
	waitFor(t, 30*time.Second, "n4 joined", func() bool {
		v, ok := clusterView(t, addrs["n4"])
		return ok && balanced(v, append(names, "n4"))
	})
}
