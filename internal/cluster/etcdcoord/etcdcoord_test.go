package etcdcoord

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/cluster"
	"github.com/ontimehq/ontime/internal/cluster/clustertest"
	"github.com/ontimehq/ontime/internal/testdb/testetcd"
)

var _ cluster.Coordinator = (*Coordinator)(nil)

type node struct {
	*clustertest.Recorder
	c *Coordinator
}

func startNode(t *testing.T, endpoint, prefix, id string, items []string) *node {
	t.Helper()
	return startNodeTTL(t, endpoint, prefix, id, items, 2*time.Second)
}

func startNodeTTL(t *testing.T, endpoint, prefix, id string, items []string, ttl time.Duration) *node {
	t.Helper()
	rec := &clustertest.Recorder{ID: id}
	c, err := New(context.Background(), Config{Endpoints: []string{endpoint}, Prefix: prefix, NodeID: id, Addr: id + ":7070",
		TTL: ttl, Items: items, OnAssign: rec.OnAssign, HandOverAtOnce: func(string) bool { return true }})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return &node{Recorder: rec, c: c}
}

// crash: the process dies; its client connection goes, its lease expires.
func (n *node) crash() {
	n.c.cli.Close()
	n.c.Stop()
}

func recs(ns []*node) []*clustertest.Recorder {
	out := make([]*clustertest.Recorder, len(ns))
	for i, n := range ns {
		out[i] = n.Recorder
	}
	return out
}

func TestElectAssignFailover(t *testing.T) {
	endpoint := testetcd.Start(t)
	items := make([]string, 48)
	for i := range items {
		items[i] = fmt.Sprintf("0.%d.%d", i/4, i%4)
	}
	a := startNode(t, endpoint, "/t1", "a", items)
	b := startNode(t, endpoint, "/t1", "b", items)
	c := startNode(t, endpoint, "/t1", "c", items)
	all := []*node{a, b, c}
	clustertest.WaitBalanced(t, recs(all), items, 30*time.Second)
	st, err := a.c.Status(context.Background())
	if err != nil || st.Leader == "" || st.Term == 0 || len(st.Nodes) != 3 {
		t.Fatalf("status %+v %v", st, err)
	}
	var leader *node
	var rest []*node
	for _, n := range all {
		if n.ID == st.Leader {
			leader = n
		} else {
			rest = append(rest, n)
		}
	}
	killed := time.Now()
	leader.crash()
	clustertest.WaitBalanced(t, recs(rest), items, 30*time.Second)
	t.Logf("leader killed: items balanced on the survivors after %s", time.Since(killed).Round(time.Millisecond))
	st2, err := rest[0].c.Status(context.Background())
	if err != nil || st2.Leader == "" || st2.Leader == leader.ID || st2.Term <= st.Term {
		t.Fatalf("after leader death: %+v %v (was leader %s term %d)", st2, err, st.Leader, st.Term)
	}
	before := map[string][]string{}
	for _, n := range rest {
		before[n.ID] = n.Owned()
	}
	d := startNode(t, endpoint, "/t1", "d", items)
	clustertest.WaitBalanced(t, recs(append(rest, d)), items, 30*time.Second)
	clustertest.KeptOnJoin(t, before, recs(rest))
}

func TestConfigValidation(t *testing.T) {
	ctx := context.Background()
	for _, c := range []Config{
		{},
		{Endpoints: []string{"127.0.0.1:1"}},
		{Endpoints: []string{"127.0.0.1:1"}, NodeID: "a/b"},
		{Endpoints: []string{"127.0.0.1:1"}, NodeID: "a", TTL: time.Millisecond},
		{Endpoints: []string{"127.0.0.1:1"}, NodeID: "a"}, // unreachable
	} {
		if _, err := New(ctx, c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

// TestStopConcurrent: Stop called from several goroutines at once returns
// in each only once the node has left — its items handed back, its
// session revoked, its client closed — and the survivor takes every item
// without waiting for the session's TTL. A stopped coordinator does not
// start again; Stop before Start closes the client.
func TestStopConcurrent(t *testing.T) {
	endpoint := testetcd.Start(t)
	items := make([]string, 16)
	for i := range items {
		items[i] = fmt.Sprintf("0.%d.0", i)
	}
	a := startNode(t, endpoint, "/t2", "a", items)
	b := startNode(t, endpoint, "/t2", "b", items)
	clustertest.WaitBalanced(t, recs([]*node{a, b}), items, 30*time.Second)

	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.c.Stop()
			if got := a.Owned(); len(got) != 0 {
				t.Errorf("Stop returned while the node still owns %d items", len(got))
			}
		}()
	}
	wg.Wait()
	a.c.Stop()
	if err := a.c.Start(context.Background()); err == nil {
		t.Error("a stopped coordinator started again")
	}
	// The session's TTL is 2s: within it only because a's session was
	// revoked.
	clustertest.WaitBalanced(t, recs([]*node{b}), items, 1500*time.Millisecond)
	st, err := b.c.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Leader == "a" || len(st.Nodes) != 1 || st.Nodes[0].ID != "b" {
		t.Errorf("after a stopped: %+v", st)
	}

	idle, err := New(context.Background(), Config{Endpoints: []string{endpoint}, Prefix: "/t2", NodeID: "idle", Items: items})
	if err != nil {
		t.Fatal(err)
	}
	idle.Stop()
	if _, err := idle.cli.Get(context.Background(), "/t2/probe"); err == nil {
		t.Error("Stop before Start left the client open")
	}
}

// TestHandlersFollowTheMembership: each node's membership key carries the
// topics it has Go handlers for; every node sees which live nodes handle a
// topic, and a node whose session ends drops out.
func TestHandlersFollowTheMembership(t *testing.T) {
	endpoint := testetcd.Start(t)
	start := func(id string, topics ...string) *Coordinator {
		c, err := New(context.Background(), Config{Endpoints: []string{endpoint}, Prefix: "/th", NodeID: id, Addr: id + ":7070",
			TTL: time.Second, Items: []string{"0.0.0"}, Topics: func() []string { return topics }})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Stop)
		return c
	}
	a, b := start("a"), start("b", "orders", "mail")
	for _, c := range []*Coordinator{a, b} {
		clustertest.WaitHandlers(t, c.Handlers(), "orders", []string{"b"}, 10*time.Second)
		clustertest.WaitHandlers(t, c.Handlers(), "mail", []string{"b"}, 10*time.Second)
	}
	st, err := a.Status(context.Background())
	if err != nil || len(st.Nodes) != 2 || st.Nodes[1].Addr != "b:7070" || len(st.Nodes[1].Topics) != 2 {
		t.Fatalf("status %+v %v", st, err)
	}
	b.Stop()
	clustertest.WaitHandlers(t, a.Handlers(), "orders", nil, 10*time.Second)
}
