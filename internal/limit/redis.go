package limit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// gcraScript reserves one call of a GCRA bucket (a token bucket expressed
// as the theoretical arrival time of the next call), judged by Redis's
// clock, so nodes whose clocks differ share one bucket exactly. It always
// books, like x/time/rate's Reserve: the caller waits until its slot
// instead of asking again, so every call costs one script whatever the
// contention (asking again made a herd of retries that left the bucket
// idle between answers: 60–93 calls/s of 100 on a loaded machine).
//
//	KEYS[1] the bucket's theoretical arrival time (µs, Redis TIME)
//	ARGV[1] emission interval µs (1 s / rate), ARGV[2] burst tolerance µs
//	returns the µs to wait before the call (0: at once)
var gcraScript = goredis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local wait = tat - tonumber(ARGV[2]) - now
local new = tat + tonumber(ARGV[1])
redis.call('SET', KEYS[1], string.format('%d', new), 'PX', math.ceil((new - now) / 1000) + 1000)
if wait > 0 then return math.ceil(wait) end
return 0
`)

// acquireScript takes a slot of a semaphore whose holders are leased:
// slots of a holder that never released (a node killed mid-call) come
// back when its lease ends.
//
//	KEYS[1] holders (sorted set: holder → lease end, µs of Redis TIME)
//	ARGV[1] holder, ARGV[2] slots, ARGV[3] lease µs
//	returns 1 when the holder got a slot, 0 when every slot is taken
var acquireScript = goredis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], math.ceil(tonumber(ARGV[3]) / 1000) + 1000)
return 1
`)

// RedisConfig configures Redis.
type RedisConfig struct {
	Client  goredis.UniversalClient // the hot tier's
	Prefix  string                  // the hot tier's key prefix
	Self    string                  // this node's ID, in holder names
	Metrics *Metrics
}

// Redis keeps limits in Redis (the backend of a cluster with the Redis
// hot tier).
type Redis struct {
	cfg RedisConfig
	seq atomic.Uint64
}

// NewRedis builds the Redis backend.
func NewRedis(cfg RedisConfig) (*Redis, error) {
	if cfg.Client == nil {
		return nil, errors.New("limit: a Redis client is required")
	}
	return &Redis{cfg: cfg}, nil
}

// DefaultLease is Spec.Lease's default.
const DefaultLease = time.Minute

// Gate returns spec's gate; its keys are {prefix}:limit:{kind:name}:….
func (r *Redis) Gate(kind, name string, spec Spec) Gate {
	if spec.Lease <= 0 {
		spec.Lease = DefaultLease
	}
	tag := r.cfg.Prefix + ":limit:{" + kind + ":" + name + "}"
	g := &redisGate{r: r, spec: spec, m: r.cfg.Metrics.series(kind, name, spec), tat: tag + ":tat", holders: tag + ":holders"}
	if spec.Rate > 0 {
		g.interval = int64(math.Max(1, math.Round(1e6/spec.Rate)))
		burst := max(1, int64(math.Ceil(spec.Rate/10)))
		g.tolerance = (burst - 1) * g.interval
		g.m.rateShare.Set(spec.Rate)
	}
	g.m.concShare.Set(float64(spec.Concurrency))
	return g
}

type redisGate struct {
	// concMu lets one call of this node at a time poll Redis for a
	// slot: the others wait here, not in a herd of scripts.
	concMu              sync.Mutex
	r                   *Redis
	spec                Spec
	m                   series
	tat, holders        string
	interval, tolerance int64 // µs
	throttled           atomic.Int64
}

// Enter books a call of the bucket, waiting as Redis says, then takes a
// slot of the semaphore, polling for one (2 ms, growing to 20 ms) while
// every slot is taken.
func (g *redisGate) Enter(ctx context.Context) (func(), error) {
	rdb := g.r.cfg.Client
	if g.interval > 0 {
		if err := g.book(ctx, rdb); err != nil {
			return nil, err
		}
	}
	if g.spec.Concurrency <= 0 {
		return noop, nil
	}
	return g.acquire(ctx, rdb)
}

// book reserves one call of the bucket and waits for its slot. A wait
// cut short (the node stopping) leaves its slot unused.
func (g *redisGate) book(ctx context.Context, rdb goredis.UniversalClient) error {
	wait, err := gcraScript.Run(ctx, rdb, []string{g.tat}, g.interval, g.tolerance).Int64()
	if err != nil {
		return fmt.Errorf("limit: redis rate %s: %w", g.tat, err)
	}
	if wait <= 0 {
		return nil
	}
	g.throttled.Add(1)
	g.m.rateThrottled.Inc()
	return sleep(ctx, time.Duration(wait)*time.Microsecond)
}

// acquire takes a slot of the semaphore, one caller of this node at a
// time asking.
func (g *redisGate) acquire(ctx context.Context, rdb goredis.UniversalClient) (func(), error) {
	g.concMu.Lock()
	defer g.concMu.Unlock()
	holder := g.r.cfg.Self + ":" + strconv.FormatUint(g.r.seq.Add(1), 36)
	backoff := 2 * time.Millisecond
	counted := false
	for {
		ok, err := acquireScript.Run(ctx, rdb, []string{g.holders}, holder, g.spec.Concurrency, g.spec.Lease.Microseconds()).Int64()
		if err != nil {
			return nil, fmt.Errorf("limit: redis concurrency %s: %w", g.holders, err)
		}
		if ok == 1 {
			break
		}
		if !counted {
			counted = true
			g.throttled.Add(1)
			g.m.concThrottled.Inc()
		}
		if err := sleep(ctx, backoff); err != nil {
			return nil, err
		}
		backoff = min(2*backoff, 20*time.Millisecond)
	}
	return func() {
		// Not the call's context: it may have ended with the call. A
		// release lost (Redis away) comes back with the lease.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		rdb.ZRem(ctx, g.holders, holder)
	}, nil
}

func (g *redisGate) View() View {
	return View{Spec: g.spec, RateShare: g.spec.Rate, ConcurrencyShare: g.spec.Concurrency, Throttled: g.throttled.Load()}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
