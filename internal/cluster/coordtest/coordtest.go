// Package coordtest is the contract every cluster coordinator keeps
// (database, etcd, Redis, ZooKeeper), as storetest is the task store's:
// membership, election, term fencing, assignment on join and leave, the
// hand-over, a partitioned leader letting go before another node acts,
// and all of it with the nodes' clocks apart by the clock-skew bound (docs/coordinators.md).
//
// A coordinator's tests call Run with a Backend that builds nodes of that
// coordinator on a real server; every node's assignments go through one
// Ledger, which fails the test the moment an item is given to a node while
// another node that has not crashed still owns it.
package coordtest

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/cluster"
	"github.com/ontimehq/ontime/internal/cluster/clustertest"
	"github.com/ontimehq/ontime/internal/store"
)

// Node is a coordinator under test with the hooks the suite needs.
type Node interface {
	cluster.Coordinator
	// Grants reads every item's grant from the backend.
	Grants(ctx context.Context) (map[string]store.Grant, error)
	// Crash ends the node as kill -9 would: its connections die, it says
	// no goodbye, its lease runs out on the backend's clock.
	Crash()
	// Cut holds every byte between the node and the backend, connections
	// open (a partition, or a long pause); Heal lets them through.
	Cut()
	Heal()
	// WriteAs writes grants as the leader under term, through the fence
	// the coordinator's own assignment writes go through: held is false,
	// and nothing written, once term is not the current leader's.
	WriteAs(ctx context.Context, term int64, grants map[string]store.Grant) (held bool, err error)
}

// Cluster is one cluster of a backend, apart from every other test's (a
// database, a key prefix, a chroot of its own).
type Cluster interface {
	// New builds, and does not start, the coordinator of cfg's node.
	New(t *testing.T, cfg cluster.NodeConfig) Node
	// Join makes id a live member without a coordinator of its own (for
	// the rest of the test), so that only the other nodes act.
	Join(t *testing.T, id string)
}

// Backend makes a new cluster of one kind of coordinator.
type Backend func(t *testing.T) Cluster

// TTL is the suite's lease TTL: whole seconds (etcd's sessions), short
// enough for quick failovers, long enough for a loaded machine's rounds.
const TTL = 2 * time.Second

// Ledger holds which node owns which item at every moment, across all the
// nodes of a test, from their OnAssign calls.
type Ledger struct {
	t       *testing.T
	mu      sync.Mutex
	owner   map[string]string // item → node
	crashed map[string]bool
	events  []Event
}

// Event is one change of what a node owns.
type Event struct {
	At     time.Time
	Node   string
	Gained []string
	Lost   []string
}

// NewLedger starts an empty ledger.
func NewLedger(t *testing.T) *Ledger {
	return &Ledger{t: t, owner: map[string]string{}, crashed: map[string]bool{}}
}

// OnAssign returns the callback of node id: it records the change and
// fails the test at once if an item gained is still owned by another
// node that has not crashed.
func (l *Ledger) OnAssign(id string, rec *clustertest.Recorder) func(int64, []string) {
	return func(term int64, items []string) {
		before := rec.Owned()
		rec.OnAssign(term, items)
		l.mu.Lock()
		defer l.mu.Unlock()
		ev := Event{At: time.Now(), Node: id}
		for _, it := range before {
			if !slices.Contains(items, it) {
				ev.Lost = append(ev.Lost, it)
				if l.owner[it] == id {
					delete(l.owner, it)
				}
			}
		}
		for _, it := range items {
			if slices.Contains(before, it) {
				continue
			}
			ev.Gained = append(ev.Gained, it)
			if prev, ok := l.owner[it]; ok && prev != id && !l.crashed[prev] {
				l.t.Errorf("item %s given to %s while %s still owns it (term %d)", it, id, prev, term)
			}
			l.owner[it] = id
		}
		l.events = append(l.events, ev)
	}
}

// Crashed marks id dead: its ownership no longer counts.
func (l *Ledger) Crashed(id string) {
	l.mu.Lock()
	l.crashed[id] = true
	l.mu.Unlock()
}

// Events is every change so far.
func (l *Ledger) Events() []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}

// node is a started node of a test.
type node struct {
	Node
	*clustertest.Recorder
}

// env is one test's cluster and ledger.
type env struct {
	t      *testing.T
	c      Cluster
	ledger *Ledger
	items  []string
	ttl    time.Duration // the nodes' lease TTL: TTL, or ReactTTL
}

func newEnv(t *testing.T, b Backend, items int) *env {
	e := &env{t: t, c: b(t), ledger: NewLedger(t), ttl: TTL}
	for i := range items {
		e.items = append(e.items, fmt.Sprintf("0.%d.%d", i/4, i%4))
	}
	return e
}

// zoneOf is the zone the suite puts node id in: every coordinator carries
// it with the membership to Status. Items have no zone here, so the
// assignment is as without zones.
func zoneOf(id string) string {
	z := []byte("zone-")
	for _, r := range strings.ToLower(id) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			z = append(z, byte(r))
		}
	}
	return string(z[:min(len(z), 32)])
}

// start builds and starts node id; skew moves its wall clock.
func (e *env) start(id string, skew time.Duration, topics ...string) *node {
	e.t.Helper()
	rec := &clustertest.Recorder{ID: id}
	cfg := cluster.NodeConfig{NodeID: id, Addr: id + ":7070", TTL: e.ttl, Items: e.items,
		Topics: func() []string { return topics }, Incarnation: store.NewIncarnation().ID(), Zone: zoneOf(id),
		Logger:         slog.New(slog.NewTextHandler(testWriter{e.t}, nil)).With("node", id),
		OnAssign:       e.ledger.OnAssign(id, rec),
		HandOverAtOnce: func(string) bool { return true }}
	if skew != 0 {
		cfg.Clock = func() time.Time { return time.Now().Add(skew) }
	}
	n := e.c.New(e.t, cfg)
	if err := n.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(n.Stop)
	return &node{Node: n, Recorder: rec}
}

func (e *env) crash(n *node) {
	e.ledger.Crashed(n.ID)
	n.Crash()
}

func recs(ns ...*node) []*clustertest.Recorder {
	out := make([]*clustertest.Recorder, len(ns))
	for i, n := range ns {
		out[i] = n.Recorder
	}
	return out
}

// leader waits until some node of ns reads a live leader among ids and
// returns it with its term.
func leader(t *testing.T, ns []*node, within time.Duration, not string) (*node, int64) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		for _, n := range ns {
			st, err := n.Status(context.Background())
			if err != nil || st.Leader == "" || st.Leader == not {
				continue
			}
			for _, m := range ns {
				if m.ID == st.Leader {
					return m, st.Term
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no leader among %d nodes within %s", len(ns), within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Run runs the contract on the coordinator b builds.
func Run(t *testing.T, b Backend) {
	t.Run("Membership", func(t *testing.T) { testMembership(t, b) })
	t.Run("ElectionFailover", func(t *testing.T) { testElection(t, b, 0) })
	t.Run("TermFencing", func(t *testing.T) { testFencing(t, b) })
	t.Run("JoinLeave", func(t *testing.T) { testJoinLeave(t, b, 0) })
	t.Run("HandOver", func(t *testing.T) { testHandOver(t, b) })
	t.Run("PartitionedLeader", func(t *testing.T) { testPartition(t, b, 0) })
	// the clock-skew bound (docs/coordinators.md): nodes' clocks up to MaxClockSkew apart, the first
	// behind and the last ahead of the middle one by half of it each.
	skew := cluster.MaxClockSkew(TTL)
	t.Run("ClockSkew/ElectionFailover", func(t *testing.T) { testElection(t, b, skew) })
	t.Run("ClockSkew/JoinLeave", func(t *testing.T) { testJoinLeave(t, b, skew) })
	t.Run("ClockSkew/PartitionedLeader", func(t *testing.T) { testPartition(t, b, skew) })
}

// ReactTTL is RunReactions' lease TTL: rounds tick every 20 s, far longer
// than following a change takes (and within the 60 s sessions the test
// ZooKeeper grants).
const ReactTTL = 60 * time.Second

// RunReactions holds a coordinator that follows its backend's changes as
// they happen (watches: etcd, ZooKeeper) to doing so, beside Run's
// contract: under ReactTTL, whose rounds tick every 20 s, each change
// below is followed within 5 s, so by a round it kicked (cluster.Core.Kick),
// not by a tick. The ledger checks that no item has two owners meanwhile.
func RunReactions(t *testing.T, b Backend) {
	t.Run("Reactions", func(t *testing.T) { testReactions(t, b) })
}

// testReactions: a starts alone and owns every item (elected, it plans at
// once); b joins and the two are balanced (the leader sees the new member,
// a reads its own write and hands over at once, b reads its grants); the
// leader stops, its keys or ephemeral znodes go at once — as a dead node's
// go when its lease or session expires — and the other is elected, plans
// and owns every item.
func testReactions(t *testing.T, b Backend) {
	const within = ReactTTL / 12
	e := newEnv(t, b, 8)
	e.ttl = ReactTTL
	a := e.start("a", 0)
	clustertest.WaitBalanced(t, recs(a), e.items, within)
	bn := e.start("b", 0)
	clustertest.WaitBalanced(t, recs(a, bn), e.items, within)
	old, _ := leader(t, []*node{a, bn}, within, "")
	rest := bn
	if old == bn {
		rest = a
	}
	old.Stop()
	clustertest.WaitBalanced(t, recs(rest), e.items, within)
	if _, term := leader(t, []*node{rest}, within, old.ID); term < 1 {
		t.Fatalf("%s leads under term %d", rest.ID, term)
	}
}

// skewOf spreads nodes' clocks over total: −total/2, 0, +total/2, …
func skewOf(i int, total time.Duration) time.Duration {
	return time.Duration(i-1) * total / 2
}

// testMembership: every node sees the others with their address, topics,
// start and incarnation; a node that stops drops out at once, and one
// restarted under the same ID shows its new incarnation.
func testMembership(t *testing.T, b Backend) {
	e := newEnv(t, b, 4)
	a := e.start("a", 0)
	bn := e.start("b", 0, "orders", "mail")
	c := e.start("c", 0, "orders")
	for _, n := range []*node{a, bn, c} {
		clustertest.WaitHandlers(t, n.Handlers(), "orders", []string{"b", "c"}, 10*time.Second)
		clustertest.WaitHandlers(t, n.Handlers(), "mail", []string{"b"}, 10*time.Second)
	}
	st, err := a.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Nodes) != 3 {
		t.Fatalf("status lists %d nodes: %+v", len(st.Nodes), st.Nodes)
	}
	var incB int64
	for _, ns := range st.Nodes {
		if !ns.Live || ns.Addr != ns.ID+":7070" || ns.Started.IsZero() || ns.Incarnation == 0 || ns.Zone != zoneOf(ns.ID) {
			t.Errorf("member %+v: want live, its address, start, incarnation and zone", ns)
		}
		if ns.ID == "b" {
			incB = ns.Incarnation
			if !slices.Equal(ns.Topics, []string{"orders", "mail"}) && !slices.Equal(ns.Topics, []string{"mail", "orders"}) {
				t.Errorf("b's topics %v", ns.Topics)
			}
		}
	}
	c.Stop()
	clustertest.WaitHandlers(t, a.Handlers(), "orders", []string{"b"}, 10*time.Second)
	// b crashes and comes back under its ID with a new process before its
	// lease ran out: the others see the new incarnation.
	e.crash(bn)
	b2 := e.start("b", 0, "orders", "mail")
	deadline := time.Now().Add(3 * TTL)
	for {
		st, err := b2.Status(context.Background())
		if err == nil {
			for _, ns := range st.Nodes {
				if ns.ID == "b" && ns.Live && ns.Incarnation != incB {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("b's new incarnation not shown within %s: %+v %v", 3*TTL, st, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// testElection: one leader with a term; the leader killed, another leads
// under a higher term and the survivors own every item, balanced, within
// the lease TTL and two rounds; a fourth node joins.
func testElection(t *testing.T, b Backend, skew time.Duration) {
	e := newEnv(t, b, 48)
	var all []*node
	for i, id := range []string{"a", "b", "c"} {
		all = append(all, e.start(id, skewOf(i, skew)))
	}
	clustertest.WaitBalanced(t, recs(all...), e.items, 30*time.Second)
	old, term := leader(t, all, 10*time.Second, "")
	if term < 1 {
		t.Fatalf("leader %s with term %d", old.ID, term)
	}
	var rest []*node
	for _, n := range all {
		if n != old {
			rest = append(rest, n)
		}
	}
	killed := time.Now()
	e.crash(old)
	clustertest.WaitBalanced(t, recs(rest...), e.items, 30*time.Second)
	t.Logf("leader killed: the survivors own every item after %s (lease TTL %s)", time.Since(killed).Round(time.Millisecond), TTL)
	nl, term2 := leader(t, rest, 10*time.Second, old.ID)
	if term2 <= term {
		t.Fatalf("new leader %s has term %d, the dead one had %d", nl.ID, term2, term)
	}
	before := map[string][]string{}
	for _, n := range rest {
		before[n.ID] = n.Owned()
	}
	d := e.start("d", skewOf(1, skew))
	clustertest.WaitBalanced(t, recs(append(rest, d)...), e.items, 30*time.Second)
	clustertest.KeptOnJoin(t, before, recs(rest...))
}

// testFencing: a write under the leader's term passes the fence; once the
// leader was cut off and another leads under a higher term, the same
// write under the old term is refused, and nothing is written.
func testFencing(t *testing.T, b Backend) {
	e := newEnv(t, b, 8)
	a := e.start("a", 0)
	clustertest.WaitBalanced(t, recs(a), e.items, 30*time.Second)
	_, term := leader(t, []*node{a}, 10*time.Second, "")
	bn := e.start("b", 0)
	clustertest.WaitBalanced(t, recs(a, bn), e.items, 30*time.Second)
	ctx := context.Background()
	grants, err := a.Grants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	it := a.Owned()[0]
	same := map[string]store.Grant{it: grants[it]}
	if held, err := a.WriteAs(ctx, term, same); err != nil || !held {
		t.Fatalf("the leader's own write under term %d: held %v, %v", term, held, err)
	}
	a.Cut()
	_, term2 := leader(t, []*node{bn}, 10*TTL, "a")
	if term2 <= term {
		t.Fatalf("b leads under term %d, a led under %d", term2, term)
	}
	clustertest.WaitBalanced(t, recs(bn), e.items, 10*TTL)
	a.Heal()
	// The deposed leader, healed, writes under its old term: it would give
	// an item of b's back to itself.
	steal := map[string]store.Grant{it: {Node: "a", Since: time.Now(), Term: term}}
	if held, err := a.WriteAs(ctx, term, steal); err == nil && held {
		t.Fatalf("a write under the old term %d passed the fence (b leads under %d)", term, term2)
	}
	after, err := bn.Grants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if g := after[it]; g.Node == "a" && g.Term == term {
		t.Fatalf("the fenced write of %s was written: %+v", it, g)
	}
}

// testJoinLeave: a join moves only what balance needs, the nodes that
// were there keep the rest; a node that stops hands its items over within
// a round or two, no TTL wait.
func testJoinLeave(t *testing.T, b Backend, skew time.Duration) {
	e := newEnv(t, b, 16)
	a, bn := e.start("a", skewOf(0, skew)), e.start("b", skewOf(1, skew))
	clustertest.WaitBalanced(t, recs(a, bn), e.items, 30*time.Second)
	before := map[string][]string{"a": a.Owned(), "b": bn.Owned()}
	c := e.start("c", skewOf(2, skew))
	clustertest.WaitBalanced(t, recs(a, bn, c), e.items, 30*time.Second)
	clustertest.KeptOnJoin(t, before, recs(a, bn))
	// Stop waits until the node has let go (several goroutines at once).
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bn.Stop()
			if got := bn.Owned(); len(got) != 0 {
				t.Errorf("Stop returned while b still owns %d items", len(got))
			}
		}()
	}
	wg.Wait()
	left := time.Now()
	clustertest.WaitBalanced(t, recs(a, c), e.items, 30*time.Second)
	t.Logf("b left: the others own every item after %s", time.Since(left).Round(time.Millisecond))
	st, err := a.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range st.Nodes {
		if ns.ID == "b" && ns.Live {
			t.Errorf("b still a live member after Stop: %+v", ns)
		}
	}
}

// testHandOver: items taken from a live node are granted to their new
// owner a TTL later, unless the old owner, having read the change and let
// them go, ends the wait (cluster.LetGo). b joins without a coordinator of
// its own, so only a can end it; the deadline is short of the TTL wait.
func testHandOver(t *testing.T, b Backend) {
	e := newEnv(t, b, 8)
	a := e.start("a", 0)
	clustertest.WaitBalanced(t, recs(a), e.items, 30*time.Second)
	joined := time.Now()
	e.c.Join(t, "b")
	clustertest.WaitHandedOver(t, func() (map[string]store.Grant, error) { return a.Grants(context.Background()) }, "b", a.Recorder,
		joined, TTL*2/3+TTL/4)
}

// testPartition: the leader is cut off from the backend. It lets go of
// every item before any other node is given one of them (the ledger
// checks), the others elect a leader under a higher term and own every
// item; healed, it joins again.
func testPartition(t *testing.T, b Backend, skew time.Duration) {
	e := newEnv(t, b, 24)
	var all []*node
	for i, id := range []string{"a", "b", "c"} {
		all = append(all, e.start(id, skewOf(i, skew)))
	}
	clustertest.WaitBalanced(t, recs(all...), e.items, 30*time.Second)
	old, term := leader(t, all, 10*time.Second, "")
	var rest []*node
	for _, n := range all {
		if n != old {
			rest = append(rest, n)
		}
	}
	had := old.Owned()
	cut := time.Now()
	old.Cut()
	clustertest.WaitBalanced(t, recs(rest...), e.items, 10*TTL)
	if got := old.Owned(); len(got) != 0 {
		t.Fatalf("the cut-off leader still owns %v", got)
	}
	var dropped, taken time.Time
	for _, ev := range e.ledger.Events() {
		if !ev.At.After(cut) {
			continue
		}
		if ev.Node == old.ID && len(ev.Lost) > 0 && dropped.IsZero() {
			dropped = ev.At
		}
		if ev.Node != old.ID && taken.IsZero() && slices.ContainsFunc(ev.Gained, func(it string) bool { return slices.Contains(had, it) }) {
			taken = ev.At
		}
	}
	if dropped.IsZero() || taken.IsZero() || !dropped.Before(taken) {
		t.Fatalf("cut at 0: the old leader dropped its items at %s, another node took one at %s", since(cut, dropped), since(cut, taken))
	}
	t.Logf("leader cut off: it let go after %s, its items taken after %s (TTL %s)", since(cut, dropped), since(cut, taken), TTL)
	_, term2 := leader(t, rest, 10*TTL, old.ID)
	if term2 <= term {
		t.Fatalf("new leader's term %d, the cut-off one's %d", term2, term)
	}
	old.Heal()
	clustertest.WaitBalanced(t, recs(all...), e.items, 20*TTL)
}

func since(from, t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.Sub(from).Round(time.Millisecond).String()
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
