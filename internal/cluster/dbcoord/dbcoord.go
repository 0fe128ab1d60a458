// Package dbcoord coordinates a cluster through the task database itself:
// node registrations with heartbeats, a leader lease with a term (the
// fencing token), and the assignment of sharding items, written by the
// leader and read by every node. No extra moving parts, the way River and
// xxl-job elect with their own database.
//
// One round, every TTL/3 on every node:
//
//	heartbeat ─► leader? renew : try to acquire (term+1 when it changes hands)
//	          ─► leader: live nodes → cluster.Assign → write rows under term
//	          ─► read own items → callback when they change
//
// A node that has not heartbeated successfully for TTL minus a margin drops
// all its items before any leader may consider it dead (fencing by time);
// the leader reassigns a node's items only once its heartbeat is older than
// TTL. Writes of the assignment are fenced by the leader's term inside the
// same transaction, so a deposed leader writes nothing.
//
// The SQL lives with the store's (sqlstore/coord.go, one dialect per
// engine, its tables made by the store's versioned migrations); this
// package keeps the protocol and talks to the store through Store.
//
// A Coordinator has the node's one lifecycle (startstop): Start launches
// the rounds, Stop hands the node's items back, resigns and waits.
package dbcoord

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ontimehq/ontime/internal/cluster"
	"github.com/ontimehq/ontime/internal/startstop"
	"github.com/ontimehq/ontime/internal/store"
)

// Store is the coordination state the protocol reads and writes, kept in
// the task database (*sqlstore.Store implements it). Times are compared
// by the store as given: every node's clock takes part, as with any lease.
type Store interface {
	// Heartbeat registers node, or refreshes its heartbeat, address,
	// process and the topics it has Go handlers for.
	Heartbeat(ctx context.Context, node, addr string, topics []string, proc store.Process, now time.Time) error
	// Deregister removes node's registration.
	Deregister(ctx context.Context, node string) error
	// PruneNodes removes registrations last heard of before cutoff.
	PruneNodes(ctx context.Context, cutoff time.Time) error
	// LiveNodes lists the nodes heard of at or after since.
	LiveNodes(ctx context.Context, since time.Time) ([]string, error)
	// Nodes lists every registration (ID, Addr, Heartbeat, Topics) by ID.
	Nodes(ctx context.Context) ([]store.NodeStatus, error)

	// Leader reads the leader lease.
	Leader(ctx context.Context) (store.LeaderLease, error)
	// TryLead takes the lease for node until until, with a term one
	// higher, if it is vacant or expired at now; it returns the term
	// taken, 0 when another node holds it.
	TryLead(ctx context.Context, node string, now, until time.Time) (term int64, err error)
	// RenewLead extends the lease l.Node holds under l.Term to l.Until;
	// held is false once it changed hands.
	RenewLead(ctx context.Context, l store.LeaderLease) (held bool, err error)
	// Resign expires node's lease under term now.
	Resign(ctx context.Context, node string, term int64) error

	// HandOver moves to now the Since of each item's grant that gives it
	// to a node other than from and is still in the future: from has let
	// the items go, so their new owners need not wait.
	HandOver(ctx context.Context, from string, items []string, now time.Time) error
	// Assignment reads every item's grant.
	Assignment(ctx context.Context) (map[string]store.Grant, error)
	// WriteAssignment writes grants and deletes the items in drop in one
	// transaction that first renews the lease l (the fence); held is
	// false, and nothing written, once the lease changed hands.
	WriteAssignment(ctx context.Context, l store.LeaderLease, grants map[string]store.Grant, drop []string) (held bool, err error)
}

// Config configures a coordinator: the node (cluster.NodeConfig) and the
// task database that holds the coordination state.
type Config struct {
	Store Store
	cluster.NodeConfig
}

// Coordinator runs the protocol for one node. Its Stop (startstop.Base)
// ends the rounds and returns once the node has left: its items handed
// back, its lease expired, its registration gone.
type Coordinator struct {
	startstop.Base
	cluster.Core

	st  Store
	log *slog.Logger

	mu       sync.Mutex
	term     int64 // leader term this node holds, 0 if not leader
	lastBeat time.Time
	// started is registered with the node: when it changes, the others
	// know the node restarted and end the leases its previous process held
	// (what that process wrote, it wrote before New, which the node calls
	// before it writes anything).
	started time.Time
	// backAt is when this node's heartbeats succeeded again after failing
	// long enough to fence it, and beforeGap its last success before
	// that: see liveCutoff.
	backAt, beforeGap time.Time
}

// New checks cfg and builds a coordinator.
func New(cfg Config) (*Coordinator, error) {
	if cfg.Store == nil {
		return nil, errors.New("cluster: a Store is required")
	}
	if err := cfg.NodeConfig.Check(300*time.Millisecond, ""); err != nil {
		return nil, err
	}
	return &Coordinator{Core: cluster.NewCore(cfg.NodeConfig), st: cfg.Store, log: cfg.Logger, started: cfg.Clock()}, nil
}

// Start joins the cluster and returns at once; rounds run until Stop (or
// ctx ends). Starting a running coordinator does nothing.
func (c *Coordinator) Start(ctx context.Context) error {
	return c.Go(ctx, c.run)
}

// run runs rounds until ctx ends, then gives up leadership and membership
// so others take over at once rather than after the TTL.
func (c *Coordinator) run(ctx context.Context) {
	proc := store.Process{Started: c.started, Incarnation: c.Cfg.Incarnation, Version: c.Cfg.Version, Zone: c.Cfg.Zone}
	c.RunRounds(ctx, func(rctx context.Context) { c.round(rctx, proc) }, c.fence)
	c.leave()
}

// fence drops the node's items and leadership: 2/3 TTL passed without a
// heartbeat, and a leader may call the node dead once a TTL has.
func (c *Coordinator) fence() {
	c.log.Warn("cluster: no heartbeat for 2/3 of the lease TTL, dropping every item", "ttl", c.Cfg.TTL)
	c.Drop()
	c.mu.Lock()
	c.term = 0
	c.mu.Unlock()
}

func (c *Coordinator) round(rctx context.Context, proc store.Process) {
	sent, now := time.Now(), c.Now()
	if err := c.st.Heartbeat(rctx, c.Cfg.NodeID, c.Cfg.Addr, c.Topics(), proc, now); err != nil {
		c.log.Warn("cluster heartbeat failed", "err", err)
		return
	}
	c.Renew(sent)
	c.mu.Lock()
	if !c.lastBeat.IsZero() && now.Sub(c.lastBeat) > c.Cfg.TTL*2/3 {
		c.backAt, c.beforeGap = now, c.contactLostLocked()
	}
	c.lastBeat = now
	c.mu.Unlock()
	term, err := c.lead(rctx, now)
	if err != nil {
		c.log.Warn("cluster leader election failed", "err", err)
	}
	if term > 0 {
		if err := c.rebalance(rctx, now, term); err != nil {
			c.log.Warn("cluster rebalance failed", "err", err)
		}
	}
	if err := c.readOwn(rctx); err != nil {
		c.log.Warn("cluster read assignment failed", "err", err)
	}
	if err := c.readHandlers(rctx, now); err != nil {
		c.log.Warn("cluster read membership failed", "err", err)
	}
}

// readHandlers refreshes which live nodes handle which topic: one read of
// the registrations a round, so the submit path never asks the database.
func (c *Coordinator) readHandlers(ctx context.Context, now time.Time) error {
	nodes, err := c.st.Nodes(ctx)
	if err != nil {
		return err
	}
	cutoff := c.liveCutoff(now)
	live := make(map[string][]string, len(nodes))
	for _, ns := range nodes {
		if !ns.Heartbeat.Before(cutoff) {
			live[ns.ID] = ns.Topics
		}
	}
	c.Handlers().Set(live)
	return nil
}

// lead renews or acquires the leader lease; it returns the term held, 0 if
// another node leads.
func (c *Coordinator) lead(ctx context.Context, now time.Time) (int64, error) {
	until := now.Add(c.Cfg.TTL)
	c.mu.Lock()
	term := c.term
	c.mu.Unlock()
	if term > 0 {
		held, err := c.st.RenewLead(ctx, store.LeaderLease{Node: c.Cfg.NodeID, Term: term, Until: until})
		if err != nil {
			return 0, err
		}
		if held {
			return term, nil
		}
		c.log.Info("cluster leadership lost", "term", term)
		c.mu.Lock()
		c.term = 0
		c.mu.Unlock()
	}
	term, err := c.st.TryLead(ctx, c.Cfg.NodeID, now, until)
	if err != nil || term == 0 {
		return 0, err
	}
	c.mu.Lock()
	c.term = term
	c.mu.Unlock()
	c.log.Info("cluster leader elected", "node", c.Cfg.NodeID, "term", term)
	return term, nil
}

func (c *Coordinator) rebalance(ctx context.Context, now time.Time, term int64) error {
	// Forget registrations of nodes gone for long (restarted nodes come
	// back under a new ID): they would clutter the cluster view forever.
	if err := c.st.PruneNodes(ctx, now.Add(-10*c.Cfg.TTL)); err != nil {
		return err
	}
	// The registrations, not LiveNodes: the plan needs each node's zone.
	nodes, err := c.st.Nodes(ctx)
	if err != nil {
		return err
	}
	cutoff := c.liveCutoff(now)
	live := make(map[string]string, len(nodes))
	for _, ns := range nodes {
		if !ns.Heartbeat.Before(cutoff) {
			live[ns.ID] = ns.Zone
		}
	}
	cur, err := c.st.Assignment(ctx)
	if err != nil {
		return err
	}
	return c.Rebalance(term, live, cur, func(grants map[string]store.Grant, drop []string) (bool, error) {
		// Fence: still the leader under this term, inside the transaction.
		return c.st.WriteAssignment(ctx, store.LeaderLease{Node: c.Cfg.NodeID, Term: term, Until: now.Add(c.Cfg.TTL)}, grants, drop)
	})
}

func (c *Coordinator) readOwn(ctx context.Context) error {
	all, err := c.st.Assignment(ctx)
	if err != nil {
		return err
	}
	// Follow has told the node's stages to stop on what it lost: end the
	// handover wait of those items (see cluster.LetGo).
	if gone := c.Follow(all); len(gone) > 0 {
		if err := c.st.HandOver(ctx, c.Cfg.NodeID, gone, c.Now()); err != nil {
			return fmt.Errorf("hand over: %w", err)
		}
	}
	return nil
}

// liveCutoff is the oldest heartbeat that counts a node as alive at now:
// normally now − TTL. A node that was itself cut off from the database
// long enough to fence itself — most often the database was away for every
// node — judges the others, for a TTL after it is back, by the time it
// lost contact: they could not heartbeat meanwhile either, and declaring
// them dead would hand their items, and the leases of the tasks they are
// delivering, to others (duplicate deliveries). A node that stays silent
// for a TTL after the database is back is dead as usual.
//
// The same holds before this node's first heartbeat after such a gap: the
// database answers reads again (the scanner asks who is alive every
// second) but this node's next round, up to TTL/3 away, has not yet told
// that it was cut off, and every other node's last heartbeat looks older
// than the TTL. Until a heartbeat of its own succeeds, a node whose last
// one is older than 2/3 TTL judges the others by that last one. Measured:
// 2 nodes, PostgreSQL crashed for 10 s (= TTL) twice; each node's scanner
// read the others as gone in that window and, taking its items back a
// moment later, ended their leases (claims and running deliveries: 62,
// 33 and 45 tasks in three item sets); 19 tasks were delivered twice,
// most within milliseconds of each other (docs/performance-notes.md,
// "Kill rounds, incarnations, store outages").
func (c *Coordinator) liveCutoff(now time.Time) time.Time {
	cutoff := now.Add(-c.Cfg.TTL)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.lastBeat.IsZero() && now.Sub(c.lastBeat) > c.Cfg.TTL*2/3 {
		if gap := c.contactLostLocked().Add(-c.Cfg.TTL); gap.Before(cutoff) {
			cutoff = gap
		}
	}
	if !c.backAt.IsZero() && now.Sub(c.backAt) < c.Cfg.TTL {
		if gap := c.beforeGap.Add(-c.Cfg.TTL); gap.Before(cutoff) {
			cutoff = gap
		}
	}
	return cutoff
}

// contactLostLocked is when this node lost contact with the database, its
// last heartbeat being its last contact: that heartbeat, or, when it came
// in an up-window shorter than a TTL after an earlier gap, the start of
// that earlier gap. Others heartbeat every TTL/3 at best and may have
// missed so short a window entirely (measured: PostgreSQL crashed three
// times for 10 s, 3 s apart; the second node wrote no heartbeat between
// the second and third crash, and the first, judging it from the short
// window, declared it dead after the third, took its items and ended the
// leases of 26 tasks it was delivering). Called with c.mu held.
func (c *Coordinator) contactLostLocked() time.Time {
	if !c.backAt.IsZero() && c.lastBeat.Sub(c.backAt) < c.Cfg.TTL && c.beforeGap.Before(c.lastBeat) {
		return c.beforeGap
	}
	return c.lastBeat
}

func (c *Coordinator) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.Drop()
	if err := c.st.Deregister(ctx, c.Cfg.NodeID); err != nil {
		c.log.Warn("cluster leave", "err", err)
	}
	c.mu.Lock()
	term := c.term
	c.term = 0
	c.mu.Unlock()
	if term > 0 {
		// Hand leadership over at once: expire our lease.
		if err := c.st.Resign(ctx, c.Cfg.NodeID, term); err != nil {
			c.log.Warn("cluster resign", "err", err)
		}
	}
}

// Status reads the cluster's state from the database.
func (c *Coordinator) Status(ctx context.Context) (cluster.Status, error) {
	var st cluster.Status
	l, err := c.st.Leader(ctx)
	if err != nil {
		return st, err
	}
	st.Term = l.Term
	if !l.Until.Before(c.Now()) {
		st.Leader = l.Node
	}
	assign, err := c.st.Assignment(ctx)
	if err != nil {
		return st, err
	}
	st.Assignment = make(map[string]string, len(assign))
	counts := map[string]int{}
	for it, g := range assign {
		st.Assignment[it] = g.Node
		counts[g.Node]++
	}
	nodes, err := c.st.Nodes(ctx)
	if err != nil {
		return st, err
	}
	cutoff := c.liveCutoff(c.Now())
	for _, ns := range nodes {
		ns.Live = !ns.Heartbeat.Before(cutoff)
		ns.Items = counts[ns.ID]
		st.Nodes = append(st.Nodes, ns)
	}
	return st, nil
}
