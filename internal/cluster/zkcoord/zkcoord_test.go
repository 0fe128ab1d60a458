package zkcoord

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ontimehq/ontime/internal/cluster"
	"github.com/ontimehq/ontime/internal/cluster/coordtest"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/testdb"
)

var _ cluster.Coordinator = (*Coordinator)(nil)

// zkCluster is a prefix of its own on the test's ZooKeeper; each node
// reaches the server through a proxy of its own, which Cut pauses.
type zkCluster struct {
	server, prefix string
}

type zkNode struct {
	*Coordinator
	proxy *testdb.Proxy
}

func (c *zkCluster) New(t *testing.T, cfg cluster.NodeConfig) coordtest.Node {
	p := testdb.NewProxy(t, c.server)
	co, err := New(context.Background(), Config{Servers: []string{p.Addr()}, Prefix: c.prefix, NodeConfig: cfg})
	if err != nil {
		t.Fatal(err)
	}
	return &zkNode{Coordinator: co, proxy: p}
}

func (c *zkCluster) Join(t *testing.T, id string) {
	conn, _, err := zk.Connect([]string{c.server}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Persistent: b stays a member for the rest of the test.
	if _, err := conn.Create(c.prefix+"/nodes/"+id, []byte(cluster.EncodeMember(cluster.Member{Addr: id + ":7070"})), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
}

func (n *zkNode) Grants(ctx context.Context) (map[string]store.Grant, error) {
	all, _, err := n.assignment()
	return all, err
}

// Crash: the process dies; its connection goes, its session times out.
func (n *zkNode) Crash() {
	n.proxy.Down()
	n.Stop()
}

func (n *zkNode) Cut()  { n.proxy.Pause() }
func (n *zkNode) Heal() { n.proxy.Resume() }

func (n *zkNode) WriteAs(ctx context.Context, term int64, grants map[string]store.Grant) (bool, error) {
	cur, version, err := n.assignment()
	if err != nil {
		return false, err
	}
	return n.writeAssignment(term, cur, version, grants, nil)
}

func TestContract(t *testing.T) {
	server := testdb.StartZooKeeper(t)
	coordtest.Run(t, func(t *testing.T) coordtest.Cluster {
		return &zkCluster{server: server, prefix: "/" + strings.ReplaceAll(t.Name(), "/", "_")}
	})
}

// TestReactions: changes are followed at once (watches), not at the
// rounds' next tick.
func TestReactions(t *testing.T) {
	server := testdb.StartZooKeeper(t)
	coordtest.RunReactions(t, func(t *testing.T) coordtest.Cluster {
		return &zkCluster{server: server, prefix: "/" + strings.ReplaceAll(t.Name(), "/", "_")}
	})
}

func TestConfigValidation(t *testing.T) {
	ctx := context.Background()
	server := testdb.StartZooKeeper(t)
	srv := []string{"127.0.0.1:1"}
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "cluster.zookeeper_servers"},
		{Config{Servers: []string{"nohost"}}, "cluster.zookeeper_servers[0]"},
		{Config{Servers: srv, Prefix: "ontime"}, "cluster.zookeeper_prefix"},
		{Config{Servers: srv, Prefix: "/ontime/"}, "cluster.zookeeper_prefix"},
		{Config{Servers: srv, Username: "u"}, "cluster.zookeeper_username"},
		{Config{Servers: srv}, "node_id"},
		{Config{Servers: srv, NodeConfig: cluster.NodeConfig{NodeID: "a/b"}}, "node_id"},
		{Config{Servers: srv, NodeConfig: cluster.NodeConfig{NodeID: "a", TTL: 100 * time.Millisecond}}, "cluster.lease_ttl"},
		{Config{Servers: srv, NodeConfig: cluster.NodeConfig{NodeID: "a"}}, "cluster.zookeeper_servers"}, // unreachable
		// The test server grants at most 60s.
		{Config{Servers: []string{server}, NodeConfig: cluster.NodeConfig{NodeID: "a", TTL: 90 * time.Second}}, "cluster.lease_ttl"},
	} {
		if _, err := New(ctx, c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error naming %s", c.cfg, err, c.want)
		}
	}
}

// TestDigestAuth: with a username and password the znodes are the
// identity's alone: a client without them cannot read the assignment.
func TestDigestAuth(t *testing.T) {
	server := testdb.StartZooKeeper(t)
	c, err := New(context.Background(), Config{Servers: []string{server}, Prefix: "/auth", Username: "ontime", Password: "s3cret",
		NodeConfig: cluster.NodeConfig{NodeID: "a", TTL: 2 * time.Second, Items: []string{"0.0.0"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	conn, _, err := zk.Connect([]string{server}, 10*time.Second, zk.WithLogInfo(false), zk.WithDialer(net.DialTimeout))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, _, err := conn.Get("/auth/assign"); err == nil {
		t.Fatal("a client without credentials read the assignment")
	}
}
