package etcdcoord

import (
	"context"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ontimehq/ontime/internal/cluster"
	"github.com/ontimehq/ontime/internal/cluster/coordtest"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/testdb"
	"github.com/ontimehq/ontime/internal/testdb/testetcd"
)

var _ cluster.Coordinator = (*Coordinator)(nil)

// etcdCluster is a key prefix of its own on the test's etcd; each node
// reaches etcd through a proxy of its own, which Cut pauses.
type etcdCluster struct {
	endpoint, prefix string
}

type etcdNode struct {
	*Coordinator
	proxy *testdb.Proxy
}

func (c *etcdCluster) New(t *testing.T, cfg cluster.NodeConfig) coordtest.Node {
	p := testdb.NewProxy(t, c.endpoint)
	co, err := New(context.Background(), Config{Endpoints: []string{p.Addr()}, Prefix: c.prefix, NodeConfig: cfg})
	if err != nil {
		t.Fatal(err)
	}
	return &etcdNode{Coordinator: co, proxy: p}
}

func (c *etcdCluster) Join(t *testing.T, id string) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{c.endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Put(context.Background(), c.prefix+"/nodes/"+id, cluster.EncodeMember(cluster.Member{Addr: id + ":7070"})); err != nil {
		t.Fatal(err)
	}
}

func (n *etcdNode) Grants(ctx context.Context) (map[string]store.Grant, error) {
	return n.assignment(ctx)
}

// Crash: the process dies; its connections go, its lease runs out.
func (n *etcdNode) Crash() {
	n.proxy.Down()
	n.cli.Close()
	n.Stop()
}

func (n *etcdNode) Cut()  { n.proxy.Pause() }
func (n *etcdNode) Heal() { n.proxy.Resume() }

func (n *etcdNode) WriteAs(ctx context.Context, term int64, grants map[string]store.Grant) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return n.writeAssignment(ctx, term, grants, nil)
}

func TestContract(t *testing.T) {
	endpoint := testetcd.Start(t)
	coordtest.Run(t, func(t *testing.T) coordtest.Cluster {
		return &etcdCluster{endpoint: endpoint, prefix: "/" + strings.ReplaceAll(t.Name(), "/", "_")}
	})
}

// TestReactions: changes are followed at once (watches), not at the
// rounds' next tick.
func TestReactions(t *testing.T) {
	endpoint := testetcd.Start(t)
	coordtest.RunReactions(t, func(t *testing.T) coordtest.Cluster {
		return &etcdCluster{endpoint: endpoint, prefix: "/" + strings.ReplaceAll(t.Name(), "/", "_")}
	})
}

func TestConfigValidation(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "cluster.etcd_endpoints"},
		{Config{Endpoints: []string{"127.0.0.1:1"}}, "node_id"},
		{Config{Endpoints: []string{"127.0.0.1:1"}, NodeConfig: cluster.NodeConfig{NodeID: "a/b"}}, "node_id"},
		{Config{Endpoints: []string{"127.0.0.1:1"}, NodeConfig: cluster.NodeConfig{NodeID: "a", TTL: time.Millisecond}}, "cluster.lease_ttl"},
		{Config{Endpoints: []string{"127.0.0.1:1"}, NodeConfig: cluster.NodeConfig{NodeID: "a"}}, "cluster.etcd_endpoints"}, // unreachable
	} {
		if _, err := New(ctx, c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error naming %s", c.cfg, err, c.want)
		}
	}
}

// TestStopClosesTheClient: a stopped coordinator does not start again,
// and Stop before Start closes the client too.
func TestStopClosesTheClient(t *testing.T) {
	endpoint := testetcd.Start(t)
	c, err := New(context.Background(), Config{Endpoints: []string{endpoint}, Prefix: "/t2", NodeConfig: cluster.NodeConfig{NodeID: "idle", Items: []string{"x"}}})
	if err != nil {
		t.Fatal(err)
	}
	c.Stop()
	if err := c.Start(context.Background()); err == nil {
		t.Error("a stopped coordinator started again")
	}
	if _, err := c.cli.Get(context.Background(), "/t2/probe"); err == nil {
		t.Error("Stop before Start left the client open")
	}
}
