package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/internal/router"
	"github.com/ontimehq/ontime/internal/testdb"
)

// scheduleOwner is the node that makes the tasks of schedule name: the
// owner of the sharding item the name hashes to, among the items listed in
// store order (database, table, segment).
func scheduleOwner(t *testing.T, addr, name string, tables, segments int) string {
	t.Helper()
	var items []string
	for tb := range tables {
		for sg := range segments {
			items = append(items, fmt.Sprintf("0.%d.%d", tb, sg))
		}
	}
	item := items[router.HashKey(name)%uint32(len(items))]
	v, ok := clusterView(t, addr)
	if !ok {
		t.Fatal("cluster view")
	}
	for _, it := range v.Items {
		if it.Item == item {
			return it.Owner
		}
	}
	t.Fatalf("item %s not in the cluster view", item)
	return ""
}

// TestScheduleThreeNodesKillOwner: three `ontime serve` processes share
// one MariaDB and declare the same `@every 1s` schedule in their config.
// For a while (15 s; ONTIME_SCHEDULE_SOAK=60s for the figure) each
// second has exactly one task, delivered once and never early; then the
// node that owns the schedule is killed with SIGKILL, and no fire time is
// lost across the takeover (the misfire policy is skip: a lost one would
// show as a gap).
func TestScheduleThreeNodesKillOwner(t *testing.T) {
	t.Parallel()
	soak := 15 * time.Second
	if v := os.Getenv("ONTIME_SCHEDULE_SOAK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("ONTIME_SCHEDULE_SOAK: %v", err)
		}
		soak = d
	}
	const tables, segments = 4, 3
	dir := t.TempDir()
	dsn := testdb.MySQL(t)
	rcv := newReceiver(t)
	cfgPath := filepath.Join(dir, "ontime.yaml")
	cfg := fmt.Sprintf(`data_dir: %s
store: {driver: mysql, databases: [%q], tables: %d, segments: %d}
hot: {window: 1s}
cluster: {coordinator: database, lease_ttl: 2s}
delivery: {lease_ttl: 2s, retry_base: 50ms, retry_max: 200ms}
schedules:
  - name: beat
    cron: "@every 1s"
    misfire: skip
    task: {topic: e2e.beat, target: %q, payload: {from: config}}
`, filepath.Join(dir, "data"), dsn, tables, segments, rcv.srv.URL)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	names := []string{"n1", "n2", "n3"}
	addrs, procs := startServeCluster(t, cfgPath, names)
	waitBalanced(t, addrs["n1"], names)
	begin := time.Now()
	time.Sleep(soak)
	owner := scheduleOwner(t, addrs["n1"], "beat", tables, segments)
	killedAt := time.Now()
	procs[owner].signal(t, syscall.SIGKILL)
	var alive []string
	for _, n := range names {
		if n != owner {
			alive = append(alive, n)
		}
	}
	waitFor(t, 30*time.Second, "survivors take the owner's items", func() bool {
		v, ok := clusterView(t, addrs[alive[0]])
		return ok && balanced(v, alive)
	})
	newOwner := scheduleOwner(t, addrs[alive[0]], "beat", tables, segments)
	t.Logf("owner %s killed; %s took the schedule over %s later", owner, newOwner, time.Since(killedAt).Round(time.Millisecond))
	time.Sleep(10 * time.Second)
	end := time.Now().Add(-time.Second).Truncate(time.Second)

	// Every fire time from the first delivered to end: one task, delivered,
	// never early. Tasks the killed node held wait for their lease to end
	// and come late, so wait for all of them.
	var first time.Time
	waitFor(t, 60*time.Second, "every fire time up to the end delivered", func() bool {
		byKey := map[time.Time]bool{}
		for _, fc := range fireCalls(rcv, "beat") {
			byKey[fc.Fire] = true
			if first.IsZero() || fc.Fire.Before(first) {
				first = fc.Fire
			}
		}
		if first.IsZero() {
			return false
		}
		for s := first; !s.After(end); s = s.Add(time.Second) {
			if !byKey[s] {
				return false
			}
		}
		return true
	})
	ids := map[time.Time]string{}
	deliveries := map[string]int{}
	for _, fc := range fireCalls(rcv, "beat") {
		if fc.At.Before(fc.Fire) || fc.At.Before(fc.DueAt) {
			t.Errorf("%s delivered %s early", fc.Key, fc.Fire.Sub(fc.At))
		}
		if prev, ok := ids[fc.Fire]; ok && prev != fc.ID {
			t.Errorf("%s: two tasks, %s and %s", fc.Key, prev, fc.ID)
		}
		ids[fc.Fire] = fc.ID
		deliveries[fc.ID]++
		if p, _ := fc.Body["payload"].(map[string]any); p["from"] != "config" {
			t.Errorf("%s: payload %v", fc.Key, fc.Body["payload"])
		}
	}
	if first.After(begin.Add(5 * time.Second)) {
		t.Errorf("first fire at %s, %s after the cluster formed", first, first.Sub(begin))
	}
	dups := 0
	for _, n := range deliveries {
		if n > 1 {
			dups++
		}
	}
	fires := int(end.Sub(first)/time.Second) + 1
	t.Logf("%d fire times from %s to %s over a kill of the owner: one task each; %d delivered twice (in flight at the kill)",
		fires, first.Format(time.TimeOnly), end.Format(time.TimeOnly), dups)
	if dups > 3 {
		t.Errorf("%d fire times delivered more than once: more than one node could have had in flight", dups)
	}

	// A pause asked of a node that does not own the schedule reaches the
	// owner: the tasks made ahead are withdrawn and nothing fires after.
	other := alive[0]
	if other == newOwner {
		other = alive[1]
	}
	c := newAPIClient(t, "http://"+addrs[other])
	if p, err := c.PauseSchedule(t.Context(), "beat"); err != nil || !p.Paused {
		t.Fatalf("pause through %s: %+v, %v", other, p, err)
	}
	waitFor(t, 30*time.Second, "the owner withdraws the tasks ahead", func() bool { return waiting(t, c, "e2e.beat") == 0 })
	pausedAt := time.Now()
	started := map[string]bool{}
	running(t, c, "e2e.beat", started)
	time.Sleep(3 * time.Second)
	for _, fc := range fireCalls(rcv, "beat") {
		if fc.Fire.After(pausedAt.Add(100*time.Millisecond)) && !started[fc.Key] {
			t.Errorf("%s fired after the pause", fc.Key)
		}
	}
}

// TestScheduleThreeInProcessNodesOnPostgres: the same on PostgreSQL with
// three in-process nodes, the schedule put through the Go API of one of
// them; the owner stops (a graceful Stop hands its items over at once):
// one task per fire time, none lost, none early.
func TestScheduleThreeInProcessNodesOnPostgres(t *testing.T) {
	t.Parallel()
	const tables, segments = 4, 2
	dsn := testdb.Postgres(t)
	rcv := newReceiver(t)
	ctx := context.Background()
	nodes := map[string]*ontime.Node{}
	var names []string
	for i := range 3 {
		name := fmt.Sprintf("p%d", i+1)
		cfg := ontime.DefaultConfig()
		cfg.NodeID = name
		cfg.DataDir = t.TempDir()
		cfg.Store = ontime.StoreConfig{Driver: "postgres", Databases: []string{dsn}, Tables: tables, Segments: segments, MaxConnections: 8}
		cfg.Hot.Window = ontime.Duration(time.Second)
		cfg.Cluster.Coordinator = "database"
		cfg.Cluster.LeaseTTL = ontime.Duration(2 * time.Second)
		cfg.Delivery.LeaseTTL = ontime.Duration(2 * time.Second)
		n, err := ontime.NewNode(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.Stop(context.Background()) }) // Stop may be called again
		nodes[name] = n
		names = append(names, name)
	}
	waitFor(t, 30*time.Second, "three nodes balanced", func() bool {
		v, err := nodes["p1"].Cluster(ctx)
		return err == nil && balanced(v, names)
	})
	if _, _, err := nodes["p2"].PutSchedule(ctx, ontime.Schedule{Name: "pg-beat", Cron: "@every 1s",
		Task: ontime.ScheduleTask{Topic: "e2e.pgbeat", Target: rcv.srv.URL}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(8 * time.Second)
	v, err := nodes["p1"].Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var items []string
	for tb := range tables {
		for sg := range segments {
			items = append(items, fmt.Sprintf("0.%d.%d", tb, sg))
		}
	}
	item, owner := items[router.HashKey("pg-beat")%uint32(len(items))], ""
	for _, it := range v.Items {
		if it.Item == item {
			owner = it.Owner
		}
	}
	if nodes[owner] == nil {
		t.Fatalf("no owner for item %s in %+v", item, v.Items)
	}
	if err := nodes[owner].Stop(ctx); err != nil {
		t.Fatal(err)
	}
	delete(nodes, owner)
	t.Logf("owner %s stopped", owner)
	time.Sleep(8 * time.Second)
	end := time.Now().Add(-time.Second).Truncate(time.Second)
	var first time.Time
	waitFor(t, 60*time.Second, "every fire time up to the end delivered", func() bool {
		seen := map[time.Time]bool{}
		for _, fc := range fireCalls(rcv, "pg-beat") {
			seen[fc.Fire] = true
			if first.IsZero() || fc.Fire.Before(first) {
				first = fc.Fire
			}
		}
		if first.IsZero() {
			return false
		}
		for s := first; !s.After(end); s = s.Add(time.Second) {
			if !seen[s] {
				return false
			}
		}
		return true
	})
	ids := map[time.Time]string{}
	for _, fc := range fireCalls(rcv, "pg-beat") {
		if fc.At.Before(fc.Fire) {
			t.Errorf("%s delivered early", fc.Key)
		}
		if prev, ok := ids[fc.Fire]; ok && prev != fc.ID {
			t.Errorf("%s: two tasks", fc.Key)
		}
		ids[fc.Fire] = fc.ID
	}
	t.Logf("%d fire times across the owner's stop, one task each", int(end.Sub(first)/time.Second)+1)
}
