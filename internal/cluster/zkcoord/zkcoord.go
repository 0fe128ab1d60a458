// Package zkcoord coordinates a cluster through ZooKeeper, for teams whose
// services already run it (ElasticJob's registry, seed 000's second
// level): the node's session is its lease (session timeout =
// cluster.lease_ttl), membership and election are ephemeral znodes of that
// session, and the assignment is one znode the leader writes in a
// multi-op that fails once the leader's election znode is gone.
//
//	<prefix>/nodes/<id>          ephemeral: cluster.Member (address, topics, process)
//	<prefix>/election/…n_<seq>   ephemeral sequential: the node's ID; the lowest leads
//	<prefix>/assign              JSON: item → "node|since µs|term"
//
// The term is the leader's sequence number plus one: ZooKeeper draws it
// from the election znode's parent's cversion, which only grows, so a
// later leader always holds a higher term. The fence of an assignment
// write is a version check (-1: it exists) of the writer's election znode
// in the same multi-op, beside the assign znode's version (a
// compare-and-set against the hand-overs): a leader whose session ended —
// and with it its election znode — writes nothing, however long it paused.
//
// As in the other coordinators, a node lets go of its items 2/3 TTL after
// the last request its session answered (cluster.Core.Renew), before the
// server, which counts the session timeout from then or later, expires it.
// Rounds run every TTL/3 and, through watches (arm), at every change of
// the membership, the election or the assignment: a dead node's ephemeral
// znodes deleted when its session expires are acted on at once.
package zkcoord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ontimehq/ontime/internal/cluster"
	"github.com/ontimehq/ontime/internal/startstop"
	"github.com/ontimehq/ontime/internal/store"
)

// Config configures a coordinator: the node (cluster.NodeConfig) and
// ZooKeeper.
type Config struct {
	Servers []string // host:port of the ensemble's servers
	Prefix  string   // the root znode of the cluster's znodes; default "/ontime"
	// Username and Password, when set, authenticate the session (digest
	// scheme) and the znodes it creates are readable and writable by that
	// identity alone.
	Username string
	Password string
	cluster.NodeConfig

	// dial, when set, replaces the dialer (tests put a proxy in between).
	dial zk.Dialer
}

// Coordinator runs the protocol for one node.
type Coordinator struct {
	startstop.Base
	cluster.Core

	conn    *zk.Conn
	prefix  string
	acl     []zk.ACL
	log     *slog.Logger
	started time.Time

	mu        sync.Mutex
	session   int64  // the session the znodes below belong to
	wrote     string // the membership value last written
	elect     string // this node's election znode's path ("" none)
	term      int64  // the term this node leads under, 0 if not leader
	closeOnce sync.Once

	armed   map[string]bool // the znodes a watch of this node is set on (arm), under mu
	watches sync.WaitGroup  // arm's goroutines, each until its watch fires
}

// New validates cfg, connects to ZooKeeper and makes the cluster's
// persistent znodes.
func New(ctx context.Context, cfg Config) (*Coordinator, error) {
	if len(cfg.Servers) == 0 {
		return nil, errors.New("cluster.zookeeper_servers: at least one server is required")
	}
	for i, s := range cfg.Servers {
		if _, _, err := net.SplitHostPort(s); err != nil {
			return nil, fmt.Errorf("cluster.zookeeper_servers[%d]: %q is not host:port", i, s)
		}
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "/ontime"
	}
	if !strings.HasPrefix(cfg.Prefix, "/") || strings.HasSuffix(cfg.Prefix, "/") || strings.Contains(cfg.Prefix, "//") {
		return nil, fmt.Errorf("cluster.zookeeper_prefix: %q must be an absolute znode path without a trailing slash", cfg.Prefix)
	}
	if (cfg.Username == "") != (cfg.Password == "") {
		return nil, errors.New("cluster.zookeeper_username: a username and a password go together")
	}
	// ZooKeeper's default bounds on a session's timeout are 2 and 20
	// ticks (4s..40s with tickTime 2s): the server may change the TTL
	// asked for, which New checks below.
	if err := cfg.NodeConfig.Check(time.Second, "/"); err != nil {
		return nil, err
	}
	dial := cfg.dial
	if dial == nil {
		dial = net.DialTimeout
	}
	zl := &zkLogger{log: cfg.Logger}
	conn, events, err := zk.Connect(cfg.Servers, cfg.TTL, zk.WithLogger(zl), zk.WithLogInfo(true), zk.WithDialer(dial))
	if err != nil {
		return nil, fmt.Errorf("cluster.zookeeper_servers: %w", err)
	}
	c := &Coordinator{Core: cluster.NewCore(cfg.NodeConfig), conn: conn, prefix: cfg.Prefix, log: cfg.Logger, started: cfg.Clock(),
		acl: zk.WorldACL(zk.PermAll), armed: map[string]bool{}}
	if err := c.connected(ctx, events); err != nil {
		conn.Close()
		return nil, fmt.Errorf("cluster.zookeeper_servers: cannot reach ZooKeeper at %s: %w", strings.Join(cfg.Servers, ","), err)
	}
	// The server may grant another timeout than asked (its min and max
	// session timeouts): a shorter one would expire the session before
	// the node lets go of its items at 2/3 of the TTL.
	if granted := zl.waitTimeout(time.Second); granted != 0 && granted < cfg.TTL {
		conn.Close()
		return nil, fmt.Errorf("cluster.lease_ttl: ZooKeeper grants sessions of %s, not %s: set lease_ttl within the servers' minSessionTimeout..maxSessionTimeout", granted, cfg.TTL)
	}
	if cfg.Username != "" {
		cred := cfg.Username + ":" + cfg.Password
		if err := conn.AddAuth("digest", []byte(cred)); err != nil {
			conn.Close()
			return nil, fmt.Errorf("cluster.zookeeper_username: %w", err)
		}
		c.acl = zk.DigestACL(zk.PermAll, cfg.Username, cfg.Password)
	}
	for _, p := range []string{cfg.Prefix, cfg.Prefix + "/nodes", cfg.Prefix + "/election", cfg.Prefix + "/assign"} {
		if err := c.ensure(p); err != nil {
			conn.Close()
			return nil, fmt.Errorf("cluster.zookeeper_prefix: create %s: %w", p, err)
		}
	}
	return c, nil
}

// connected waits up to 5 s for a session; the events channel is left to
// the client afterwards (it drops what nobody reads).
func (c *Coordinator) connected(ctx context.Context, events <-chan zk.Event) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				return nil
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// ensure creates a persistent znode and its parents when missing.
func (c *Coordinator) ensure(path string) error {
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	for i := range parts {
		p := "/" + strings.Join(parts[:i+1], "/")
		if _, err := c.conn.Create(p, nil, 0, c.acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
	}
	return nil
}

// Start joins the cluster and returns at once; rounds run until Stop.
func (c *Coordinator) Start(ctx context.Context) error { return c.Go(ctx, c.run) }

// Stop leaves the cluster — the session is closed, so its ephemeral
// znodes go at once and the others take over at once (their watches) —
// waits, and closes the client: whoever builds a coordinator stops it.
func (c *Coordinator) Stop() {
	c.Base.Stop()
	c.closeOnce.Do(c.conn.Close)
}

func (c *Coordinator) run(ctx context.Context) {
	c.RunRounds(ctx, func(rctx context.Context) {
		c.arm(ctx)
		c.round(rctx)
	}, c.fence)
	c.Drop()
	c.closeOnce.Do(c.conn.Close)
	c.watches.Wait()
}

// arm sets a watch, where none is set, on the membership's and the
// election's children and on the assignment's data; each kicks a round
// (cluster.Core.Kick) when it fires, so that nobody waits for the next
// tick: a member's or a candidate's ephemeral znode deleted (its node
// left, or its session expired: the node died) or created, the
// assignment written (its new owners read it at once). Called before the
// round reads, so that a change after its reads fires a watch: none is
// missed. A watch also fires, and is set again by the next round, when
// the session ends or the client closes. The rounds stay what keeps the
// node safe; the watches only bring them sooner.
func (c *Coordinator) arm(ctx context.Context) {
	for _, path := range []string{c.prefix + "/nodes", c.prefix + "/election", c.prefix + "/assign"} {
		c.mu.Lock()
		armed := c.armed[path]
		c.mu.Unlock()
		if armed {
			continue
		}
		var ch <-chan zk.Event
		var err error
		if path == c.prefix+"/assign" {
			// ExistsW: a data watch without reading the data.
			_, _, ch, err = c.conn.ExistsW(path)
		} else {
			_, _, ch, err = c.conn.ChildrenW(path)
		}
		if err != nil {
			c.log.Debug("cluster zookeeper watch not set; the rounds' ticks follow changes", "path", path, "err", err)
			continue
		}
		c.mu.Lock()
		c.armed[path] = true
		c.mu.Unlock()
		c.watches.Go(func() {
			select {
			case <-ch:
			case <-ctx.Done():
			}
			c.mu.Lock()
			c.armed[path] = false
			c.mu.Unlock()
			c.Kick()
		})
	}
}

func (c *Coordinator) fence() {
	c.log.Warn("cluster: ZooKeeper silent for 2/3 of the session timeout, dropping every item", "ttl", c.Cfg.TTL)
	c.Drop()
	c.mu.Lock()
	c.term = 0
	c.mu.Unlock()
}

func (c *Coordinator) round(ctx context.Context) {
	sent := time.Now()
	if err := c.register(); err != nil {
		c.log.Warn("cluster zookeeper membership failed", "err", err)
		return
	}
	c.Renew(sent)
	term, err := c.lead()
	if err != nil {
		c.log.Warn("cluster leader election failed", "err", err)
	}
	if term > 0 && ctx.Err() == nil {
		if err := c.rebalance(term); err != nil {
			c.log.Warn("cluster rebalance failed", "err", err)
		}
	}
	if ctx.Err() == nil {
		if err := c.readOwn(); err != nil {
			c.log.Warn("cluster read assignment failed", "err", err)
		}
	}
	if ctx.Err() == nil {
		if live, err := c.members(); err != nil {
			c.log.Warn("cluster read membership failed", "err", err)
		} else {
			c.SetHandlers(live)
		}
	}
}

// register makes sure the node's membership znode is this session's, with
// its current record. A request answered also tells that the session
// lives (the round's renewal). After a session expired, the znodes of the
// old one are gone and this node no longer leads.
func (c *Coordinator) register() error {
	path := c.prefix + "/nodes/" + c.Cfg.NodeID
	me := cluster.EncodeMember(c.Member(c.started))
	ok, st, err := c.conn.Exists(path)
	if err != nil {
		return err
	}
	sid := c.conn.SessionID()
	c.mu.Lock()
	if c.session != sid {
		if c.session != 0 {
			c.log.Warn("cluster zookeeper session changed: rejoining", "term", c.term)
		}
		c.session, c.elect, c.term, c.wrote = sid, "", 0, ""
	}
	wrote := c.wrote
	c.mu.Unlock()
	switch {
	case ok && st.EphemeralOwner == sid:
		if wrote == me {
			return nil
		}
		if _, err := c.conn.Set(path, []byte(me), -1); err != nil {
			return err
		}
	default:
		if ok {
			// Left by this node's previous process or session, whose lease
			// has not run out yet: the node is back, under this session.
			if err := c.conn.Delete(path, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
				return err
			}
		}
		if _, err := c.conn.Create(path, []byte(me), zk.FlagEphemeral, c.acl); err != nil {
			return err
		}
	}
	c.mu.Lock()
	c.wrote = me
	c.mu.Unlock()
	return nil
}

// seq is an election znode's sequence number; -1 when it has none.
func seq(name string) int64 {
	i := strings.LastIndex(name, "n_")
	if i < 0 {
		return -1
	}
	n, err := strconv.ParseInt(name[i+2:], 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// candidates lists the election znodes, lowest sequence first.
func (c *Coordinator) candidates() ([]string, error) {
	kids, _, err := c.conn.Children(c.prefix + "/election")
	if err != nil {
		return nil, err
	}
	kids = slices.DeleteFunc(kids, func(k string) bool { return seq(k) < 0 })
	slices.SortFunc(kids, func(a, b string) int { return int(seq(a) - seq(b)) })
	return kids, nil
}

// lead stands for election once a session and reads who leads: the node
// holding the lowest sequence, under term = sequence + 1.
func (c *Coordinator) lead() (int64, error) {
	c.mu.Lock()
	mine := c.elect
	c.mu.Unlock()
	if mine == "" {
		// Protected: a create whose answer was lost is found again, not
		// left behind as a candidate nobody knows.
		p, err := c.conn.CreateProtectedEphemeralSequential(c.prefix+"/election/n_", []byte(c.Cfg.NodeID), c.acl)
		if err != nil {
			return 0, err
		}
		mine = p
		c.mu.Lock()
		c.elect = p
		c.mu.Unlock()
	}
	kids, err := c.candidates()
	if err != nil {
		return 0, err
	}
	var term int64
	if len(kids) > 0 && c.prefix+"/election/"+kids[0] == mine {
		term = seq(kids[0]) + 1
	}
	c.mu.Lock()
	was := c.term
	c.term = term
	c.mu.Unlock()
	if term > 0 && was != term {
		c.log.Info("cluster leader elected", "node", c.Cfg.NodeID, "term", term)
	}
	return term, nil
}

// members reads the live members: the session's ephemeral znodes.
func (c *Coordinator) members() (map[string]cluster.Member, error) {
	kids, _, err := c.conn.Children(c.prefix + "/nodes")
	if err != nil {
		return nil, err
	}
	out := make(map[string]cluster.Member, len(kids))
	for _, id := range kids {
		v, _, err := c.conn.Get(c.prefix + "/nodes/" + id)
		if errors.Is(err, zk.ErrNoNode) {
			continue // gone since the list
		}
		if err != nil {
			return nil, err
		}
		out[id] = cluster.DecodeMember(string(v))
	}
	return out, nil
}

// assignment reads every grant and the assign znode's version.
func (c *Coordinator) assignment() (map[string]store.Grant, int32, error) {
	v, st, err := c.conn.Get(c.prefix + "/assign")
	if err != nil {
		return nil, 0, err
	}
	raw := map[string]string{}
	if len(v) > 0 {
		if err := json.Unmarshal(v, &raw); err != nil {
			return nil, 0, fmt.Errorf("%s/assign: %w", c.prefix, err)
		}
	}
	out := make(map[string]store.Grant, len(raw))
	for it, s := range raw {
		if g, ok := cluster.ParseGrant(s); ok {
			out[it] = g
		}
	}
	return out, st.Version, nil
}

func encodeAssignment(all map[string]store.Grant) []byte {
	raw := make(map[string]string, len(all))
	for it, g := range all {
		raw[it] = cluster.GrantValue(g)
	}
	b, _ := json.Marshal(raw) // strings only: cannot fail
	return b
}

func (c *Coordinator) rebalance(term int64) error {
	live, err := c.members()
	if err != nil {
		return err
	}
	cur, version, err := c.assignment()
	if err != nil {
		return err
	}
	return c.Rebalance(term, cluster.Zones(live), cur, func(grants map[string]store.Grant, drop []string) (bool, error) {
		return c.writeAssignment(term, cur, version, grants, drop)
	})
}

// writeAssignment writes cur with grants and without drop, fenced: in one
// multi-op with a check that this node's election znode of term still
// exists. held is false, and nothing written, once it does not (or the
// assignment changed since read at version: the next round writes again).
func (c *Coordinator) writeAssignment(term int64, cur map[string]store.Grant, version int32, grants map[string]store.Grant, drop []string) (bool, error) {
	c.mu.Lock()
	elect := c.elect
	if c.term != term || elect == "" {
		elect = c.prefix + "/election/none" // never led under term: nothing passes
	}
	c.mu.Unlock()
	next := make(map[string]store.Grant, len(cur)+len(grants))
	for it, g := range cur {
		next[it] = g
	}
	for it, g := range grants {
		next[it] = g
	}
	for _, it := range drop {
		delete(next, it)
	}
	_, err := c.conn.Multi(
		&zk.CheckVersionRequest{Path: elect, Version: -1},
		&zk.SetDataRequest{Path: c.prefix + "/assign", Data: encodeAssignment(next), Version: version})
	if errors.Is(err, zk.ErrNoNode) || errors.Is(err, zk.ErrBadVersion) {
		return false, nil
	}
	return err == nil, err
}

func (c *Coordinator) readOwn() error {
	all, version, err := c.assignment()
	if err != nil {
		return err
	}
	// Follow has told the node's stages to stop on what it lost: end the
	// handover wait of those items (see cluster.LetGo), in a
	// compare-and-set of the assign znode; a conflict re-reads, and items
	// whose grant changed meanwhile keep theirs.
	gone := c.Follow(all)
	for range 3 {
		if len(gone) == 0 {
			return nil
		}
		now := c.Now()
		for _, it := range gone {
			g := all[it]
			g.Since = now
			all[it] = g
		}
		_, err := c.conn.Set(c.prefix+"/assign", encodeAssignment(all), version)
		if !errors.Is(err, zk.ErrBadVersion) {
			return err
		}
		read := all
		if all, version, err = c.assignment(); err != nil {
			return err
		}
		gone = slices.DeleteFunc(gone, func(it string) bool {
			g, ok := all[it]
			was := read[it]
			return !ok || g.Node != was.Node || g.Term != was.Term || !g.Since.After(now)
		})
	}
	return nil
}

// Status reads the cluster's state from ZooKeeper.
func (c *Coordinator) Status(ctx context.Context) (cluster.Status, error) {
	kids, err := c.candidates()
	if err != nil {
		return cluster.Status{}, err
	}
	var leader string
	var term int64
	if len(kids) > 0 {
		v, _, err := c.conn.Get(c.prefix + "/election/" + kids[0])
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return cluster.Status{}, err
		}
		leader, term = string(v), seq(kids[0])+1
	}
	live, err := c.members()
	if err != nil {
		return cluster.Status{}, err
	}
	assign, _, err := c.assignment()
	if err != nil {
		return cluster.Status{}, err
	}
	return cluster.StatusOf(leader, term, live, assign, c.Now()), nil
}

// zkLogger sends the client's log lines to slog at debug (it reports
// every reconnect, which the coordinator's own warnings cover), and reads
// the session timeout the server granted from them: the client has no
// other way to tell it.
type zkLogger struct {
	log     *slog.Logger
	timeout atomic.Int64 // ms, 0 until a session was granted
}

func (l *zkLogger) Printf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if rest, ok := strings.CutPrefix(msg, "authenticated: id="); ok {
		if i := strings.Index(rest, "timeout="); i >= 0 {
			if ms, err := strconv.ParseInt(rest[i+len("timeout="):], 10, 64); err == nil {
				l.timeout.Store(ms)
			}
		}
	}
	l.log.Debug("zookeeper client: " + msg)
}

// waitTimeout returns the granted session timeout, waiting up to within
// for the line that tells it; 0 when none came.
func (l *zkLogger) waitTimeout(within time.Duration) time.Duration {
	deadline := time.Now().Add(within)
	for l.timeout.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	return time.Duration(l.timeout.Load()) * time.Millisecond
}
