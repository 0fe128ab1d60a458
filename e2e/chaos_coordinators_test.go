package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	goredis "github.com/redis/go-redis/v9"

	"github.com/ontimehq/ontime/internal/testdb"
	"github.com/ontimehq/ontime/internal/testdb/testetcd"
)

// TestChaosKillRoundsCoordinators (issue 31): TestChaosKillRounds's kill -9
// rounds of three `ontime serve` processes on the Redis coordinator (the
// suite's Redis, a key prefix of its own) and on the ZooKeeper coordinator
// (a private standalone server), PostgreSQL as the store: nothing lost,
// nothing early.
func TestChaosKillRoundsCoordinators(t *testing.T) {
	t.Run("redis", func(t *testing.T) {
		chaosParallel(t)
		prefix := testdb.Unique("ontime_t_")
		t.Cleanup(func() { deleteCoordKeys(t, testdb.RedisURL(), prefix) })
		chaosKillRounds(t, "postgres", "redis", redisCoordYAML(testdb.RedisURL(), prefix))
	})
	t.Run("zookeeper", func(t *testing.T) {
		chaosParallel(t)
		chaosKillRounds(t, "postgres", "zookeeper", zkCoordYAML(testdb.StartZooKeeper(t)))
	})
}

func redisCoordYAML(addr, prefix string) string {
	return fmt.Sprintf("  coordinator: redis\n  redis_addrs: [%q]\n  redis_prefix: %s\n", addr, prefix)
}

func zkCoordYAML(server string) string {
	return fmt.Sprintf("  coordinator: zookeeper\n  zookeeper_servers: [%q]\n  zookeeper_prefix: /ontime\n", server)
}

// deleteCoordKeys deletes the Redis coordinator's keys under prefix.
func deleteCoordKeys(t *testing.T, url, prefix string) {
	opt, err := goredis.ParseURL(url)
	if err != nil {
		t.Error(err)
		return
	}
	rdb := goredis.NewClient(opt)
	defer rdb.Close()
	p := "{" + prefix + "}:coord:"
	rdb.Del(context.Background(), p+"members", p+"info", p+"leader", p+"term", p+"assign")
}

// coordinatorUnderTest is one coordinator of TestFailoverTimes: its
// cluster settings, and a count of the requests its server has served so
// far (nil: not measured).
type coordinatorUnderTest struct {
	name     string
	yaml     string
	requests func() (float64, error)
}

func failoverCoordinators(t *testing.T) []coordinatorUnderTest {
	redis := testdb.StartRedis(t)
	zk := testdb.StartZooKeeper(t)
	etcd := testetcd.Start(t)
	return []coordinatorUnderTest{
		{name: "database", yaml: ""},
		// The embedded etcd counts the gRPC messages it received (unary
		// requests and lease keep-alives) in this process's registry.
		{name: "etcd", yaml: fmt.Sprintf("  coordinator: etcd\n  etcd_endpoints: [%q]\n", "http://"+etcd), requests: func() (float64, error) {
			mfs, err := prometheus.DefaultGatherer.Gather()
			if err != nil {
				return 0, err
			}
			var n float64
			for _, mf := range mfs {
				if mf.GetName() == "grpc_server_msg_received_total" {
					for _, m := range mf.GetMetric() {
						n += m.GetCounter().GetValue()
					}
				}
			}
			return n, nil
		}},
		{name: "redis", yaml: redisCoordYAML(redis.Addr(), "ontime"), requests: func() (float64, error) {
			out, err := exec.Command("redis-cli", "-u", "redis://"+redis.Addr(), "info", "stats").Output()
			if err != nil {
				return 0, err
			}
			return infoField(string(out), "total_commands_processed:")
		}},
		{name: "zookeeper", yaml: zkCoordYAML(zk), requests: func() (float64, error) {
			out, err := testdb.ZooKeeperCommand(zk, "mntr")
			if err != nil {
				return 0, err
			}
			return infoField(out, "zk_packets_received")
		}},
	}
}

// infoField reads the number after name in a "name:value" or
// "name\tvalue" line.
func infoField(out, name string) (float64, error) {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, name) {
			return strconv.ParseFloat(strings.TrimSpace(strings.TrimLeft(strings.TrimPrefix(l, name), ":\t ")), 64)
		}
	}
	return 0, fmt.Errorf("no %s in %q", name, out)
}

// TestFailoverTimes measures, per coordinator, the failover of a 3-node
// cluster (`ontime serve` processes on PostgreSQL, cluster.lease_ttl 2s,
// or ONTIME_CHAOS_FAILOVER_TTL): the leader killed with SIGKILL, the time until
// no item is its (reassigned, read on a survivor's /v1/cluster every
// 20 ms), until the first task delivered more than half a TTL late (the
// first delivery of a moved item: tasks are due 500 ms after the kill), and until every task due then is delivered; p50/p99 over ONTIME_CHAOS_FAILOVER_ROUNDS rounds (the killed node
// restarts between rounds). Then the coordinator's idle load: requests per
// second its server answers, per node, the cluster idle for 20 s. It
// prints figures and asserts no timing; it runs only when
// ONTIME_CHAOS_FAILOVER_ROUNDS is set:
//
//	ONTIME_CHAOS_FAILOVER_ROUNDS=20 go test -run TestFailoverTimes -v -timeout 60m ./e2e/
func TestFailoverTimes(t *testing.T) {
	rounds, _ := strconv.Atoi(os.Getenv("ONTIME_CHAOS_FAILOVER_ROUNDS"))
	if rounds <= 0 {
		t.Skip("ONTIME_CHAOS_FAILOVER_ROUNDS is not set")
	}
	ttl := cmpOr(os.Getenv("ONTIME_CHAOS_FAILOVER_TTL"), "2s")
	only := os.Getenv("ONTIME_CHAOS_FAILOVER_ONLY")
	var lines []string
	for _, c := range failoverCoordinators(t) {
		if only != "" && !slices.Contains(strings.Split(only, ","), c.name) {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			line := failoverRounds(t, c, rounds, ttl)
			lines = append(lines, line)
		})
	}
	for _, l := range lines {
		t.Log(l)
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func failoverRounds(t *testing.T, c coordinatorUnderTest, rounds int, ttl string) string {
	yaml, _ := chaosYAML("postgres", testdb.DSNs(t, "postgres", 1), "")
	yaml = strings.Replace(yaml, "lease_ttl: 2s\ndelivery", "lease_ttl: "+ttl+"\ndelivery", 1)
	yaml = withCoordinator(yaml, c.yaml)
	cfg := writeChaosConfig(t, t.TempDir(), yaml)
	rcv := newChaosReceiver(t, nil)
	leaseTTL, err := time.ParseDuration(ttl)
	if err != nil {
		t.Fatalf("ONTIME_CHAOS_FAILOVER_TTL: %v", err)
	}
	cl := startChaosCluster(t, cfg, 3)
	load := newChaosLoad(t, "failover-"+c.name, rcv.srv.URL, cl.addrs...)
	var reassigned, first, all []time.Duration
	for r := range rounds {
		v, ok := clusterView(t, cl.addrs[0])
		if !ok || v.Leader == "" {
			t.Fatalf("round %d: no leader: %+v", r, v)
		}
		victim := slices.Index(cl.names, v.Leader)
		survivor := cl.addrs[(victim+1)%3]
		// Tasks due half a second after the kill, over every item (the
		// victim has them in its hot tier by then): the dead leader's are
		// delivered once its items moved and their new owner scanned them.
		kill := time.Now().Add(1500 * time.Millisecond).Round(0)
		due := kill.Add(500 * time.Millisecond)
		dues := make([]time.Time, 240)
		for i := range dues {
			dues[i] = due.Add(time.Duration(i) * 100 * time.Microsecond)
		}
		before := load.submitted()
		load.submit(t.Context(), dues)
		time.Sleep(time.Until(kill))
		load.setDown(victim, true)
		cl.kill9(victim)
		killed := time.Now()
		var moved time.Duration
		waitFor(t, 60*time.Second, "the dead leader's items reassigned", func() bool {
			v, ok := clusterView(t, survivor)
			if !ok {
				return false
			}
			for _, it := range v.Items {
				if it.Owner == cl.names[victim] {
					return false
				}
			}
			moved = time.Since(killed)
			return true
		})
		waitFor(t, 60*time.Second, "every task of the round delivered", func() bool {
			return int(rcv.delivered.Load()) >= before+len(dues)
		})
		// The round's tasks, by first delivery.
		var times []time.Time
		rcv.mu.Lock()
		load.mu.Lock()
		for id, d := range load.due {
			if d.Before(kill) || due.After(kill.Add(2*time.Second)) {
				continue
			}
			if rec := rcv.recs[id]; rec != nil && !rec.firstOK.IsZero() {
				times = append(times, rec.firstOK)
			}
		}
		load.mu.Unlock()
		rcv.mu.Unlock()
		slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
		var late time.Time // zero: none late (the victim owned none of them)
		for _, at := range times {
			// Later than half a lease TTL: no item of the dead node's moves
			// sooner (it fences itself at 2/3 TTL), and a loaded machine's
			// ordinary delays stay below it.
			if at.Sub(due) > leaseTTL/2 {
				late = at
				break
			}
		}
		reassigned = append(reassigned, moved)
		if !late.IsZero() {
			first = append(first, late.Sub(killed))
		}
		all = append(all, times[len(times)-1].Sub(killed))
		firstLate := "none"
		if !late.IsZero() {
			firstLate = late.Sub(killed).Round(time.Millisecond).String()
		}
		// The kill's wall time (UTC), to line the nodes' logs up with it
		// (ONTIME_CHAOS_LOGS, ONTIME_CHAOS_LOG_LEVEL=info).
		t.Logf("round %d: %s killed at %s; reassigned after %s, first late delivery %s, all delivered %s", r+1, cl.names[victim],
			killed.UTC().Format("15:04:05.000"), moved.Round(time.Millisecond), firstLate, times[len(times)-1].Sub(killed).Round(time.Millisecond))
		cl.restart(victim)
		load.setDown(victim, false)
		waitFor(t, 60*time.Second, "nodes balanced again", func() bool {
			v, ok := clusterView(t, cl.addrs[0])
			return ok && balanced(v, cl.names)
		})
		waitFor(t, 60*time.Second, "items handed over", func() bool { return cl.scanned() == 12 })
	}
	idle := "not measured"
	if c.requests != nil {
		const window = 20 * time.Second
		a, err := c.requests()
		if err == nil {
			time.Sleep(window)
			var b float64
			if b, err = c.requests(); err == nil {
				idle = fmt.Sprintf("%.1f requests/s per node", (b-a)/window.Seconds()/3)
			}
		}
		if err != nil {
			idle = "error: " + err.Error()
		}
	}
	return fmt.Sprintf("failover %-9s lease_ttl %s, %d rounds: reassigned p50 %s p99 %s; first moved delivery p50 %s p99 %s (%d rounds with one); all delivered p50 %s p99 %s; idle load %s; load average %s",
		c.name, ttl, rounds, failPct(reassigned, 50), failPct(reassigned, 99), failPct(first, 50), failPct(first, 99), len(first), failPct(all, 50), failPct(all, 99), idle, loadAvg())
}

// failPct is the p-th percentile of ds (nearest rank), "-" when empty.
func failPct(ds []time.Duration, p int) string {
	if len(ds) == 0 {
		return "-"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(0, min(len(s)-1, i-1))].Round(time.Millisecond).String()
}
