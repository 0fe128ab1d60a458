package dbcoord

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/cluster"
	"github.com/ontimehq/ontime/internal/cluster/clustertest"
	"github.com/ontimehq/ontime/internal/store/sqlstore"
	"github.com/ontimehq/ontime/internal/testdb"
)

var (
	_ Store               = (*sqlstore.Store)(nil)
	_ cluster.Coordinator = (*Coordinator)(nil)
)

type node struct {
	*clustertest.Recorder
	st *sqlstore.Store
	c  *Coordinator
}

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

func startNode(t *testing.T, engine, dsn, id string, items []string, ttl time.Duration) *node {
	t.Helper()
	n := &node{Recorder: &clustertest.Recorder{ID: id}, st: openStore(t, engine, dsn)}
	n.c = startCoordinator(t, n.st, id, items, ttl, n.OnAssign)
	return n
}

// startCoordinator starts a coordinator of node id on st, stopped when
// the test ends.
func startCoordinator(t *testing.T, st Store, id string, items []string, ttl time.Duration, onAssign func(int64, []string)) *Coordinator {
	t.Helper()
	c, err := New(Config{Store: st, NodeID: id, Addr: "127.0.0.1:0", TTL: ttl, Items: items,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil)), OnAssign: onAssign,
		HandOverAtOnce: func(string) bool { return true }}) // items like the task tables
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

// crash stops a node the way kill -9 does: its connections die, it never
// says goodbye. (Closing the store makes every later query fail.)
func (n *node) crash() {
	n.st.Close()
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
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			dsn := testdb.DSNs(t, engine, 1)[0]
			items := make([]string, 64)
			for i := range items {
				items[i] = fmt.Sprintf("0.%d.%d", i/4, i%4)
			}
			const ttl = 1500 * time.Millisecond
			a := startNode(t, engine, dsn, "a", items, ttl)
			b := startNode(t, engine, dsn, "b", items, ttl)
			c := startNode(t, engine, dsn, "c", items, ttl)
			all := []*node{a, b, c}
			clustertest.WaitBalanced(t, recs(all), items, 20*time.Second)

			st, err := a.c.Status(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if st.Leader == "" || st.Term < 1 || len(st.Nodes) != 3 {
				t.Fatalf("status: %+v", st)
			}
			// Kill the leader: a new leader with a higher term, its items move.
			var leader *node
			for _, n := range all {
				if n.ID == st.Leader {
					leader = n
				}
			}
			leader.crash()
			var rest []*node
			for _, n := range all {
				if n != leader {
					rest = append(rest, n)
				}
			}
			clustertest.WaitBalanced(t, recs(rest), items, 20*time.Second)
			st2, err := rest[0].c.Status(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if st2.Leader == "" || st2.Leader == leader.ID || st2.Term <= st.Term {
				t.Fatalf("after leader death: leader %q term %d (was %q term %d)", st2.Leader, st2.Term, st.Leader, st.Term)
			}
			// A fourth node joins: balanced again, the survivors keep most items.
			before := map[string][]string{}
			for _, n := range rest {
				before[n.ID] = n.Owned()
			}
			d := startNode(t, engine, dsn, "d", items, ttl)
			clustertest.WaitBalanced(t, recs(append(rest, d)), items, 20*time.Second)
			clustertest.KeptOnJoin(t, before, recs(rest))
		})
	}
}

func TestConfigValidation(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Fatal("nil Store accepted")
	}
	st := openStore(t, "sqlite", testdb.SQLite(t))
	if _, err := New(Config{Store: st}); err == nil {
		t.Fatal("empty node ID accepted")
	}
	if _, err := New(Config{Store: st, NodeID: "a", TTL: time.Millisecond}); err == nil {
		t.Fatal("tiny TTL accepted")
	}
}

// TestStopConcurrent: Stop called from several goroutines at once returns
// in each only once the node has left — its items handed back, its
// registration gone, its lease resigned — and the survivor takes every
// item without waiting for a TTL to pass. Stop is idempotent before and
// after.
func TestStopConcurrent(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			dsn := testdb.DSNs(t, engine, 1)[0]
			items := make([]string, 16)
			for i := range items {
				items[i] = fmt.Sprintf("0.%d.0", i)
			}
			// A long TTL: the survivor can take the items within the test's
			// wait (2/3 TTL) only if the leaver resigned and deregistered.
			// Its rounds come every TTL/3, so one late round (a loaded CI
			// machine) still fits.
			const ttl = 12 * time.Second
			a := startNode(t, engine, dsn, "a", items, ttl)
			waitLeader(t, a.c, "a")
			b := startNode(t, engine, dsn, "b", items, ttl)
			clustertest.WaitBalanced(t, recs([]*node{a, b}), items, 4*ttl)

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
			select {
			case <-a.c.Stopped():
			default:
				t.Fatal("Stopped() not closed after Stop")
			}
			st, err := b.c.Status(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if st.Leader == "a" {
				t.Errorf("the stopped node still holds the lease: %+v", st)
			}
			for _, ns := range st.Nodes {
				if ns.ID == "a" {
					t.Errorf("the stopped node is still registered: %+v", ns)
				}
			}
			clustertest.WaitBalanced(t, recs([]*node{b}), items, ttl*2/3)
		})
	}
}

// waitLeader waits until c's node holds the lease.
func waitLeader(t *testing.T, c *Coordinator, id string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, err := c.Status(context.Background())
		if err == nil && st.Leader == id {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not leader within 20s: %+v %v", id, st, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestStopBeforeStart(t *testing.T) {
	st := openStore(t, "sqlite", testdb.SQLite(t))
	c, err := New(Config{Store: st, NodeID: "a", Items: []string{"x"}})
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

// TestHandlersFollowTheMembership: each node publishes the topics it has
// Go handlers for with its heartbeat and reads everyone's each round:
// every node sees which live nodes handle a topic, a topic added to a
// running node within a round, and a node that left drops out.
func TestHandlersFollowTheMembership(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			dsn := testdb.DSNs(t, engine, 1)[0]
			var mu sync.Mutex
			topics := map[string][]string{"a": nil, "b": {"orders", "mail"}}
			start := func(id string) *Coordinator {
				c, err := New(Config{Store: openStore(t, engine, dsn), NodeID: id, Addr: "127.0.0.1:0", TTL: 600 * time.Millisecond,
					Items: []string{"0.0.0"}, Topics: func() []string { mu.Lock(); defer mu.Unlock(); return topics[id] }})
				if err != nil {
					t.Fatal(err)
				}
				if err := c.Start(context.Background()); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(c.Stop)
				return c
			}
			a, b := start("a"), start("b")
			for _, c := range []*Coordinator{a, b} {
				clustertest.WaitHandlers(t, c.Handlers(), "orders", []string{"b"}, 10*time.Second)
				clustertest.WaitHandlers(t, c.Handlers(), "mail", []string{"b"}, 10*time.Second)
			}
			mu.Lock()
			topics["a"] = []string{"orders"}
			mu.Unlock()
			clustertest.WaitHandlers(t, b.Handlers(), "orders", []string{"a", "b"}, 10*time.Second)
			b.Stop()
			clustertest.WaitHandlers(t, a.Handlers(), "orders", []string{"a"}, 10*time.Second)
			clustertest.WaitHandlers(t, a.Handlers(), "mail", nil, 10*time.Second)
		})
	}
}
