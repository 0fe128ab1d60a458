// Package rediscoord coordinates a cluster through Redis, for teams whose
// only shared infrastructure is Redis (seed 000's "方案4": a lock with an
// expiry, made safe). Single Redis, Sentinel and Redis Cluster alike: every
// key sits under one hash tag, every step is one Lua script.
//
//	{P}:coord:members  sorted set: node → when its lease ends (ms, Redis's clock)
//	{P}:coord:info     hash: node → cluster.Member (address, topics, process)
//	{P}:coord:leader   "node|term", expiring after the lease TTL (PX)
//	{P}:coord:term     the fencing token's counter: INCR, never anything else
//	{P}:coord:assign   hash: item → "node|since µs|term"
//
// One round, every TTL/3 on every node:
//
//	beat (membership lease renewed, by Redis's clock)
//	─► lead: renew "node|term" if still ours, else take it when vacant with term = INCR
//	─► leader: live members → cluster.Assign → write, fenced: the script writes
//	   only if the leader key still holds this node's "node|term"
//	─► read own items → callback when they change
//
// Why a Redis lock with expiry is safe here, when a lock alone is not: the
// lock's holder may pause (GC, SIGSTOP, a partition) past its expiry and
// act after another took over. Here the only thing a leader writes, the
// assignment, is written by a script that checks the fencing token in
// Redis itself, atomically with the write: a leader that paused writes
// nothing once the key has expired or holds another token. What a node
// does with its items is fenced by time and by the task store: a node
// drops every item 2/3 TTL after sending its last successful beat
// (cluster.Core.Renew), before Redis, counting from when it received that
// beat, may let its membership lapse; and row claims in the task database
// are atomic with a token, so a stale owner's scan cannot deliver a task
// that another holds.
package rediscoord

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/ontimehq/ontime/internal/cluster"
	hotredis "github.com/ontimehq/ontime/internal/hot/redis"
	"github.com/ontimehq/ontime/internal/startstop"
	"github.com/ontimehq/ontime/internal/store"
)

// Config configures a coordinator: the node (cluster.NodeConfig) and how
// to reach Redis (the hot tier's settings, hotredis.ClientConfig).
type Config struct {
	hotredis.ClientConfig
	// Prefix namespaces the keys (default "ontime"): the keys are
	// {Prefix}:coord:…, all in one hash slot.
	Prefix string
	cluster.NodeConfig

	// dial, when set, replaces the dialer (tests put a proxy between each
	// node and every Redis it reaches).
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Coordinator runs the protocol for one node.
type Coordinator struct {
	startstop.Base
	cluster.Core

	rdb      goredis.UniversalClient
	keys     keys
	log      *slog.Logger
	started  time.Time
	sentinel bool

	mu        sync.Mutex
	term      int64 // leader term this node holds, 0 if not leader
	closeOnce sync.Once
}

type keys struct{ members, info, leader, term, assign string }

// New validates cfg and connects to Redis.
func New(ctx context.Context, cfg Config) (*Coordinator, error) {
	if err := cfg.ClientConfig.Check("cluster.redis_addrs"); err != nil {
		return nil, err
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "ontime"
	}
	if strings.ContainsAny(cfg.Prefix, "{} ") {
		return nil, fmt.Errorf("cluster.redis_prefix: %q must not contain braces or spaces", cfg.Prefix)
	}
	// Leases are whole milliseconds of Redis's clock.
	if err := cfg.NodeConfig.Check(300*time.Millisecond, "|"); err != nil {
		return nil, err
	}
	opts := cfg.ClientConfig.Options()
	// A round's deadline bounds every request: a Redis that stopped
	// answering must not hold the round past it.
	opts.ContextTimeoutEnabled = true
	if cfg.dial != nil {
		opts.Dialer = cfg.dial
	}
	rdb := goredis.NewUniversalClient(opts)
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("cluster.redis_addrs: cannot reach Redis at %s: %w", strings.Join(opts.Addrs, ","), err)
	}
	p := "{" + cfg.Prefix + "}:coord:"
	return &Coordinator{Core: cluster.NewCore(cfg.NodeConfig), rdb: rdb, log: cfg.Logger, started: cfg.Clock(), sentinel: cfg.MasterName != "",
		keys: keys{members: p + "members", info: p + "info", leader: p + "leader", term: p + "term", assign: p + "assign"}}, nil
}

// Start joins the cluster and returns at once; rounds run until Stop.
func (c *Coordinator) Start(ctx context.Context) error { return c.Go(ctx, c.run) }

// Stop leaves the cluster (items dropped, leadership and membership given
// up so that others take over at once), waits, and closes the client:
// whoever builds a coordinator stops it, started or not.
func (c *Coordinator) Stop() {
	c.Base.Stop()
	c.closeOnce.Do(func() {
		if err := c.rdb.Close(); err != nil {
			c.log.Warn("cluster redis client close", "err", err)
		}
	})
}

func (c *Coordinator) run(ctx context.Context) {
	c.RunRounds(ctx, c.round, c.fence)
	c.leave()
}

// fence: 2/3 TTL without a renewal; Redis may drop the membership and the
// leader key once a TTL has passed.
func (c *Coordinator) fence() {
	c.log.Warn("cluster: no lease renewal for 2/3 of the lease TTL, dropping every item", "ttl", c.Cfg.TTL)
	c.Drop()
	c.mu.Lock()
	c.term = 0
	c.mu.Unlock()
}

// beat renews the node's membership lease, by Redis's clock, and forgets
// members whose lease ran out.
var beatScript = goredis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
if #gone > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  redis.call('HDEL', KEYS[2], unpack(gone))
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
return now`)

// membersScript lists the live members with their records.
var membersScript = goredis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf')
local out = {}
for _, id in ipairs(ids) do
  out[#out + 1] = id
  out[#out + 1] = redis.call('HGET', KEYS[2], id) or ''
end
return out`)

// leadScript renews the leader key when it still holds ARGV[1]|ARGV[3],
// or takes it when vacant under a new term: INCR of the counter, never
// below a term the assignment was written under (a counter lost with a
// failover to a replica that had not seen it starts above them). It
// returns the term held, 0 when another node leads.
var leadScript = goredis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if ARGV[3] ~= '0' and cur == ARGV[1] .. '|' .. ARGV[3] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return tonumber(ARGV[3])
end
if cur then return 0 end
local term = redis.call('INCR', KEYS[2])
local floor = 0
for _, v in ipairs(redis.call('HVALS', KEYS[3])) do
  local t = tonumber(string.match(v, '|(%d+)$'))
  if t and t > floor then floor = t end
end
if term <= floor then
  term = floor + 1
  redis.call('SET', KEYS[2], term)
end
redis.call('SET', KEYS[1], ARGV[1] .. '|' .. term, 'PX', ARGV[2])
return term`)

// writeScript is the fenced assignment write: ARGV[1] the leader key's
// value this node holds, ARGV[2] n, then n item/grant pairs, then items
// to delete. 0, and nothing written, when the key holds anything else.
var writeScript = goredis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local n = tonumber(ARGV[2])
for i = 0, n - 1 do
  redis.call('HSET', KEYS[2], ARGV[3 + 2 * i], ARGV[4 + 2 * i])
end
for i = 3 + 2 * n, #ARGV do
  redis.call('HDEL', KEYS[2], ARGV[i])
end
return 1`)

// handOverScript moves grants to the present, each only if it is still
// the one read: triples of item, grant read, grant now.
var handOverScript = goredis.NewScript(`
for i = 1, #ARGV, 3 do
  if redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[i + 1] then
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 2])
  end
end
return 1`)

// resignScript deletes the leader key if it is still ARGV[1].
var resignScript = goredis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1`)

func (c *Coordinator) ttlMillis() string { return strconv.FormatInt(c.Cfg.TTL.Milliseconds(), 10) }

func (c *Coordinator) round(ctx context.Context) {
	sent := time.Now()
	me := cluster.EncodeMember(c.Member(c.started))
	if err := beatScript.Run(ctx, c.rdb, []string{c.keys.members, c.keys.info}, c.Cfg.NodeID, c.ttlMillis(), me).Err(); err != nil {
		c.log.Warn("cluster redis beat failed", "err", err)
		return
	}
	c.Renew(sent)
	term, err := c.lead(ctx)
	if err != nil {
		c.log.Warn("cluster leader election failed", "err", err)
	}
	if term > 0 {
		if err := c.rebalance(ctx, term); err != nil {
			c.log.Warn("cluster rebalance failed", "err", err)
		}
	}
	if err := c.readOwn(ctx); err != nil {
		c.log.Warn("cluster read assignment failed", "err", err)
	}
	live, err := c.members(ctx)
	if err != nil {
		c.log.Warn("cluster read membership failed", "err", err)
	} else {
		c.SetHandlers(live)
	}
}

// lead renews or takes the leader key; it returns the term held, 0 when
// another node leads.
func (c *Coordinator) lead(ctx context.Context) (int64, error) {
	c.mu.Lock()
	held := c.term
	c.mu.Unlock()
	term, err := leadScript.Run(ctx, c.rdb, []string{c.keys.leader, c.keys.term, c.keys.assign},
		c.Cfg.NodeID, c.ttlMillis(), strconv.FormatInt(held, 10)).Int64()
	if err != nil {
		return 0, err
	}
	if term != held {
		if held > 0 {
			c.log.Info("cluster leadership lost", "term", held)
		}
		if term > 0 {
			c.log.Info("cluster leader elected", "node", c.Cfg.NodeID, "term", term)
			if c.sentinel {
				// The term reaches a replica before the leader acts on it, so
				// that a failover does not hand it out again (and even then the
				// fence compares node and term together).
				if n, err := c.rdb.Do(ctx, "WAIT", 1, (c.Cfg.TTL / 10).Milliseconds()).Int64(); err != nil || n < 1 {
					c.log.Warn("cluster: the new term reached no replica", "term", term, "err", err)
				}
			}
		}
	}
	c.mu.Lock()
	c.term = term
	c.mu.Unlock()
	return term, nil
}

// members reads the live members.
func (c *Coordinator) members(ctx context.Context) (map[string]cluster.Member, error) {
	vals, err := membersScript.Run(ctx, c.rdb, []string{c.keys.members, c.keys.info}).StringSlice()
	if err != nil {
		return nil, err
	}
	out := make(map[string]cluster.Member, len(vals)/2)
	for i := 0; i+1 < len(vals); i += 2 {
		out[vals[i]] = cluster.DecodeMember(vals[i+1])
	}
	return out, nil
}

func (c *Coordinator) assignment(ctx context.Context) (map[string]store.Grant, error) {
	all, err := c.rdb.HGetAll(ctx, c.keys.assign).Result()
	if err != nil {
		return nil, err
	}
	out := make(map[string]store.Grant, len(all))
	for it, v := range all {
		if g, ok := cluster.ParseGrant(v); ok {
			out[it] = g
		}
	}
	return out, nil
}

func (c *Coordinator) rebalance(ctx context.Context, term int64) error {
	live, err := c.members(ctx)
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

// writeAssignment writes grants and deletes drop, fenced by the leader
// key holding this node's "node|term": held is false, and nothing
// written, once it holds anything else.
func (c *Coordinator) writeAssignment(ctx context.Context, term int64, grants map[string]store.Grant, drop []string) (bool, error) {
	args := []any{c.Cfg.NodeID + "|" + strconv.FormatInt(term, 10), len(grants)}
	for it, g := range grants {
		args = append(args, it, cluster.GrantValue(g))
	}
	for _, it := range drop {
		args = append(args, it)
	}
	n, err := writeScript.Run(ctx, c.rdb, []string{c.keys.leader, c.keys.assign}, args...).Int64()
	return n == 1, err
}

func (c *Coordinator) readOwn(ctx context.Context) error {
	all, err := c.assignment(ctx)
	if err != nil {
		return err
	}
	// Follow has told the node's stages to stop on what it lost: end the
	// handover wait of those items (see cluster.LetGo), each only if its
	// grant is still the one read.
	gone := c.Follow(all)
	if len(gone) == 0 {
		return nil
	}
	var args []any
	for _, it := range gone {
		g := all[it]
		moved := g
		moved.Since = c.Now()
		args = append(args, it, cluster.GrantValue(g), cluster.GrantValue(moved))
	}
	if err := handOverScript.Run(ctx, c.rdb, []string{c.keys.assign}, args...).Err(); err != nil {
		return fmt.Errorf("hand over: %w", err)
	}
	return nil
}

// leave drops the node's items, then its membership and leadership, so
// that the others take over at their next round.
func (c *Coordinator) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.Drop()
	if _, err := c.rdb.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		p.ZRem(ctx, c.keys.members, c.Cfg.NodeID)
		p.HDel(ctx, c.keys.info, c.Cfg.NodeID)
		return nil
	}); err != nil {
		c.log.Warn("cluster leave", "err", err)
	}
	c.mu.Lock()
	term := c.term
	c.term = 0
	c.mu.Unlock()
	if term > 0 {
		if err := resignScript.Run(ctx, c.rdb, []string{c.keys.leader}, c.Cfg.NodeID+"|"+strconv.FormatInt(term, 10)).Err(); err != nil {
			c.log.Warn("cluster resign", "err", err)
		}
	}
}

// Status reads the cluster's state from Redis.
func (c *Coordinator) Status(ctx context.Context) (cluster.Status, error) {
	v, err := c.rdb.Get(ctx, c.keys.leader).Result()
	if err != nil && !errors.Is(err, goredis.Nil) {
		return cluster.Status{}, err
	}
	var leader string
	var term int64
	if i := strings.LastIndexByte(v, '|'); i > 0 {
		leader = v[:i]
		term, _ = strconv.ParseInt(v[i+1:], 10, 64)
	}
	live, err := c.members(ctx)
	if err != nil {
		return cluster.Status{}, err
	}
	assign, err := c.assignment(ctx)
	if err != nil {
		return cluster.Status{}, err
	}
	return cluster.StatusOf(leader, term, live, assign, c.Now()), nil
}
