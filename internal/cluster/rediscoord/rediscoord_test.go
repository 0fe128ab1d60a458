package rediscoord

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/ontimehq/ontime/internal/cluster"
	"github.com/ontimehq/ontime/internal/cluster/clustertest"
	"github.com/ontimehq/ontime/internal/cluster/coordtest"
	hotredis "github.com/ontimehq/ontime/internal/hot/redis"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/testdb"
)

var _ cluster.Coordinator = (*Coordinator)(nil)

// redisCluster is a key prefix of its own on a Redis (single, Sentinel or
// Cluster); its keys are deleted when the test ends.
type redisCluster struct {
	client hotredis.ClientConfig
	prefix string
}

// gate puts a proxy of a node's own in front of every Redis address the
// node dials (Sentinel, master, cluster nodes), so that Cut pauses all of
// that node's traffic and none of the others'.
type gate struct {
	t       *testing.T
	mu      sync.Mutex
	proxies map[string]*testdb.Proxy
	cut     bool
	down    bool
}

func (g *gate) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	g.mu.Lock()
	p, ok := g.proxies[addr]
	if !ok {
		p = testdb.NewProxy(g.t, addr)
		g.proxies[addr] = p
		if g.cut {
			p.Pause()
		}
		if g.down {
			p.Down()
		}
	}
	g.mu.Unlock()
	var d net.Dialer
	return d.DialContext(ctx, network, p.Addr())
}

func (g *gate) each(f func(p *testdb.Proxy)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, p := range g.proxies {
		f(p)
	}
}

type redisNode struct {
	*Coordinator
	gate *gate
}

func (c *redisCluster) New(t *testing.T, cfg cluster.NodeConfig) coordtest.Node {
	g := &gate{t: t, proxies: map[string]*testdb.Proxy{}}
	co, err := New(context.Background(), Config{ClientConfig: c.client, Prefix: c.prefix, NodeConfig: cfg, dial: g.dial})
	if err != nil {
		t.Fatal(err)
	}
	return &redisNode{Coordinator: co, gate: g}
}

func (c *redisCluster) Join(t *testing.T, id string) {
	rdb := goredis.NewUniversalClient(c.client.Options())
	defer rdb.Close()
	ctx := context.Background()
	p := "{" + c.prefix + "}:coord:"
	if err := rdb.ZAdd(ctx, p+"members", goredis.Z{Score: float64(time.Now().Add(time.Hour).UnixMilli()), Member: id}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctx, p+"info", id, cluster.EncodeMember(cluster.Member{Addr: id + ":7070"})).Err(); err != nil {
		t.Fatal(err)
	}
}

func (n *redisNode) Grants(ctx context.Context) (map[string]store.Grant, error) {
	return n.assignment(ctx)
}

// Crash: the process dies: its connections go, no goodbye reaches Redis.
func (n *redisNode) Crash() {
	n.gate.mu.Lock()
	n.gate.down = true
	n.gate.mu.Unlock()
	n.gate.each(func(p *testdb.Proxy) { p.Down() })
	n.Stop()
}

func (n *redisNode) Cut() {
	n.gate.mu.Lock()
	n.gate.cut = true
	n.gate.mu.Unlock()
	n.gate.each(func(p *testdb.Proxy) { p.Pause() })
}

func (n *redisNode) Heal() {
	n.gate.mu.Lock()
	n.gate.cut = false
	n.gate.mu.Unlock()
	n.gate.each(func(p *testdb.Proxy) { p.Resume() })
}

func (n *redisNode) WriteAs(ctx context.Context, term int64, grants map[string]store.Grant) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return n.writeAssignment(ctx, term, grants, nil)
}

// backend makes clusters on the Redis client reaches, each under a prefix
// of its own, deleted after the test.
func backend(client hotredis.ClientConfig) coordtest.Backend {
	return func(t *testing.T) coordtest.Cluster {
		c := &redisCluster{client: client, prefix: testdb.Unique("ontime_t_")}
		t.Cleanup(func() {
			rdb := goredis.NewUniversalClient(client.Options())
			defer rdb.Close()
			p := "{" + c.prefix + "}:coord:"
			rdb.Del(context.Background(), p+"members", p+"info", p+"leader", p+"term", p+"assign")
		})
		return c
	}
}

// TestContract: a single Redis, the suite's shared server (its own keys).
func TestContract(t *testing.T) {
	coordtest.Run(t, backend(hotredis.ClientConfig{Addrs: []string{testdb.RedisURL()}}))
}

// TestContractSentinel: through Redis Sentinel, which names the master.
func TestContractSentinel(t *testing.T) {
	sentinel, master, _ := testdb.StartRedisSentinel(t, 0)
	coordtest.Run(t, backend(hotredis.ClientConfig{Addrs: []string{sentinel}, MasterName: master}))
}

// TestSentinelFailover: the master dies (SIGKILL) and Sentinel promotes
// its replica. Meanwhile no node can renew its lease, so each lets go of
// its items; once the clients follow Sentinel to the new master the
// cluster owns every item again, led under a term no lower than before
// (the replica had the leader key and the counter: the leader waited for
// it, WAIT 1), and no item ever had two owners (the ledger).
func TestSentinelFailover(t *testing.T) {
	sentinel, master, m := testdb.StartRedisSentinel(t, 1)
	client := hotredis.ClientConfig{Addrs: []string{sentinel}, MasterName: master}
	rc := backend(client)(t).(*redisCluster)
	ledger := coordtest.NewLedger(t)
	items := []string{"0.0.0", "0.0.1", "0.1.0", "0.1.1", "0.2.0", "0.2.1"}
	var nodes []*redisNode
	var recs []*clustertest.Recorder
	for _, id := range []string{"a", "b"} {
		rec := &clustertest.Recorder{ID: id}
		n := rc.New(t, cluster.NodeConfig{NodeID: id, Addr: id + ":7070", TTL: 2 * time.Second, Items: items,
			OnAssign: ledger.OnAssign(id, rec), HandOverAtOnce: func(string) bool { return true }}).(*redisNode)
		if err := n.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(n.Stop)
		nodes, recs = append(nodes, n), append(recs, rec)
	}
	clustertest.WaitBalanced(t, recs, items, 30*time.Second)
	before, err := nodes[0].Status(context.Background())
	if err != nil || before.Term < 1 {
		t.Fatalf("status %+v %v", before, err)
	}
	killed := time.Now()
	m.Stop()
	sc := goredis.NewSentinelClient(&goredis.Options{Addr: sentinel})
	defer sc.Close()
	for {
		addr, err := sc.GetMasterAddrByName(context.Background(), master).Result()
		if err == nil && net.JoinHostPort(addr[0], addr[1]) != m.Addr() {
			t.Logf("Sentinel promoted %s after %s", net.JoinHostPort(addr[0], addr[1]), time.Since(killed).Round(time.Millisecond))
			break
		}
		if time.Since(killed) > 60*time.Second {
			t.Fatalf("Sentinel promoted no replica within 60s: %v %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	clustertest.WaitBalanced(t, recs, items, 60*time.Second)
	dropped := 0
	for _, ev := range ledger.Events() {
		if ev.At.After(killed) {
			dropped += len(ev.Lost)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		after, err := nodes[0].Status(context.Background())
		if err == nil && after.Leader != "" && after.Term >= before.Term {
			t.Logf("master killed: a leader under term %d (was %d), every item owned, %s later; %d items let go meanwhile", after.Term, before.Term,
				time.Since(killed).Round(time.Millisecond), dropped)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the failover: %+v %v; before: term %d", after, err, before.Term)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestContractCluster: on a 3-master Redis Cluster; every key under the
// prefix's hash tag, so each script runs on one shard.
func TestContractCluster(t *testing.T) {
	coordtest.Run(t, backend(hotredis.ClientConfig{Addrs: testdb.StartRedisCluster(t)}))
}

func TestConfigValidation(t *testing.T) {
	ctx := context.Background()
	addrs := hotredis.ClientConfig{Addrs: []string{"127.0.0.1:6379"}}
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "cluster.redis_addrs"},
		{Config{ClientConfig: hotredis.ClientConfig{Addrs: []string{"nohost"}}}, "cluster.redis_addrs[0]"},
		{Config{ClientConfig: hotredis.ClientConfig{Addrs: []string{"http://x"}}}, "cluster.redis_addrs[0]"},
		{Config{ClientConfig: addrs, Prefix: "{x}"}, "cluster.redis_prefix"},
		{Config{ClientConfig: addrs}, "node_id"},
		{Config{ClientConfig: addrs, NodeConfig: cluster.NodeConfig{NodeID: "a|b"}}, "node_id"},
		{Config{ClientConfig: addrs, NodeConfig: cluster.NodeConfig{NodeID: "a", TTL: time.Millisecond}}, "cluster.lease_ttl"},
		{Config{ClientConfig: hotredis.ClientConfig{Addrs: []string{"127.0.0.1:1"}}, NodeConfig: cluster.NodeConfig{NodeID: "a"}}, "cluster.redis_addrs"},
	} {
		if _, err := New(ctx, c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error naming %s", c.cfg, err, c.want)
		}
	}
}

// TestTermOnlyGrows: the fencing token never goes back, even when Redis
// lost its counter (a failover to a replica that had not seen the last
// INCR): the next term is above every term the assignment was written
// under.
func TestTermOnlyGrows(t *testing.T) {
	b := backend(hotredis.ClientConfig{Addrs: []string{testdb.RedisURL()}})
	rc := b(t).(*redisCluster)
	n := rc.New(t, cluster.NodeConfig{NodeID: "a", TTL: time.Second, Items: []string{"0.0.0"}}).(*redisNode)
	ctx := context.Background()
	term, err := n.lead(ctx)
	if err != nil || term < 1 {
		t.Fatalf("term %d, %v", term, err)
	}
	if held, err := n.writeAssignment(ctx, term+40, map[string]store.Grant{"0.0.0": {Node: "a", Since: time.Now(), Term: term + 40}}, nil); err != nil || held {
		t.Fatalf("a write under a term the node does not hold: held %v, %v", held, err)
	}
	if err := n.rdb.HSet(ctx, n.keys.assign, "0.0.0", cluster.GrantValue(store.Grant{Node: "a", Since: time.Now(), Term: term + 40})).Err(); err != nil {
		t.Fatal(err)
	}
	if err := n.rdb.Del(ctx, n.keys.leader, n.keys.term).Err(); err != nil {
		t.Fatal(err)
	}
	n.mu.Lock()
	n.term = 0
	n.mu.Unlock()
	again, err := n.lead(ctx)
	if err != nil || again <= term+40 {
		t.Fatalf("term after the counter was lost: %d (%v), the assignment holds %d", again, err, term+40)
	}
	n.Stop()
}
