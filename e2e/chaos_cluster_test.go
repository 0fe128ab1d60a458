package e2e

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/testdb"
)

// chaosCluster is n `ontime serve` processes sharing one config.
type chaosCluster struct {
	t     *testing.T
	cfg   string
	names []string
	addrs []string
	procs []*serveProc
	all   []*serveProc // every process started, killed ones included
}

func startChaosCluster(t *testing.T, cfgPath string, n int) *chaosCluster {
	t.Helper()
	c := &chaosCluster{t: t, cfg: cfgPath}
	for i := range n {
		c.names = append(c.names, fmt.Sprintf("n%d", i+1))
		c.addrs = append(c.addrs, freeAddr(t))
		c.procs = append(c.procs, startServe(t, cfgPath, c.addrs[i], "ONTIME_NODE_ID="+c.names[i]))
	}
	c.all = slices.Clone(c.procs)
	// ONTIME_CHAOS_LOGS=dir keeps every process's log there, to trace
	// late or duplicated tasks (with log_level from ONTIME_CHAOS_LOG_LEVEL).
	if dir := os.Getenv("ONTIME_CHAOS_LOGS"); dir != "" {
		t.Cleanup(func() {
			for i, p := range c.all {
				path := filepath.Join(dir, fmt.Sprintf("%s-%d.log", strings.ReplaceAll(t.Name(), "/", "_"), i))
				if err := os.WriteFile(path, []byte(p.log()), 0o644); err != nil {
					t.Error(err)
				}
			}
		})
	}
	if n > 1 {
		var items int
		waitFor(t, 60*time.Second, "nodes balanced", func() bool {
			v, ok := clusterView(t, c.addrs[0])
			if !ok {
				return false
			}
			items = len(v.Items)
			return balanced(v, c.names)
		})
		// The view shows the new owners at once; an item taken from a live
		// node is scanned by its new owner only cluster.lease_ttl later.
		// Faults injected meanwhile would be measured with that gap.
		waitFor(t, 60*time.Second, "items handed over", func() bool { return c.scanned() == items })
	}
	return c
}

// scanned is how many items the nodes scan, summed.
func (c *chaosCluster) scanned() int {
	n := 0
	for _, a := range c.addrs {
		n += int(counter(c.t, "http://"+a, "ontime_items_scanned"))
	}
	return n
}

// kill9 kills node i with SIGKILL.
func (c *chaosCluster) kill9(i int) { c.procs[i].signal(c.t, syscall.SIGKILL) }

// restart starts node i again with its name and address.
func (c *chaosCluster) restart(i int) {
	c.procs[i] = startServe(c.t, c.cfg, c.addrs[i], "ONTIME_NODE_ID="+c.names[i])
	c.all = append(c.all, c.procs[i])
}

// withCoordinator replaces the database coordinator of a chaosYAML config
// with the lines of coordYAML (cluster settings, indented two spaces);
// "" keeps it.
func withCoordinator(yaml, coordYAML string) string {
	if coordYAML == "" {
		return yaml
	}
	return strings.Replace(yaml, "  coordinator: database\n", coordYAML, 1)
}

// chaosYAML is the config of a chaos cluster on driver's databases, with
// the database coordinator; hot adds lines to the hot section. Leases are
// short in CI, so a run takes seconds, and the defaults in the full run,
// so its figures are what a deployment sees; leases says which.
func chaosYAML(driver string, dsns []string, hot string) (yaml, leases string) {
	clusterTTL, deliveryTTL := "2s", "2s"
	if chaosFull() {
		clusterTTL, deliveryTTL = "10s", "30s" // the defaults
	}
	level := cmp.Or(os.Getenv("ONTIME_CHAOS_LOG_LEVEL"), "warn")
	// max_connections 8: three nodes share the server's connection limit
	// with every other test running, as a deployment's nodes share it.
	yaml = fmt.Sprintf(`log_level: %s
store:
  driver: %s
  databases: ["%s"]
  tables: 4
  segments: 3
  max_connections: 8
hot:
  window: 2s
%scluster:
  coordinator: database
  lease_ttl: %s
delivery:
  lease_ttl: %s
  retry_base: 50ms
  retry_max: 500ms
`, level, driver, strings.Join(dsns, `", "`), hot, clusterTTL, deliveryTTL)
	return yaml, "cluster.lease_ttl " + clusterTTL + ", delivery.lease_ttl " + deliveryTTL
}

// TestChaosKillRounds (issue 25 item 10): three `ontime serve` processes
// with the database coordinator, on MariaDB and on PostgreSQL, default
// leases in the full run (cluster.lease_ttl 10 s). Tasks due 2–10 s ahead
// are submitted over HTTP at 200/s, round-robin to whichever nodes are
// alive, and delivered by webhook; every ~11 s a random node is killed with
// SIGKILL and restarted 3 s later under the same node_id (within the TTL:
// the cluster never sees it leave, only its incarnation change), 8 rounds.
// The short version scales the times to 2 s leases: 2 rounds, every 3 s,
// down 1 s, due 0.4–2 s, 100/s.
func TestChaosKillRounds(t *testing.T) {
	for _, engine := range []string{"mysql", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			chaosParallel(t)
			chaosKillRounds(t, engine, "database", "")
		})
	}
}

// chaosKillRounds runs the rounds on the coordinator named coord, whose
// cluster settings (beside lease_ttl) coordYAML holds; "" for the database.
func chaosKillRounds(t *testing.T, engine, coord, coordYAML string) {
	rounds := chaosSize(t, "KILL_ROUNDS", 2, 8)
	rate := chaosSize(t, "KILL_RATE", 100, 200) // tasks per second
	every, down, lo, hi := 3*time.Second, time.Second, 400*time.Millisecond, 2*time.Second
	if chaosFull() {
		every, down, lo, hi = 11*time.Second, 3*time.Second, 2*time.Second, 10*time.Second
	}
	// The stream covers every round and goes on for a round after the last.
	n := chaosSize(t, "KILL_TASKS", rate*int((time.Duration(rounds+1)*every).Seconds()), rate*int((time.Duration(rounds+1)*every).Seconds()))
	yaml, leases := chaosYAML(engine, testdb.DSNs(t, engine, 2), "")
	yaml = withCoordinator(yaml, coordYAML)
	name := engine
	if coord != "database" {
		name = coord + "-" + engine
	}
	cfg := writeChaosConfig(t, t.TempDir(), yaml)
	rcv := newChaosReceiver(t, nil)
	cl := startChaosCluster(t, cfg, 3)
	load := newChaosLoad(t, "kill-"+name, rcv.srv.URL, cl.addrs...)
	ctx := t.Context()
	const batch = 10
	wait := load.streamBackground(ctx, n, batch, time.Second*batch/time.Duration(rate), lo, hi)
	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 25))
	var events []string
	start := time.Now()
	for r := range rounds {
		time.Sleep(every - down)
		if load.finished.Load() {
			break
		}
		victim := rnd.IntN(3)
		load.setDown(victim, true)
		cl.kill9(victim)
		killed := time.Since(start)
		time.Sleep(down)
		cl.restart(victim)
		load.setDown(victim, false)
		events = append(events, fmt.Sprintf("%s killed at +%s, ready at +%s", cl.names[victim], killed.Round(time.Millisecond), time.Since(start).Round(time.Millisecond)))
		t.Logf("round %d: %s (%d submitted so far)", r+1, events[len(events)-1], load.submitted())
	}
	wait()
	rcv.settle(load, 5*time.Minute, 5*time.Second)
	res := rcv.count(load)
	for _, d := range rcv.duplicates(load, start, 20) {
		t.Logf("duplicated: %s", d)
	}
	if res.P99 > 0 {
		for _, l := range rcv.latest(load, 10) {
			t.Logf("late: %s due +%s first delivered %s late (attempt %d, %d calls)", l.id, l.due.Sub(start).Round(time.Millisecond), l.late.Round(time.Millisecond), l.attempt, l.calls)
		}
	}
	chaosVerdict(t, "kill-rounds/"+name, res, true,
		fmt.Sprintf("%d rounds: a random node of 3 killed with SIGKILL every %s, restarted %s later (%s); %d tasks/s due %s–%s ahead; %s; %s",
			rounds, every, down, strings.Join(events, ", "), rate, lo, hi, leases, load.failures()))
}

// TestChaosPostgresRestart: two nodes on a private PostgreSQL (its own
// data directory and port) that crashes (pg_ctl stop -m immediate) and is
// started again while tasks stream in. Submits meanwhile answer 503 and
// are retried by the client; nothing acknowledged is lost.
func TestChaosPostgresRestart(t *testing.T) {
	chaosParallel(t)
	restarts := chaosSize(t, "PG_RESTARTS", 1, 3)
	n := chaosSize(t, "PG_TASKS", 3000, 60000)
	down := time.Duration(chaosSize(t, "PG_DOWN_SECONDS", 3, 10)) * time.Second
	pg := testdb.StartPostgres(t)
	yaml, leases := chaosYAML("postgres", []string{pg.CreateDatabase(), pg.CreateDatabase()}, "")
	cfg := writeChaosConfig(t, t.TempDir(), yaml)
	rcv := newChaosReceiver(t, nil)
	cl := startChaosCluster(t, cfg, 2)
	load := newChaosLoad(t, "pgrestart", rcv.srv.URL, cl.addrs...)
	start := time.Now()
	wait := load.streamBackground(t.Context(), n, 50, 100*time.Millisecond, 500*time.Millisecond, 5*time.Second)
	for r := range restarts {
		time.Sleep(3 * time.Second)
		crashed := time.Since(start)
		pg.Crash()
		time.Sleep(down)
		pg.Start()
		t.Logf("restart %d: PostgreSQL crashed at +%s, down %s, up at +%s (%d submitted so far)", r+1,
			crashed.Round(time.Millisecond), down, time.Since(start).Round(time.Millisecond), load.submitted())
	}
	wait()
	rcv.settle(load, 5*time.Minute, 5*time.Second)
	for _, d := range rcv.duplicates(load, start, 40) {
		t.Logf("duplicated: %s", d)
	}
	chaosVerdict(t, "postgres-restart", rcv.count(load), true,
		fmt.Sprintf("%d crashes of a private PostgreSQL, down %s each, 2 nodes; %s; %s", restarts, down, leases, load.failures()))
}

// TestChaosRedisFlushRestart: two nodes on PostgreSQL with the Redis hot
// tier on a private redis-server, which is emptied with FLUSHALL and later
// killed and started again, empty, while tasks stream in.
func TestChaosRedisFlushRestart(t *testing.T) {
	chaosParallel(t)
	rounds := chaosSize(t, "REDIS_ROUNDS", 1, 3)
	n := chaosSize(t, "REDIS_TASKS", 3000, 60000)
	r := testdb.StartRedis(t)
	yaml, leases := chaosYAML("postgres", testdb.DSNs(t, "postgres", 1), fmt.Sprintf("  tier: redis\n  redis_addrs: [%q]\n", r.Addr()))
	cfg := writeChaosConfig(t, t.TempDir(), yaml)
	rcv := newChaosReceiver(t, nil)
	cl := startChaosCluster(t, cfg, 2)
	load := newChaosLoad(t, "redis", rcv.srv.URL, cl.addrs...)
	wait := load.streamBackground(t.Context(), n, 50, 100*time.Millisecond, 500*time.Millisecond, 5*time.Second)
	var flushes, restarts []time.Time
	for range rounds {
		time.Sleep(3 * time.Second)
		admin := redisClient(r.Addr())
		if err := admin.FlushAll(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
		admin.Close()
		flushes = append(flushes, time.Now())
		time.Sleep(3 * time.Second)
		r.Stop()
		restarts = append(restarts, time.Now())
		time.Sleep(time.Second)
		r.Start()
		// Event times, to trace late tasks against the nodes' logs.
		t.Logf("FLUSHALL at %s; redis-server killed at %s, answering again at %s",
			flushes[len(flushes)-1].Format(time.RFC3339Nano), restarts[len(restarts)-1].Format(time.RFC3339Nano), time.Now().Format(time.RFC3339Nano))
	}
	wait()
	rcv.settle(load, 5*time.Minute, 5*time.Second)
	// The tasks due in the 10 s after each event, up to the next one
	// (a restart follows each FLUSHALL by 3 s, with Redis down for 1 s):
	// how long their holders took to notice the tier lost them.
	all := append(slices.Clone(flushes), restarts...)
	slices.SortFunc(all, time.Time.Compare)
	after := func(events []time.Time) func(time.Time) bool {
		return func(due time.Time) bool {
			for _, e := range events {
				end := e.Add(10 * time.Second)
				if i, _ := slices.BinarySearchFunc(all, e, time.Time.Compare); i+1 < len(all) && all[i+1].Before(end) {
					end = all[i+1]
				}
				if !due.Before(e) && due.Before(end) {
					return true
				}
			}
			return false
		}
	}
	fl, rs := rcv.countDue(load, after(flushes)), rcv.countDue(load, after(restarts))
	chaosVerdict(t, "redis-flush-restart", rcv.count(load), true,
		fmt.Sprintf("%d FLUSHALL and %d kill+restart of a private redis-server, 2 nodes; due ≤10 s after a FLUSHALL (before the next restart): %d, lateness p99 %s max %s; after a restart (before the next FLUSHALL): %d, p99 %s max %s; %s; %s",
			rounds, rounds, fl.Submitted, fl.P99.Round(time.Millisecond), fl.Max.Round(time.Millisecond),
			rs.Submitted, rs.P99.Round(time.Millisecond), rs.Max.Round(time.Millisecond), leases, load.failures()))
}
