package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ontimehq/ontime/internal/store"
)

// NodeConfig is what every coordinator needs of the node it runs in; each
// coordinator's Config embeds it beside its backend's settings.
type NodeConfig struct {
	NodeID string
	Addr   string        // the node's API address, shown in the cluster view
	TTL    time.Duration // cluster.lease_ttl; default DefaultLeaseTTL
	Items  []string      // every sharding item's key, identical on all nodes
	// Topics returns the topics this node has Go handlers for (nil:
	// none), published with its membership.
	Topics func() []string
	// Incarnation is the ID of this process (store.Incarnation; 0: none),
	// published with its membership: when it changes, the others know the
	// node restarted and end the leases held under its previous process's
	// tokens at once, however short the restart.
	Incarnation int64
	// Version is this node's build version, published with its
	// membership so the cluster view shows every node's.
	Version string
	// Zone is the node's cluster.zone ("": none), published with its
	// membership: the leader gives the items of a zone to its nodes.
	Zone string
	// ItemZone is the zone of an item (nil, or "": none), the zone of its
	// database (store.zones); identical on all nodes.
	ItemZone func(item string) string
	Logger   *slog.Logger
	// OnAssign is called from the coordinator's goroutine whenever the set
	// of items this node owns changes (nil: none owned).
	OnAssign func(term int64, items []string)
	// HandOverAtOnce says which items this node, once it has read that
	// they moved away and stopped on them, hands over at once instead of
	// letting the new owner wait a TTL (nil: none). Only items that two
	// nodes may briefly both act on belong here: task tables, whose
	// claims are atomic; not schedules or scan jobs, whose wait is what
	// keeps a run from overlapping the next owner's.
	HandOverAtOnce func(item string) bool
	// Clock is the node's wall clock (nil: time.Now). Grants' start times
	// are wall times compared across nodes: the contract suite skews it
	// to hold a coordinator to the documented clock-skew bound (docs/coordinators.md) (MaxClockSkew).
	Clock func() time.Time
}

// MaxClockSkew is the largest difference between two nodes' clocks the
// coordinators are built for at a lease TTL of ttl (docs/coordinators.md): a
// tenth of it. The margins it eats are the handover wait (an item moved
// from a live node starts a TTL after the leader's clock, and its old
// owner lets go within TTL/3 of real time) and, for the database
// coordinator, heartbeats compared by other nodes' clocks (a node fences
// itself 2/3 TTL after its last heartbeat, the others call it dead a TTL
// after it by their clocks).
func MaxClockSkew(ttl time.Duration) time.Duration { return ttl / 10 }

// Check fills in NodeConfig's defaults and validates it, naming the
// config key of what is wrong. minTTL is the least lease TTL the backend
// can keep; forbidden the characters a node ID must not hold in its keys.
func (c *NodeConfig) Check(minTTL time.Duration, forbidden string) error {
	if c.NodeID == "" || len(c.NodeID) > 128 || (forbidden != "" && strings.ContainsAny(c.NodeID, forbidden)) {
		if forbidden != "" {
			return fmt.Errorf("node_id: %q must be 1 to 128 characters without any of %q for a cluster", c.NodeID, forbidden)
		}
		return fmt.Errorf("node_id: %q must be 1 to 128 characters for a cluster", c.NodeID)
	}
	if err := CheckZone("cluster.zone", c.Zone); err != nil {
		return err
	}
	if c.TTL == 0 {
		c.TTL = DefaultLeaseTTL
	}
	if c.TTL < minTTL || c.TTL > 10*time.Minute {
		return fmt.Errorf("cluster.lease_ttl: %s is out of range %s..10m", c.TTL, minTTL)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	c.Items = slices.Sorted(slices.Values(c.Items))
	return nil
}

// Core is the part of a node's coordinator that does not depend on the
// backend: its items, what it owns of them, and the topics' handlers.
// Every coordinator embeds one.
type Core struct {
	Cfg      NodeConfig
	owned    *Tracker
	handlers *Handlers
	lease    *lease
	// kick asks RunRounds for a round now (Kick); one pending is enough.
	kick chan struct{}
}

// NewCore builds a Core for a checked cfg.
func NewCore(cfg NodeConfig) Core {
	return Core{Cfg: cfg, owned: NewTracker(cfg.OnAssign), handlers: NewHandlers(), lease: &lease{poke: make(chan struct{}, 1)},
		kick: make(chan struct{}, 1)}
}

// AddItems adds sharding items (scan jobs' items) to those the
// coordinator assigns. Call it before Start, with the same items on every
// node.
func (c *Core) AddItems(items ...string) {
	c.Cfg.Items = slices.Sorted(slices.Values(append(c.Cfg.Items, items...)))
}

// Handlers is which live nodes handle which topic, as the last round read.
func (c *Core) Handlers() *Handlers { return c.handlers }

// Now is the node's wall clock.
func (c *Core) Now() time.Time { return c.Cfg.Clock() }

// Topics is what the node publishes with its membership.
func (c *Core) Topics() []string {
	if c.Cfg.Topics == nil {
		return nil
	}
	return c.Cfg.Topics()
}

// Member is this node's membership record.
func (c *Core) Member(started time.Time) Member {
	return Member{Addr: c.Cfg.Addr, Topics: c.Topics(), Started: started, Incarnation: c.Cfg.Incarnation, Version: c.Cfg.Version, Zone: c.Cfg.Zone}
}

// Drop fences the node: it owns nothing until it reads the assignment
// again under a lease.
func (c *Core) Drop() {
	c.lease.mu.Lock()
	defer c.lease.mu.Unlock()
	c.owned.Set(0, nil)
}

// Owned is what the node owns now.
func (c *Core) Owned() []string { return c.owned.Items() }

// Follow sets what the node owns from every item's grant and returns the
// items it lost whose handover it may end at once (LetGo): the owner has
// stopped on them when Follow returns. A node whose lease ran out (Renew)
// owns nothing, whatever the grants say.
func (c *Core) Follow(all map[string]store.Grant) []string {
	c.lease.mu.Lock()
	defer c.lease.mu.Unlock()
	if time.Now().After(c.lease.until) {
		c.owned.Set(0, nil)
		return nil
	}
	now := c.Now()
	before := c.owned.Items()
	c.owned.Set(Owned(all, c.Cfg.NodeID, now))
	return LetGo(before, all, c.Cfg.NodeID, now, c.Cfg.HandOverAtOnce)
}

// Plan is the leader's rebalance for the live nodes (ID → zone) from the current
// grants, at now under term: the grants to write (an item taken from a
// live node starts a TTL later, after that node has surely read the
// change or fenced itself, so no item has two live owners), the items to
// delete (no longer configured), and how many moved. Nothing to write
// when grants and drop are both empty. Items prefer nodes of their zone
// (AssignZones).
func (c *Core) Plan(live map[string]string, cur map[string]store.Grant, now time.Time, term int64) (grants map[string]store.Grant, drop []string, moved int) {
	prev := make(map[string]string, len(cur))
	for it, g := range cur {
		prev[it] = g.Node
	}
	next := AssignZones(c.Cfg.Items, live, c.Cfg.ItemZone, prev)
	grants = map[string]store.Grant{}
	for _, it := range c.Cfg.Items {
		if prev[it] == next[it] {
			continue
		}
		since := now
		if _, ok := live[prev[it]]; ok {
			since = now.Add(c.Cfg.TTL)
		}
		grants[it] = store.Grant{Node: next[it], Since: since, Term: term}
	}
	for it := range prev {
		if _, ok := next[it]; !ok {
			drop = append(drop, it)
		}
	}
	slices.Sort(drop)
	return grants, drop, Moved(prev, next)
}

// SetHandlers publishes the live members' topics.
func (c *Core) SetHandlers(live map[string]Member) {
	topics := make(map[string][]string, len(live))
	for id, m := range live {
		topics[id] = m.Topics
	}
	c.handlers.Set(topics)
}

// StatusOf is the cluster view of a coordinator whose membership lists
// live nodes only (a key under a lease, an ephemeral znode): every member
// is live, heard of now.
func StatusOf(leader string, term int64, live map[string]Member, assign map[string]store.Grant, now time.Time) Status {
	st := Status{Leader: leader, Term: term, Assignment: make(map[string]string, len(assign))}
	counts := map[string]int{}
	for it, g := range assign {
		st.Assignment[it] = g.Node
		counts[g.Node]++
	}
	for id, m := range live {
		st.Nodes = append(st.Nodes, store.NodeStatus{ID: id, Addr: m.Addr, Topics: m.Topics, Heartbeat: now, Live: true, Items: counts[id],
			Started: m.Started, Incarnation: m.Incarnation, Version: m.Version, Zone: m.Zone})
	}
	slices.SortFunc(st.Nodes, func(a, b store.NodeStatus) int { return strings.Compare(a.ID, b.ID) })
	return st
}

// GrantValue is an item's grant as the key-value coordinators keep it:
// "node|since µs|term".
func GrantValue(g store.Grant) string {
	return fmt.Sprintf("%s|%d|%d", g.Node, g.Since.UnixMicro(), g.Term)
}

// ParseGrant reads GrantValue back; ok is false for anything else.
func ParseGrant(v string) (store.Grant, bool) {
	p := strings.Split(v, "|")
	if len(p) != 3 {
		return store.Grant{}, false
	}
	var since, term int64
	if _, err := fmt.Sscan(p[1], &since); err != nil {
		return store.Grant{}, false
	}
	if _, err := fmt.Sscan(p[2], &term); err != nil {
		return store.Grant{}, false
	}
	return store.Grant{Node: p[0], Since: time.UnixMicro(since), Term: term}, true
}

// lease is how long the node may act on its items: until 2/3 TTL after
// it sent the last request that renewed its lease with the backend.
type lease struct {
	mu    sync.Mutex
	until time.Time // monotonic
	poke  chan struct{}
}

// Renew records that a request sent at sent renewed the node's lease
// (a heartbeat, a key's expiry, a session's ping): the node may act on its
// items until 2/3 TTL after sent. The backend counts its TTL from when it
// received the request, later still, so the node has let go before anyone
// may call it dead. Call it from the round, before Follow.
func (c *Core) Renew(sent time.Time) {
	c.lease.mu.Lock()
	if u := sent.Add(c.Cfg.TTL * 2 / 3); u.After(c.lease.until) {
		c.lease.until = u
	}
	c.lease.mu.Unlock()
	select {
	case c.lease.poke <- struct{}{}:
	default:
	}
}

// Kick asks for a round as soon as the current one (if any) ends, rather
// than at the next tick: a coordinator whose backend tells it of a change
// (a watch: a member gone, a new leader, a new assignment) reacts at once.
// A round kicked is an ordinary round, only sooner: it renews, plans and
// follows the same way, so safety never depends on when rounds run. Kicks
// while one is pending are one round.
func (c *Core) Kick() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// RunRounds is a coordinator's loop: round every TTL/3, and whenever
// kicked (Kick), until ctx ends, each under a deadline of TTL/3. Beside it a watchdog runs fence — the
// node drops its items and leadership — the moment the lease Renew
// extended runs out, even while a round hangs on a backend that stopped
// answering. Durations here are the process's monotonic clock, which no
// wall-clock skew moves. RunRounds returns once both have ended.
func (c *Core) RunRounds(ctx context.Context, round func(ctx context.Context), fence func()) {
	ttl := c.Cfg.TTL
	done := make(chan struct{})
	go func() {
		defer close(done)
		timer := time.NewTimer(ttl)
		defer timer.Stop()
		fenced := true // nothing to let go of before the first renewal
		for {
			c.lease.mu.Lock()
			left := time.Until(c.lease.until)
			c.lease.mu.Unlock()
			if left <= 0 && !fenced {
				fence()
				fenced = true
			}
			if left > 0 {
				fenced = false
				timer.Reset(left)
			}
			select {
			case <-ctx.Done():
				return
			case <-c.lease.poke:
			case <-timer.C:
			}
		}
	}()
	defer func() { <-done }()
	tick := time.NewTicker(ttl / 3)
	defer tick.Stop()
	for {
		rctx, cancel := context.WithTimeout(ctx, ttl/3)
		round(rctx)
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-c.kick:
		}
	}
}

// Rebalance is the leader's turn under term: it plans the assignment for
// the live nodes (ID → zone) from cur (Plan) and, when anything changes, writes it
// with write, which the backend fences by term (held false: another node
// leads now, nothing was written).
func (c *Core) Rebalance(term int64, live map[string]string, cur map[string]store.Grant, write func(grants map[string]store.Grant, drop []string) (held bool, err error)) error {
	grants, drop, moved := c.Plan(live, cur, c.Now(), term)
	if len(grants) == 0 && len(drop) == 0 {
		return nil
	}
	held, err := write(grants, drop)
	if err != nil {
		return err
	}
	if !held {
		return errors.New("no longer leader")
	}
	c.Cfg.Logger.Info("cluster rebalanced", "term", term, "nodes", len(live), "moved", moved)
	return nil
}

// IDs lists the members' IDs.
func IDs(members map[string]Member) []string {
	return slices.Sorted(maps.Keys(members))
}
