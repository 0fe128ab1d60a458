package topics

// Counts: the node's cache of the per-topic task counts that GET /v1/topics
// and the console show. On SQLite and PostgreSQL the writes maintain the
// counts (sqlstore counts.go), so a read costs a few hundred rows and a
// few index probes for the oldest pending dues; MariaDB counts every row
// of every task table (seconds at millions of rows). Either way N open
// browsers must not cost N reads per refresh: the cache reads in the
// background, at most one read at a time, and every answer says when its
// counts were taken.
//
// Why not the metrics gauges' worker: it reads on the leader only (its
// series are cluster-wide and summed over nodes) and at most every 5 s,
// while any node serves the API and a console page should be a few
// seconds stale at most.

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ontimehq/ontime/internal/startstop"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// Defaults of CountsConfig.
const (
	// DefaultCountEvery is the pause between the end of one count and the
	// start of the next while the counts are in use.
	DefaultCountEvery = 2 * time.Second
	// DefaultCountTimeout bounds one count: past it the count is
	// abandoned and the last one kept (its age shows in the answers).
	DefaultCountTimeout = 30 * time.Second
	// DefaultCountIdle is how long after the last answer the worker keeps
	// counting: a node nobody asks counts nothing.
	DefaultCountIdle = time.Minute
)

// CountStore is what the cache needs of the store.
type CountStore interface {
	TopicStats(ctx context.Context, topic string) ([]store.TopicStats, error)
}

// CountsConfig configures Counts. Store is required.
type CountsConfig struct {
	Store CountStore
	// Paused is this node's watcher: its flags (fresher than the count's)
	// decide each topic's paused flag and list paused topics without
	// tasks. nil: the count's own flags.
	Paused *Watcher
	// Every is the pause between counts (DefaultCountEvery). A count that
	// took longer than Every is followed by a pause as long as itself, so
	// counting takes at most half of a connection's time.
	Every time.Duration
	// Timeout bounds one count (DefaultCountTimeout).
	Timeout time.Duration
	// Idle: the worker stops counting this long after the last answer
	// (DefaultCountIdle); the next answer waits for a fresh count.
	Idle   time.Duration
	Logger *slog.Logger
}

// Listing is the cached answer: every topic with tasks or paused, by name,
// and when the counts were taken.
type Listing struct {
	Topics    []store.TopicStats
	CountedAt time.Time
}

// Counts keeps the per-topic counts, recounted in the background; it is a
// startstop service owned by the node.
type Counts struct {
	startstop.Base
	cfg  CountsConfig
	log  *slog.Logger
	wake chan struct{} // a request for a count (capacity 1)

	mu      sync.Mutex
	stats   []store.TopicStats // the last count; nil before the first
	at      time.Time          // when it was taken
	dur     time.Duration      // how long it took
	asked   time.Time          // the last answer
	running chan struct{}      // closed when the count under way ends; nil when none is
	lastErr error              // the last count's error (nil after a success)
}

// NewCounts builds the cache; it holds nothing until its first count.
func NewCounts(cfg CountsConfig) (*Counts, error) {
	if cfg.Store == nil {
		return nil, errors.New("topics: Counts needs a Store")
	}
	if cfg.Every <= 0 {
		cfg.Every = DefaultCountEvery
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultCountTimeout
	}
	if cfg.Idle <= 0 {
		cfg.Idle = DefaultCountIdle
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Counts{cfg: cfg, log: cfg.Logger, wake: make(chan struct{}, 1)}, nil
}

// List answers from the cache. The first call, and a call after the
// counts grew older than a few refresh periods, waits for a count (shared
// with any other caller waiting for it); others never touch the store.
func (c *Counts) List(ctx context.Context) (Listing, error) {
	c.mu.Lock()
	c.asked = time.Now()
	fresh := c.stats != nil && time.Since(c.at) < 3*max(c.cfg.Every, c.dur)+time.Second
	c.mu.Unlock()
	c.poke()
	if !fresh {
		if err := c.Refresh(ctx); err != nil {
			c.mu.Lock()
			have := c.stats != nil
			c.mu.Unlock()
			if !have {
				return Listing{}, err
			}
			// A failed recount serves the last counts: their age says it.
			c.log.Debug("recounting topics failed; serving the last counts", "err", err)
		}
	}
	c.mu.Lock()
	stats, at := c.stats, c.at
	c.mu.Unlock()
	return Listing{Topics: c.overlay(stats), CountedAt: at}, nil
}

// overlay applies the watcher's paused flags to a count: a pause or a
// resume made since shows at once, and a paused topic without tasks is
// listed (a resumed one is not).
func (c *Counts) overlay(stats []store.TopicStats) []store.TopicStats {
	out := make([]store.TopicStats, 0, len(stats))
	if c.cfg.Paused == nil {
		for _, ts := range stats {
			out = append(out, copyStats(ts))
		}
		return out
	}
	paused := c.cfg.Paused.pausedSet()
	seen := make(map[string]bool, len(stats))
	for _, ts := range stats {
		seen[ts.Topic] = true
		ts = copyStats(ts)
		ts.Paused = paused[ts.Topic]
		if !ts.Paused && !Known(ts) {
			continue // paused without tasks when counted, resumed since
		}
		out = append(out, ts)
	}
	added := false
	for t := range paused {
		if !seen[t] {
			out = append(out, store.TopicStats{Topic: t, Counts: map[task.Status]int64{}, Paused: true})
			added = true
		}
	}
	if added {
		slices.SortFunc(out, func(a, b store.TopicStats) int { return strings.Compare(a.Topic, b.Topic) })
	}
	return out
}

// copyStats copies ts's map: callers may change what they are given.
func copyStats(ts store.TopicStats) store.TopicStats {
	m := make(map[task.Status]int64, len(ts.Counts))
	for k, v := range ts.Counts {
		m[k] = v
	}
	ts.Counts = m
	return ts
}

// poke asks the worker for a count soon.
func (c *Counts) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Refresh counts now, or waits for the count already under way
// (single-flight: concurrent callers share one count). The caller that
// starts the count runs it, under ctx and the cache's Timeout; the others
// wait for it, bounded by their own ctx.
func (c *Counts) Refresh(ctx context.Context) error {
	c.mu.Lock()
	done := c.running
	if done == nil {
		done = make(chan struct{})
		c.running = done
		c.mu.Unlock()
		return c.count(ctx, done)
	}
	c.mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastErr
}

func (c *Counts) count(ctx context.Context, done chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	t0 := time.Now()
	stats, err := c.cfg.Store.TopicStats(ctx, "")
	c.mu.Lock()
	c.lastErr = err
	if err == nil {
		c.stats, c.at, c.dur = slices.Clip(stats), t0, time.Since(t0)
	}
	c.running = nil
	c.mu.Unlock()
	close(done)
	return err
}

// Start runs the worker: while the counts are asked for (within Idle of
// the last answer) it recounts every Every, or after a pause as long as
// the last count when that took longer.
func (c *Counts) Start(ctx context.Context) error {
	return c.Go(ctx, c.work)
}

func (c *Counts) work(ctx context.Context) {
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.wake:
		}
		for {
			c.mu.Lock()
			active := time.Since(c.asked) < c.cfg.Idle
			c.mu.Unlock()
			if !active {
				break
			}
			err := c.Refresh(ctx)
			if ctx.Err() != nil {
				return
			}
			switch {
			case err != nil && !failing:
				c.log.Warn("counting tasks per topic failed; answers keep the last counts", "err", err)
				failing = true
			case err == nil && failing:
				c.log.Info("counting tasks per topic works again")
				failing = false
			}
			c.mu.Lock()
			pause := max(c.cfg.Every, c.dur)
			c.mu.Unlock()
			startstop.Sleep(ctx, pause)
		}
	}
}
