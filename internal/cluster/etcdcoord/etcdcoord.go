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
	"slices"
	"strconv"
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

// Config configures a coordinator.
type Config struct {
	Endpoints []string
	// Username and Password authenticate to etcd; TLS, when set, is used
	// for every endpoint (https://host:port).
	Username string
	Password string
	TLS      *tls.Config
	Prefix   string // default "/ontime"
	NodeID   string
	Addr     string
	TTL      time.Duration // whole seconds, at least 1s; default 10s
	Items    []string
	// Topics returns the topics this node has Go handlers for (nil:
	// none), published with its membership key at each session's start.
	Topics func() []string
	// Incarnation is the ID of this process (store.Incarnation; 0: none),
	// published with its membership key: a node restarted under the same
	// ID puts its key again under a new session before the old session's
	// lease ends, so the key never disappears; the changed incarnation is
	// how the others know to end the leases its previous process held.
	Incarnation int64
	// Version is this node's build version, published with its
	// membership key so the cluster view shows every node's.
	Version  string
	Logger   *slog.Logger
	OnAssign func(term int64, items []string)
	// HandOverAtOnce says which items this node, once it has read that
	// they moved away and stopped on them, hands over at once instead of
	// letting the new owner wait a TTL (nil: none). Only items that two
	// nodes may briefly both act on belong here: task tables, whose
	// claims are atomic; not schedules or scan jobs, whose wait is what
	// keeps a run from overlapping the next owner's.
	HandOverAtOnce func(item string) bool
}

// Coordinator runs the protocol for one node.
type Coordinator struct {
	startstop.Base

	cfg Config
	cli *clientv3.Client
	log *slog.Logger

	owned    *cluster.Tracker
	handlers *cluster.Handlers
	started  time.Time // this process's start, published with the membership key

	mu        sync.Mutex
	stopping  bool // Stop was called: no more starts, the client closes
	closeOnce sync.Once
}

// New validates cfg and connects to etcd.
func New(ctx context.Context, cfg Config) (*Coordinator, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("cluster.etcd_endpoints: at least one endpoint is required")
	}
	if cfg.NodeID == "" || strings.ContainsAny(cfg.NodeID, "/|") {
		return nil, fmt.Errorf("node_id: %q must be non-empty without / or |", cfg.NodeID)
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "/ontime"
	}
	if cfg.TTL == 0 {
		cfg.TTL = cluster.DefaultLeaseTTL
	}
	if cfg.TTL < time.Second || cfg.TTL > 10*time.Minute {
		return nil, fmt.Errorf("cluster.lease_ttl: %s is out of range 1s..10m for etcd", cfg.TTL)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.Items = slices.Sorted(slices.Values(cfg.Items))
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
	return &Coordinator{cfg: cfg, cli: cli, log: cfg.Logger, owned: cluster.NewTracker(cfg.OnAssign), handlers: cluster.NewHandlers(),
		started: time.Now()}, nil
}

// AddItems adds sharding items (scan jobs' items) to those the
// coordinator assigns. Call it before Start, with the same items on every
// node.
func (c *Coordinator) AddItems(items ...string) {
	c.cfg.Items = slices.Sorted(slices.Values(append(c.cfg.Items, items...)))
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
			case <-time.After(c.cfg.TTL / 3):
			}
		}
	}
}

// session runs one etcd session: register, campaign, rebalance (leader),
// follow the assignment; it returns when the session is lost or ctx ends.
func (c *Coordinator) session(ctx context.Context) error {
	s, err := concurrency.NewSession(c.cli, concurrency.WithTTL(int(c.cfg.TTL/time.Second)), concurrency.WithContext(ctx))
	if err != nil {
		return err
	}
	defer func() {
		c.setOwned(0, nil) // fenced: no session, no items
		rctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, _ = c.cli.Revoke(rctx, s.Lease())
		s.Orphan()
	}()
	me := cluster.Member{Addr: c.cfg.Addr, Started: c.started, Incarnation: c.cfg.Incarnation, Version: c.cfg.Version}
	if c.cfg.Topics != nil {
		me.Topics = c.cfg.Topics()
	}
	if _, err := c.cli.Put(ctx, c.cfg.Prefix+"/nodes/"+c.cfg.NodeID, cluster.EncodeMember(me), clientv3.WithLease(s.Lease())); err != nil {
		return err
	}
	e := concurrency.NewElection(s, c.cfg.Prefix+"/leader")
	var term int64
	var termMu sync.Mutex
	campaignCtx, stopCampaign := context.WithCancel(ctx)
	defer stopCampaign()
	go func() {
		if err := e.Campaign(campaignCtx, c.cfg.NodeID); err == nil {
			termMu.Lock()
			term = e.Rev()
			termMu.Unlock()
			c.log.Info("cluster leader elected", "node", c.cfg.NodeID, "term", e.Rev())
		}
	}()
	tick := time.NewTicker(c.cfg.TTL / 3)
	defer tick.Stop()
	for {
		termMu.Lock()
		t := term
		termMu.Unlock()
		if t > 0 {
			if err := c.rebalance(ctx, e, t); err != nil {
				c.log.Warn("cluster rebalance failed", "err", err)
			}
		}
		if err := c.readOwn(ctx); err != nil {
			c.log.Warn("cluster read assignment failed", "err", err)
		}
		if err := c.readHandlers(ctx); err != nil {
			c.log.Warn("cluster read membership failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.Done():
			return errors.New("session lease lost")
		case <-tick.C:
		}
	}
}

func (c *Coordinator) assignment(ctx context.Context) (map[string]store.Grant, error) {
	resp, err := c.cli.Get(ctx, c.cfg.Prefix+"/assign/", clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	out := make(map[string]store.Grant, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		item := strings.TrimPrefix(string(kv.Key), c.cfg.Prefix+"/assign/")
		p := strings.Split(string(kv.Value), "|")
		if len(p) != 3 {
			continue
		}
		since, _ := strconv.ParseInt(p[1], 10, 64)
		term, _ := strconv.ParseInt(p[2], 10, 64)
		out[item] = store.Grant{Node: p[0], Since: time.UnixMicro(since), Term: term}
	}
	return out, nil
}

// liveNodes reads the membership: every key is a live node's (its
// session's lease keeps it).
func (c *Coordinator) liveNodes(ctx context.Context) (map[string]cluster.Member, error) {
	resp, err := c.cli.Get(ctx, c.cfg.Prefix+"/nodes/", clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	out := map[string]cluster.Member{}
	for _, kv := range resp.Kvs {
		out[strings.TrimPrefix(string(kv.Key), c.cfg.Prefix+"/nodes/")] = cluster.DecodeMember(string(kv.Value))
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
	topics := make(map[string][]string, len(live))
	for id, m := range live {
		topics[id] = m.Topics
	}
	c.handlers.Set(topics)
	return nil
}

// Handlers is which live nodes handle which topic, as the last round read.
func (c *Coordinator) Handlers() *cluster.Handlers { return c.handlers }

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
	prev := make(map[string]string, len(cur))
	for it, g := range cur {
		prev[it] = g.Node
	}
	nodes := make([]string, 0, len(live))
	for n := range live {
		nodes = append(nodes, n)
	}
	next := cluster.AssignGroups(c.cfg.Items, nodes, prev)
	now := time.Now()
	var ops []clientv3.Op
	for _, it := range c.cfg.Items {
		if prev[it] == next[it] {
			continue
		}
		since := now
		if _, ok := live[prev[it]]; ok {
			since = now.Add(c.cfg.TTL) // the old owner reads the change within TTL/3
		}
		ops = append(ops, clientv3.OpPut(c.cfg.Prefix+"/assign/"+it, grantValue(next[it], since, term)))
	}
	if len(ops) == 0 {
		return nil
	}
	resp, err := c.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(e.Key()), "=", term)).Then(ops...).Commit()
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return errors.New("no longer leader")
	}
	c.log.Info("cluster rebalanced", "term", term, "nodes", len(nodes), "moved", len(ops))
	return nil
}

func (c *Coordinator) readOwn(ctx context.Context) error {
	all, err := c.assignment(ctx)
	if err != nil {
		return err
	}
	now := time.Now()
	before := c.owned.Items()
	c.owned.Set(cluster.Owned(all, c.cfg.NodeID, now))
	// Set has told the node's stages to stop on what it lost: end the
	// handover wait of those items (see cluster.LetGo), each only if its
	// grant is still the one read.
	for _, it := range cluster.LetGo(before, all, c.cfg.NodeID, now, c.cfg.HandOverAtOnce) {
		g := all[it]
		key := c.cfg.Prefix + "/assign/" + it
		at := time.Now()
		if _, err := c.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.Value(key), "=", grantValue(g.Node, g.Since, g.Term))).
			Then(clientv3.OpPut(key, grantValue(g.Node, at, g.Term))).Commit(); err != nil {
			return fmt.Errorf("hand over %s: %w", it, err)
		}
	}
	return nil
}

// grantValue is an item's grant as kept under its assign key.
func grantValue(node string, since time.Time, term int64) string {
	return node + "|" + strconv.FormatInt(since.UnixMicro(), 10) + "|" + strconv.FormatInt(term, 10)
}

func (c *Coordinator) setOwned(term int64, items []string) { c.owned.Set(term, items) }

// Status reads the cluster's state from etcd.
func (c *Coordinator) Status(ctx context.Context) (cluster.Status, error) {
	var st cluster.Status
	resp, err := c.cli.Get(ctx, c.cfg.Prefix+"/leader/", clientv3.WithFirstCreate()...)
	if err != nil {
		return st, err
	}
	if len(resp.Kvs) > 0 {
		st.Leader, st.Term = string(resp.Kvs[0].Value), resp.Kvs[0].CreateRevision
	}
	live, err := c.liveNodes(ctx)
	if err != nil {
		return st, err
	}
	assign, err := c.assignment(ctx)
	if err != nil {
		return st, err
	}
	st.Assignment = make(map[string]string, len(assign))
	counts := map[string]int{}
	for it, g := range assign {
		st.Assignment[it] = g.Node
		counts[g.Node]++
	}
	for id, m := range live {
		st.Nodes = append(st.Nodes, store.NodeStatus{ID: id, Addr: m.Addr, Topics: m.Topics, Heartbeat: time.Now(), Live: true, Items: counts[id],
			Started: m.Started, Incarnation: m.Incarnation, Version: m.Version})
	}
	slices.SortFunc(st.Nodes, func(a, b store.NodeStatus) int { return strings.Compare(a.ID, b.ID) })
	return st, nil
}
