package dbcoord

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/cluster"
	"github.com/ontimehq/ontime/internal/cluster/coordtest"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/store/sqlstore"
	"github.com/ontimehq/ontime/internal/testdb"
)

var (
	_ Store               = (*sqlstore.Store)(nil)
	_ cluster.Coordinator = (*Coordinator)(nil)
)

// openStore opens the task store of one node; every node of a test opens
// its own on the same database, as processes do.
func openStore(t *testing.T, engine, dsn string) *sqlstore.Store {
	t.Helper()
	st, err := sqlstore.Open(context.Background(), sqlstore.Config{Driver: engine, DSNs: []string{dsn}, Tables: 1, Segments: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// startCoordinator starts a coordinator of node id on st, stopped when
// the test ends.
func startCoordinator(t *testing.T, st Store, id string, items []string, ttl time.Duration, onAssign func(int64, []string)) *Coordinator {
	t.Helper()
	c, err := New(Config{Store: st, NodeConfig: cluster.NodeConfig{NodeID: id, Addr: "127.0.0.1:0", TTL: ttl, Items: items,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil)), OnAssign: onAssign,
		HandOverAtOnce: func(string) bool { return true }}}) // items like the task tables
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

// dbCluster is one database the suite's nodes coordinate through, each
// node with a store of its own behind a switch (cutStore).
type dbCluster struct {
	engine, dsn string
}

// dbNode is a node under the contract suite.
type dbNode struct {
	*Coordinator
	real *sqlstore.Store
	st   *cutStore
}

func (c *dbCluster) New(t *testing.T, cfg cluster.NodeConfig) coordtest.Node {
	n := &dbNode{real: openStore(t, c.engine, c.dsn)}
	n.st = &cutStore{Store: n.real}
	co, err := New(Config{Store: n.st, NodeConfig: cfg})
	if err != nil {
		t.Fatal(err)
	}
	n.Coordinator = co
	return n
}

func (c *dbCluster) Join(t *testing.T, id string) {
	st := openStore(t, c.engine, c.dsn)
	now := time.Now()
	if err := st.Heartbeat(context.Background(), id, id+":7070", nil, store.Process{Started: now}, now); err != nil {
		t.Fatal(err)
	}
}

func (n *dbNode) Grants(ctx context.Context) (map[string]store.Grant, error) {
	return n.real.Assignment(ctx)
}

// Crash: the process dies, its connections with it (every later query
// fails), no goodbye.
func (n *dbNode) Crash() {
	n.st.down.Store(true)
	n.real.Close()
	n.Stop()
}

func (n *dbNode) Cut()  { n.st.down.Store(true) }
func (n *dbNode) Heal() { n.st.down.Store(false) }

func (n *dbNode) WriteAs(ctx context.Context, term int64, grants map[string]store.Grant) (bool, error) {
	return n.st.WriteAssignment(ctx, store.LeaderLease{Node: n.Cfg.NodeID, Term: term, Until: n.Now().Add(n.Cfg.TTL)}, grants, nil)
}

// TestContract holds the database coordinator to the contract on every
// engine.
func TestContract(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			coordtest.Run(t, func(t *testing.T) coordtest.Cluster {
				return &dbCluster{engine: engine, dsn: testdb.DSNs(t, engine, 1)[0]}
			})
		})
	}
}

func TestConfigValidation(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Fatal("nil Store accepted")
	}
	st := openStore(t, "sqlite", testdb.SQLite(t))
	for _, c := range []struct {
		cfg  cluster.NodeConfig
		want string
	}{
		{cluster.NodeConfig{}, "node_id"},
		{cluster.NodeConfig{NodeID: strings.Repeat("x", 129)}, "node_id"},
		{cluster.NodeConfig{NodeID: "a", TTL: time.Millisecond}, "cluster.lease_ttl"},
	} {
		if _, err := New(Config{Store: st, NodeConfig: c.cfg}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error naming %s", c.cfg, err, c.want)
		}
	}
}

func TestStopBeforeStart(t *testing.T) {
	st := openStore(t, "sqlite", testdb.SQLite(t))
	c, err := New(Config{Store: st, NodeConfig: cluster.NodeConfig{NodeID: "a", Items: []string{"x"}}})
	if err != nil {
		t.Fatal(err)
	}
	c.Stop()
	c.Stop()
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
