package dbcoord

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/cluster/clustertest"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/testdb"
)

// cutStore is a node's real store behind a switch that cuts the node off
// from the database: every call fails while down is set.
type cutStore struct {
	Store
	down atomic.Bool
}

var errCut = errors.New("database unreachable (test)")

func (s *cutStore) err() error {
	if s.down.Load() {
		return errCut
	}
	return nil
}

func (s *cutStore) Heartbeat(ctx context.Context, node, addr string, topics []string, proc store.Process, now time.Time) error {
	if err := s.err(); err != nil {
		return err
	}
	return s.Store.Heartbeat(ctx, node, addr, topics, proc, now)
}
func (s *cutStore) Deregister(ctx context.Context, node string) error {
	if err := s.err(); err != nil {
		return err
	}
	return s.Store.Deregister(ctx, node)
}
func (s *cutStore) PruneNodes(ctx context.Context, cutoff time.Time) error {
	if err := s.err(); err != nil {
		return err
	}
	return s.Store.PruneNodes(ctx, cutoff)
}
func (s *cutStore) LiveNodes(ctx context.Context, since time.Time) ([]string, error) {
	if err := s.err(); err != nil {
		return nil, err
	}
	return s.Store.LiveNodes(ctx, since)
}
func (s *cutStore) Nodes(ctx context.Context) ([]store.NodeStatus, error) {
	if err := s.err(); err != nil {
		return nil, err
	}
	return s.Store.Nodes(ctx)
}
func (s *cutStore) Leader(ctx context.Context) (store.LeaderLease, error) {
	if err := s.err(); err != nil {
		return store.LeaderLease{}, err
	}
	return s.Store.Leader(ctx)
}
func (s *cutStore) TryLead(ctx context.Context, node string, now, until time.Time) (int64, error) {
	if err := s.err(); err != nil {
		return 0, err
	}
	return s.Store.TryLead(ctx, node, now, until)
}
func (s *cutStore) RenewLead(ctx context.Context, l store.LeaderLease) (bool, error) {
	if err := s.err(); err != nil {
		return false, err
	}
	return s.Store.RenewLead(ctx, l)
}
func (s *cutStore) Resign(ctx context.Context, node string, term int64) error {
	if err := s.err(); err != nil {
		return err
	}
	return s.Store.Resign(ctx, node, term)
}
func (s *cutStore) Assignment(ctx context.Context) (map[string]store.Grant, error) {
	if err := s.err(); err != nil {
		return nil, err
	}
	return s.Store.Assignment(ctx)
}
func (s *cutStore) HandOver(ctx context.Context, from string, items []string, now time.Time) error {
	if err := s.err(); err != nil {
		return err
	}
	return s.Store.HandOver(ctx, from, items, now)
}
func (s *cutStore) WriteAssignment(ctx context.Context, l store.LeaderLease, grants map[string]store.Grant, drop []string) (bool, error) {
	if err := s.err(); err != nil {
		return false, err
	}
	return s.Store.WriteAssignment(ctx, l, grants, drop)
}

// history records every assignment a node received.
type history struct {
	clustertest.Recorder
	mu   sync.Mutex
	seen [][]string
}

func (h *history) OnAssign(term int64, items []string) {
	h.mu.Lock()
	h.seen = append(h.seen, slices.Clone(items))
	h.mu.Unlock()
	h.Recorder.OnAssign(term, items)
}

func (h *history) everOwned() map[string]bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]bool{}
	for _, s := range h.seen {
		for _, it := range s {
			out[it] = true
		}
	}
	return out
}

// When the database is away for every node, the first node back must not
// declare the others dead for having missed heartbeats they could not
// write: it would take their items and end the leases of the tasks they
// are delivering (duplicates). Here both nodes are cut off long enough to
// fence themselves, a is back first, b a moment later: b keeps its items,
// a never receives one of them, and meanwhile a's status counts b alive.
// A node that stays silent after the database is back is still declared
// dead (the second half).
func TestOutageDoesNotKillTheOthers(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			dsn := testdb.DSNs(t, engine, 1)[0]
			items := make([]string, 16)
			for i := range items {
				items[i] = fmt.Sprintf("0.%d.0", i)
			}
			const ttl = 3 * time.Second
			start := func(id string) (*history, *cutStore, *Coordinator) {
				h := &history{Recorder: clustertest.Recorder{ID: id}}
				st := &cutStore{Store: openStore(t, engine, dsn)}
				return h, st, startCoordinator(t, st, id, items, ttl, h.OnAssign)
			}
			a, sa, ca := start("a")
			b, sb, _ := start("b")
			clustertest.WaitBalanced(t, []*clustertest.Recorder{&a.Recorder, &b.Recorder}, items, 30*time.Second)
			ofB := b.Owned()
			a.mu.Lock()
			a.seen = nil
			a.mu.Unlock()

			sa.down.Store(true)
			sb.down.Store(true)
			waitOwned(t, &a.Recorder, 0, 5*ttl)
			waitOwned(t, &b.Recorder, 0, 5*ttl)
			time.Sleep(ttl) // every heartbeat is now older than the TTL

			sa.down.Store(false)
			waitOwned(t, &a.Recorder, len(items)-len(ofB), 5*ttl)
			st, err := ca.Status(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			for _, ns := range st.Nodes {
				if ns.ID == "b" && !ns.Live {
					t.Fatalf("a, back from the outage, counts b dead: %+v", st.Nodes)
				}
			}
			sb.down.Store(false)
			clustertest.WaitBalanced(t, []*clustertest.Recorder{&a.Recorder, &b.Recorder}, items, 30*time.Second)
			ever := a.everOwned()
			for _, it := range ofB {
				if ever[it] {
					t.Fatalf("item %s of b was handed to a after the outage", it)
				}
			}
			if got := b.Owned(); !slices.Equal(got, ofB) {
				t.Fatalf("b owns %v after the outage; before it %v", got, ofB)
			}

			// b silent for good: a takes its items once b is dead.
			sb.down.Store(true)
			waitOwned(t, &a.Recorder, len(items), 10*ttl)
		})
	}
}

// TestStatusBeforeFirstBeatBack: between the database's return and a
// node's first heartbeat after it (up to TTL/3: its next round), the
// database answers reads again and the node's scanner asks who is alive
// every second. Every answer in that window must count the other node
// alive: its last heartbeat is older than the TTL only because nobody
// could write one. Before, a's scanner read b as gone there and ended the
// leases of the tasks b was delivering (duplicates).
func TestStatusBeforeFirstBeatBack(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			dsn := testdb.DSNs(t, engine, 1)[0]
			items := []string{"0.0.0", "0.1.0", "0.2.0", "0.3.0"}
			const ttl = 3 * time.Second
			start := func(id string) (*history, *cutStore, *Coordinator) {
				h := &history{Recorder: clustertest.Recorder{ID: id}}
				st := &cutStore{Store: openStore(t, engine, dsn)}
				return h, st, startCoordinator(t, st, id, items, ttl, h.OnAssign)
			}
			a, sa, ca := start("a")
			b, sb, _ := start("b")
			clustertest.WaitBalanced(t, []*clustertest.Recorder{&a.Recorder, &b.Recorder}, items, 30*time.Second)

			sa.down.Store(true)
			sb.down.Store(true)
			waitOwned(t, &a.Recorder, 0, 5*ttl)
			waitOwned(t, &b.Recorder, 0, 5*ttl)
			time.Sleep(ttl) // every heartbeat is now older than the TTL

			sa.down.Store(false)
			for first := true; first || len(a.Owned()) == 0; first = false { // until a's first round back has run
				st, err := ca.Status(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				for _, ns := range st.Nodes {
					if ns.ID == "b" && !ns.Live {
						t.Fatalf("a, reading before its first heartbeat back, counts b dead: %+v", st.Nodes)
					}
				}
				time.Sleep(10 * time.Millisecond)
			}
			sb.down.Store(false)
		})
	}
}

// TestOutagesBackToBack: the database comes back for less than a TTL
// between two outages; a heartbeats in that window, b does not (its rounds
// come every TTL/3 at best and here it stays cut off). Back after the
// second outage, a must judge b from before the first one, not from the
// short window: b keeps its items and a never receives one of them, and
// every status a reads counts b alive until b is back.
func TestOutagesBackToBack(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			dsn := testdb.DSNs(t, engine, 1)[0]
			items := []string{"0.0.0", "0.1.0", "0.2.0", "0.3.0", "0.4.0", "0.5.0"}
			const ttl = 3 * time.Second
			start := func(id string) (*history, *cutStore, *Coordinator) {
				h := &history{Recorder: clustertest.Recorder{ID: id}}
				st := &cutStore{Store: openStore(t, engine, dsn)}
				return h, st, startCoordinator(t, st, id, items, ttl, h.OnAssign)
			}
			a, sa, ca := start("a")
			b, sb, _ := start("b")
			clustertest.WaitBalanced(t, []*clustertest.Recorder{&a.Recorder, &b.Recorder}, items, 30*time.Second)
			ofA, ofB := a.Owned(), b.Owned()
			a.mu.Lock()
			a.seen = nil
			a.mu.Unlock()
			checkB := func() {
				t.Helper()
				st, err := ca.Status(context.Background())
				if err != nil {
					return // a is cut off: no answer
				}
				for _, ns := range st.Nodes {
					if ns.ID == "b" && !ns.Live {
						t.Fatalf("a counts b dead: %+v", st.Nodes)
					}
				}
			}

			sa.down.Store(true)
			sb.down.Store(true)
			waitOwned(t, &a.Recorder, 0, 5*ttl)
			waitOwned(t, &b.Recorder, 0, 5*ttl)
			time.Sleep(ttl)
			// A short window: a is back for one round, b stays cut off.
			sa.down.Store(false)
			waitOwned(t, &a.Recorder, len(ofA), 5*ttl)
			checkB()
			sa.down.Store(true)
			waitOwned(t, &a.Recorder, 0, 5*ttl)
			time.Sleep(ttl)
			// Back for good: a keeps judging b alive while b comes back
			// within a TTL, as the database does for it. b is let back
			// half a TTL after a (sooner once a has run a whole round
			// back and a third of a TTL passed): a round of a that takes
			// longer than that under load must not make the test hold b
			// off past the TTL a rightly gives it.
			back := time.Now()
			sa.down.Store(false)
			for since := time.Duration(0); since < ttl/2 && (since < ttl/3 || len(a.Owned()) == 0); since = time.Since(back) {
				checkB()
				time.Sleep(20 * time.Millisecond)
			}
			sb.down.Store(false)
			clustertest.WaitBalanced(t, []*clustertest.Recorder{&a.Recorder, &b.Recorder}, items, 30*time.Second)
			ever := a.everOwned()
			for _, it := range ofB {
				if ever[it] {
					t.Fatalf("item %s of b was handed to a after the outages", it)
				}
			}
			if got := b.Owned(); !slices.Equal(got, ofB) {
				t.Fatalf("b owns %v after the outages; before them %v", got, ofB)
			}
		})
	}
}

// waitOwned waits until r owns n items.
func waitOwned(t *testing.T, r *clustertest.Recorder, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for len(r.Owned()) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%s owns %d items after %s; want %d", r.ID, len(r.Owned()), within, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
