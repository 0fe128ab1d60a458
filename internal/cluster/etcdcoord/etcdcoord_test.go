package etcdcoord

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/cluster/clustertest"
	"github.com/ontimehq/ontime/internal/testdb/testetcd"
)

type node struct {
	*clustertest.Recorder
	c      *Coordinator
	cancel context.CancelFunc
	done   chan struct{}
}

func startNode(t *testing.T, endpoint, prefix, id string, items []string) *node {
	t.Helper()
	rec := &clustertest.Recorder{ID: id}
	c, err := New(context.Background(), Config{Endpoints: []string{endpoint}, Prefix: prefix, NodeID: id, Addr: id + ":7070",
		TTL: 2 * time.Second, Items: items, OnAssign: rec.OnAssign})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &node{Recorder: rec, c: c, cancel: cancel, done: make(chan struct{})}
	go func() { defer close(n.done); _ = c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-n.done; c.Close() })
	return n
}

// crash: the process dies; its client connection goes, its lease expires.
func (n *node) crash() {
	n.c.Close()
	n.cancel()
	<-n.done
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
	recs := func(ns []*node) []*clustertest.Recorder {
		out := make([]*clustertest.Recorder, len(ns))
		for i, n := range ns {
			out[i] = n.Recorder
		}
		return out
	}
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
