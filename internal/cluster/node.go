package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
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
	Logger      *slog.Logger
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
	// to hold a coordinator to README's clock-skew bound (MaxClockSkew).
	Clock func() time.Time
}

// MaxClockSkew is the largest difference between two nodes' clocks the
// coordinators are built for at a lease TTL of ttl (README, Cluster): a
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
}

// NewCore builds a Core for a checked cfg.
func NewCore(cfg NodeConfig) Core {
	return Core{Cfg: cfg, owned: NewTracker(cfg.OnAssign), handlers: NewHandlers()}
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
	return Member{Addr: c.Cfg.Addr, Topics: c.Topics(), Started: started, Incarnation: c.Cfg.Incarnation}
}

// Drop fences the node: it owns nothing until it reads the assignment
// again under a lease.
func (c *Core) Drop() { c.owned.Set(0, nil) }

// Owned is what the node owns now.
func (c *Core) Owned() []string { return c.owned.Items() }

// Follow sets what the node owns from every item's grant and returns the
// items it lost whose handover it may end at once (LetGo): the owner has
// stopped on them when Follow returns.
func (c *Core) Follow(all map[string]store.Grant) []string {
	now := c.Now()
	before := c.owned.Items()
	c.owned.Set(Owned(all, c.Cfg.NodeID, now))
	return LetGo(before, all, c.Cfg.NodeID, now, c.Cfg.HandOverAtOnce)
}

// Plan is the leader's rebalance for the live nodes from the current
// grants, at now under term: the grants to write (an item taken from a
// live node starts a TTL later, after that node has surely read the
// change or fenced itself, so no item has two live owners), the items to
// delete (no longer configured), and how many moved. Nothing to write
// when grants and drop are both empty.
func (c *Core) Plan(live []string, cur map[string]store.Grant, now time.Time, term int64) (grants map[string]store.Grant, drop []string, moved int) {
	prev := make(map[string]string, len(cur))
	for it, g := range cur {
		prev[it] = g.Node
	}
	next := AssignGroups(c.Cfg.Items, live, prev)
	isLive := make(map[string]bool, len(live))
	for _, n := range live {
		isLive[n] = true
	}
	grants = map[string]store.Grant{}
	for _, it := range c.Cfg.Items {
		if prev[it] == next[it] {
			continue
		}
		since := now
		if isLive[prev[it]] {
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
			Started: m.Started, Incarnation: m.Incarnation})
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

// RunRounds is the loop of a coordinator whose lease is kept by the
// backend's clock (a key's expiry in Redis, a ZooKeeper session): it calls
// round every TTL/3 until ctx ends. round returns when the request that
// renewed the node's lease was sent (zero when it failed). Once 2/3 of a
// TTL pass since the last renewal sent, fence runs — the node drops its
// items and leadership — at that moment, not at the next round: the
// backend counts a TTL from when it received that renewal, later still,
// so the node has let go before anyone may call it dead. Durations here
// are the process's monotonic clock, which no wall-clock skew moves.
func RunRounds(ctx context.Context, ttl time.Duration, round func(ctx context.Context) (renewed time.Time), fence func()) {
	tick := time.NewTicker(ttl / 3)
	defer tick.Stop()
	deadline := time.NewTimer(ttl * 2 / 3)
	defer deadline.Stop()
	fenced := false
	for {
		rctx, cancel := context.WithTimeout(ctx, ttl/3)
		sent := round(rctx)
		cancel()
		if !sent.IsZero() {
			left := time.Until(sent.Add(ttl * 2 / 3))
			if left > 0 {
				deadline.Reset(left)
				fenced = false
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-deadline.C:
			if !fenced {
				fence()
				fenced = true
			}
		}
	}
}
