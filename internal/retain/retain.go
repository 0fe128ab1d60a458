// Package retain deletes final tasks once their retention has passed, so
// the task tables stay the size of the live work. Each node cleans the
// sharding items it owns (those its scanner scans), in small batches
// through the store's retention index: a batch is one short DELETE of rows
// no claim or scan ever locks, and the cleaner rests as long as a full
// batch took before it deletes more, so it takes at most about half of a
// database's write time when it has a backlog and almost none otherwise.
package retain

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ontimehq/ontime/internal/startstop"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// Defaults for Config.
const (
	DefaultBatch = 500
	// MinInterval and MaxInterval bound how often every owned item is
	// looked at: a quarter of the shortest retention, within these.
	MinInterval = time.Second
	MaxInterval = time.Minute
)

// Store is what the cleaner needs of the store.
type Store interface {
	// DeleteExpired deletes up to limit rows of item in final status st
	// that ended before before, and returns how many.
	DeleteExpired(ctx context.Context, item store.Item, st task.Status, before time.Time, limit int) (int64, error)
}

// Config wires a Cleaner. Store and Items are required, and every
// retention must be positive.
type Config struct {
	Store Store
	// Items returns the sharding items this node owns now.
	Items                 func() []store.Item
	Done, Cancelled, Dead time.Duration
	Batch                 int           // rows per DELETE; default DefaultBatch
	Interval              time.Duration // between looks at every item; default from the retentions
	Logger                *slog.Logger
	Registerer            prometheus.Registerer // nil: series kept but not registered
}

// Cleaner is the retention service of a node.
type Cleaner struct {
	startstop.Base
	cfg     Config
	log     *slog.Logger
	keep    map[task.Status]time.Duration
	deleted *prometheus.CounterVec
}

// New checks cfg and builds a Cleaner; nothing runs until Start.
func New(cfg Config) (*Cleaner, error) {
	switch {
	case cfg.Store == nil, cfg.Items == nil:
		return nil, errors.New("retain: Store and Items are required")
	case cfg.Done <= 0, cfg.Cancelled <= 0, cfg.Dead <= 0:
		return nil, errors.New("retain: retentions must be positive")
	}
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.Interval <= 0 {
		cfg.Interval = min(max(min(cfg.Done, cfg.Cancelled, cfg.Dead)/4, MinInterval), MaxInterval)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Cleaner{cfg: cfg, log: cfg.Logger,
		keep: map[task.Status]time.Duration{task.StatusDone: cfg.Done, task.StatusCancelled: cfg.Cancelled, task.StatusDead: cfg.Dead},
		deleted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ontime_retention_deleted_total",
			Help: "Per node: final tasks deleted after their retention, by status."}, []string{"status"})}
	for s := range c.keep {
		c.deleted.WithLabelValues(s.String())
	}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(c.deleted); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Start runs the cleaner until Stop.
func (c *Cleaner) Start(ctx context.Context) error {
	return c.Go(ctx, c.run)
}

func (c *Cleaner) run(ctx context.Context) {
	t := time.NewTimer(c.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		start := time.Now()
		n, err := c.Pass(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			c.log.Warn("retention pass failed; the rest waits for the next", "deleted", n, "err", err)
		} else if n > 0 {
			c.log.Debug("retention pass", "deleted", n, "took", time.Since(start))
		}
		t.Reset(c.cfg.Interval)
	}
}

// Pass deletes, in every owned item, every row whose retention has passed
// by now, and returns how many it deleted. It stops at the first error.
func (c *Cleaner) Pass(ctx context.Context) (int64, error) {
	var total int64
	for _, it := range c.cfg.Items() {
		for _, st := range store.FinalStatuses {
			before := time.Now().Add(-c.keep[st])
			for {
				t0 := time.Now()
				n, err := c.cfg.Store.DeleteExpired(ctx, it, st, before, c.cfg.Batch)
				total += n
				c.deleted.WithLabelValues(st.String()).Add(float64(n))
				if err != nil {
					return total, err
				}
				if n < int64(c.cfg.Batch) {
					break
				}
				// A backlog: rest as long as the batch took, so scans,
				// claims and outcomes get the database at least half the
				// time.
				if startstop.Sleep(ctx, time.Since(t0)); ctx.Err() != nil {
					return total, ctx.Err()
				}
			}
		}
	}
	return total, nil
}
