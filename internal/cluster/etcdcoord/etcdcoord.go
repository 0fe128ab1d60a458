// Package etcdcoord coordinates a cluster through etcd, for clusters too
// large to heartbeat through the task database: membership keys bound to a
// session lease, leader election with concurrency.Election (the leader key's
// creation revision is the term, the fencing token), and the assignment as
// one key per item, written by the leader in a transaction that fails if
// its leader key is gone.
//
//	<prefix>/nodes/<id>     {"addr", "topics", "started", "incarnation", "version"} (cluster.Member), under the node's session lease
//	<prefix>/leader/…       election keys
//	<prefix>/assign/<item>  "node|since µs|term"
//
// As in dbcoord, an item taken from a live node becomes its new owner's
// only one TTL later; a node whose session ends drops every item at once.
// Rounds run every TTL/3 and, through a watch on the prefix, at every
// change: a dead node's keys deleted when its lease expires, a new leader,
// a new assignment are acted on at once, not at the next tick.
//
// A Coordinator has the node's one lifecycle (startstop): Start launches
// the sessions, Stop leaves the cluster, waits and closes the client.
package etcdcoord

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/ontimehq/ontime/internal/cluster"
	"github.com/ontimehq/ontime/internal/logbridge"
	"github.com/ontimehq/ontime/internal/startstop"
	"github.com/ontimehq/ontime/internal/store"
)

// Config configures a coordinator: the node (cluster.NodeConfig) and
// etcd.
type Config struct {
	Endpoints []string
	// Username and Password authenticate to etcd; TLS, when set, is used
	// for every endpoint (https://host:port).
	Username string
	Password string
	TLS      *tls.Config
	Prefix   string // default "/ontime"
	cluster.NodeConfig
}

// Coordinator runs the protocol for one node.
type Coordinator struct {
	startstop.Base
	cluster.Core

	cli     *clientv3.Client
	prefix  string
	log     *slog.Logger
	started time.Time // this process's start, published with the membership key

	mu        sync.Mutex
	stopping  bool // Stop was called: no more starts, the client closes
	closeOnce sync.Once
	// leaderKey is this node's election key while it leads under term
	// (its creation revision): the fence of its assignment writes.
	leaderKey string
	term      int64
}

// New validates cfg and connects to etcd.
func New(ctx context.Context, cfg Config) (*Coordinator, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("cluster.etcd_endpoints: at least one endpoint is required")
	}
	// A session's TTL is whole seconds.
	if err := cfg.NodeConfig.Check(time.Second, "/|"); err != nil {
		return nil, err
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "/ontime"
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: cfg.Endpoints, DialTimeout: 5 * time.Second, Context: ctx,
		Username: cfg.Username, Password: cfg.Password, TLS: cfg.TLS,
		Logger: logbridge.Zap(cfg.Logger.With("component", "etcd-client"))})
	if err != nil {
		return nil, fmt.Errorf("cluster.etcd_endpoints: %w", err)
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := cli.Get(sctx, cfg.Prefix+"/probe"); err != nil {
		cli.Close()
		return nil, fmt.Errorf("cluster.etcd_endpoints: cannot reach etcd at %s: %w", strings.Join(cfg.Endpoints, ","), err)
	}
	return &Coordinator{Core: cluster.NewCore(cfg.NodeConfig), cli: cli, prefix: cfg.Prefix, log: cfg.Logger, started: cfg.Clock()}, nil
}

// Start joins the cluster and returns at once; sessions run until Stop
// (or ctx ends). Starting a running coordinator does nothing; a stopped
// one does not start again, its client being closed.
func (c *Coordinator) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopping {
		return errors.New("cluster: the etcd coordinator was stopped; build a new one")
	}
	return c.Go(ctx, c.run)
}

// Stop leaves the cluster (the session is revoked, so others take over at
// once rather than after the TTL; the node's items are dropped), waits for
// that, then closes the etcd client: whoever builds a coordinator stops
// it, started or not. Idempotent and safe to call concurrently: every
// caller returns once the client is closed.
func (c *Coordinator) Stop() {
	// Marked first, under the lock Start holds, so that no Start slips in
	// between the wait below and closing the client it would use.
	c.mu.Lock()
	c.stopping = true
	c.mu.Unlock()
	c.Base.Stop()
	c.closeOnce.Do(func() {
		if err := c.cli.Close(); err != nil {
			c.log.Warn("cluster etcd client close", "err", err)
		}
	})
}

// run takes part in the cluster until ctx ends, a session after another.
func (c *Coordinator) run(ctx context.Context) {
	for ctx.Err() == nil {
		if err := c.session(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("cluster etcd session ended", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(c.Cfg.TTL / 3):
			}
		}
	}
}

// session runs one etcd session: register, campaign, rebalance (leader),
// follow the assignment; it returns when the session is lost or ctx ends.
func (c *Coordinator) session(ctx context.Context) error {
	s, err := concurrency.NewSession(c.cli, concurrency.WithTTL(int(c.Cfg.TTL/time.Second)), concurrency.WithContext(ctx))
	if err != nil {
		return err
	}
	defer func() {
		c.Drop() // fenced: no session, no items
		rctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, _ = c.cli.Revoke(rctx, s.Lease())
		s.Orphan()
	}()
	if _, err := c.cli.Put(ctx, c.prefix+"/nodes/"+c.Cfg.NodeID, cluster.EncodeMember(c.Member(c.started)), clientv3.WithLease(s.Lease())); err != nil {
		return err
	}
	e := concurrency.NewElection(s, c.prefix+"/leader")
	var term int64
	var termMu sync.Mutex
	campaignCtx, stopCampaign := context.WithCancel(ctx)
	defer stopCampaign()
	go func() {
		if err := e.Campaign(campaignCtx, c.Cfg.NodeID); err == nil {
			termMu.Lock()
			term = e.Rev()
			termMu.Unlock()
			c.mu.Lock()
			c.leaderKey, c.term = e.Key(), e.Rev()
			c.mu.Unlock()
			c.log.Info("cluster leader elected", "node", c.Cfg.NodeID, "term", e.Rev())
			// The new leader plans now: the one before is gone, and its
			// items wait for an owner.
			c.Kick()
		}
	}()
	// The rounds end when the session does: its lease is gone, and with it
	// this node's membership and leader key.
	rounds, endRounds := context.WithCancel(ctx)
	defer endRounds()
	lost := make(chan struct{})
	go func() {
		defer close(lost)
		select {
		case <-s.Done():
			endRounds()
		case <-rounds.Done():
		}
	}()
	defer func() { endRounds(); <-lost }()
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		c.watch(rounds)
	}()
	defer func() { endRounds(); <-watched }()
	c.RunRounds(rounds, func(rctx context.Context) {
		// The session keeps its lease alive on its own; this renewal is
		// the round's, so that the node knows when the lease was last
		// renewed and lets go of its items (RunRounds) before etcd may
		// end the lease (Core.Renew) — the session alone would notice only once
		// it has.
		sent := time.Now()
		if _, err := c.cli.KeepAliveOnce(rctx, s.Lease()); err != nil {
			c.log.Warn("cluster etcd lease renewal failed", "err", err)
			return
		}
		c.Renew(sent)
		termMu.Lock()
		t := term
		termMu.Unlock()
		if t > 0 {
			if err := c.rebalance(rctx, e, t); err != nil {
				c.log.Warn("cluster rebalance failed", "err", err)
			}
		}
		if err := c.readOwn(rctx); err != nil {
			c.log.Warn("cluster read assignment failed", "err", err)
		}
		if err := c.readHandlers(rctx); err != nil {
			c.log.Warn("cluster read membership failed", "err", err)
		}
	}, c.Drop)
	if ctx.Err() != nil {
		return nil
	}
	return errors.New("session lease lost")
}

// watch kicks a round (cluster.Core.Kick) at every change under the
// prefix until ctx ends, so that nobody waits for the next tick: a member
// key deleted (its node left, or its lease expired: the node died), a
// new one (a join), a leader key, the assignment written (its new owners
// read it at once). The rounds stay what keeps the node safe; a watch
// that ends (no etcd leader, a compaction) is opened again after a TTL/3
// of rounds on their own.
func (c *Coordinator) watch(ctx context.Context) {
	for ctx.Err() == nil {
		for range c.cli.Watch(clientv3.WithRequireLeader(ctx), c.prefix+"/", clientv3.WithPrefix()) {
			c.Kick()
		}
		select {
		case <-ctx.Done():
		case <-time.After(c.Cfg.TTL / 3):
		}
	}
}

func (c *Coordinator) assignment(ctx context.Context) (map[string]store.Grant, error) {
	resp, err := c.cli.Get(ctx, c.prefix+"/assign/", clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	out := make(map[string]store.Grant, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		item := strings.TrimPrefix(string(kv.Key), c.prefix+"/assign/")
		if g, ok := cluster.ParseGrant(string(kv.Value)); ok {
			out[item] = g
		}
	}
	return out, nil
}

// liveNodes reads the membership: every key is a live node's (its
// session's lease keeps it).
func (c *Coordinator) liveNodes(ctx context.Context) (map[string]cluster.Member, error) {
	resp, err := c.cli.Get(ctx, c.prefix+"/nodes/", clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	out := map[string]cluster.Member{}
	for _, kv := range resp.Kvs {
		out[strings.TrimPrefix(string(kv.Key), c.prefix+"/nodes/")] = cluster.DecodeMember(string(kv.Value))
	}
	return out, nil
}

// readHandlers refreshes which live nodes handle which topic from the
// membership, once a round, so the submit path never asks etcd.
func (c *Coordinator) readHandlers(ctx context.Context) error {
	live, err := c.liveNodes(ctx)
	if err != nil {
		return err
	}
	c.SetHandlers(live)
	return nil
}

// rebalance writes the assignment for the live nodes, fenced by the
// leader key: if this node is no longer leader, the transaction fails.
func (c *Coordinator) rebalance(ctx context.Context, e *concurrency.Election, term int64) error {
	live, err := c.liveNodes(ctx)
	if err != nil {
		return err
	}
	cur, err := c.assignment(ctx)
	if err != nil {
		return err
	}
	return c.Rebalance(term, cluster.Zones(live), cur, func(grants map[string]store.Grant, drop []string) (bool, error) {
		return c.writeAssignment(ctx, term, grants, drop)
	})
}

// writeAssignment writes grants and deletes drop in one transaction
// fenced by the leader key: held is false, and nothing written, once the
// key created at revision term (the leader's) is gone.
func (c *Coordinator) writeAssignment(ctx context.Context, term int64, grants map[string]store.Grant, drop []string) (held bool, err error) {
	c.mu.Lock()
	leaderKey := c.leaderKey
	if c.term != term {
		leaderKey = c.prefix + "/leader/none" // never led under term: nothing passes
	}
	c.mu.Unlock()
	var ops []clientv3.Op
	for it, g := range grants {
		ops = append(ops, clientv3.OpPut(c.prefix+"/assign/"+it, cluster.GrantValue(g)))
	}
	for _, it := range drop {
		ops = append(ops, clientv3.OpDelete(c.prefix+"/assign/"+it))
	}
	resp, err := c.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(leaderKey), "=", term)).Then(ops...).Commit()
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}
func (c *Coordinator) readOwn(ctx context.Context) error {
	all, err := c.assignment(ctx)
	if err != nil {
		return err
	}
	// Follow has told the node's stages to stop on what it lost: end the
	// handover wait of those items (see cluster.LetGo), each only if its
	// grant is still the one read.
	for _, it := range c.Follow(all) {
		g := all[it]
		key := c.prefix + "/assign/" + it
		moved := g
		moved.Since = c.Now()
		if _, err := c.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.Value(key), "=", cluster.GrantValue(g))).
			Then(clientv3.OpPut(key, cluster.GrantValue(moved))).Commit(); err != nil {
			return fmt.Errorf("hand over %s: %w", it, err)
		}
	}
	return nil
}

// Status reads the cluster's state from etcd.
func (c *Coordinator) Status(ctx context.Context) (cluster.Status, error) {
	resp, err := c.cli.Get(ctx, c.prefix+"/leader/", clientv3.WithFirstCreate()...)
	if err != nil {
		return cluster.Status{}, err
	}
	var leader string
	var term int64
	if len(resp.Kvs) > 0 {
		leader, term = string(resp.Kvs[0].Value), resp.Kvs[0].CreateRevision
	}
	live, err := c.liveNodes(ctx)
	if err != nil {
		return cluster.Status{}, err
	}
	assign, err := c.assignment(ctx)
	if err != nil {
		return cluster.Status{}, err
	}
	return cluster.StatusOf(leader, term, live, assign, c.Now()), nil
}
