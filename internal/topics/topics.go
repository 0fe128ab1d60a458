// Package topics keeps a node's view of which topics are paused. The flags
// live in the store (one table of the first database, so a pause is
// cluster wide); every node polls them, feeds them to the store's claim
// filter (scanners pass over a paused topic's pending tasks) and answers
// the fire stage's question "is this topic paused?" for entries already in
// the hot tier, which it hands back unstarted. When a topic resumes the
// node wakes its scanners, so the tasks that came due meanwhile are
// claimed at once rather than at the scanners' next idle look.
package topics

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ontimehq/ontime/internal/startstop"
)

// DefaultPoll is how often a node reads the paused flags: a pause or a
// resume made on another node takes effect here within it. One indexed
// read of a table with a row per paused topic, four times a second.
const DefaultPoll = 250 * time.Millisecond

// Store is what the watcher needs of the store.
type Store interface {
	PausedTopics(ctx context.Context) ([]string, error)
	SetClaimFilter(paused []string)
}

// Waker wakes every item scanner of this node (the scan stage).
type Waker interface {
	NotifyAll(at time.Time)
}

// Config wires a Watcher. Store is required.
type Config struct {
	Store  Store
	Waker  Waker         // nil: resumed topics wait for the scanners' next look
	Poll   time.Duration // default DefaultPoll
	Logger *slog.Logger
}

// Watcher polls the paused flags; it is a startstop service.
type Watcher struct {
	startstop.Base
	cfg    Config
	log    *slog.Logger
	paused atomic.Pointer[map[string]bool]
	mu     sync.Mutex // serialises apply: a poll and a local change
}

// New builds a watcher that knows of no paused topic until its first
// Refresh or poll.
func New(cfg Config) (*Watcher, error) {
	if cfg.Store == nil {
		return nil, errors.New("topics: Store is required")
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	w := &Watcher{cfg: cfg, log: cfg.Logger}
	w.paused.Store(&map[string]bool{})
	return w, nil
}

// Paused reports whether topic is paused, as this node last read it.
func (w *Watcher) Paused(topic string) bool { return (*w.paused.Load())[topic] }

// pausedSet is the paused topics as this node last read them; callers
// must not change it.
func (w *Watcher) pausedSet() map[string]bool { return *w.paused.Load() }

// Refresh reads the flags now and applies them: after a pause or resume
// made through this node, so it takes effect here before the answer.
func (w *Watcher) Refresh(ctx context.Context) error {
	p, err := w.cfg.Store.PausedTopics(ctx)
	if err != nil {
		return err
	}
	w.apply(p)
	return nil
}

// Set applies one change made through this node at once, without waiting
// for a read to see it (SQLite's reader connections may briefly lag the
// write that made it).
func (w *Watcher) Set(topic string, paused bool) {
	w.mu.Lock()
	cur := *w.paused.Load()
	var next []string
	for t := range cur {
		if t != topic {
			next = append(next, t)
		}
	}
	if paused {
		next = append(next, topic)
	}
	w.mu.Unlock()
	w.apply(next)
}

func (w *Watcher) apply(paused []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	old := *w.paused.Load()
	next := make(map[string]bool, len(paused))
	for _, t := range paused {
		next[t] = true
	}
	resumed := 0
	for t := range old {
		if !next[t] {
			resumed++
		}
	}
	if resumed == 0 && len(next) == len(old) {
		return // unchanged: the common case of every poll
	}
	w.cfg.Store.SetClaimFilter(paused)
	w.paused.Store(&next)
	w.log.Info("paused topics changed", "paused", slices.Sorted(maps.Keys(next)), "resumed", resumed)
	if resumed > 0 && w.cfg.Waker != nil {
		w.cfg.Waker.NotifyAll(time.Now())
	}
}

// Start polls until Stop.
func (w *Watcher) Start(ctx context.Context) error {
	ctx, ok, started, stopped := w.StartInit(ctx)
	if !ok {
		return nil
	}
	go func() {
		defer stopped()
		started()
		t := time.NewTicker(w.cfg.Poll)
		defer t.Stop()
		failing := false
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := w.Refresh(rctx)
			cancel()
			switch {
			case err != nil && ctx.Err() == nil && !failing:
				// Once per outage: the flags keep their last known values.
				w.log.Warn("reading paused topics failed; keeping the last known ones", "err", err)
				failing = true
			case err == nil && failing:
				w.log.Info("reading paused topics works again")
				failing = false
			}
		}
	}()
	return nil
}
