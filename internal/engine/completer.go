package engine

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/ontimehq/ontime/internal/store"
)

const (
	completerBatch = 1000
	// While a burst is being delivered the completer holds its writes, up
	// to completerMaxHold, so that the store's CPU goes to delivery first
	// (on SQLite the store is this process's own CPU).
	completerHoldAbove = 1000 // tasks started and not yet finished
	completerMaxHold   = time.Second
)

// completer writes delivery outcomes in batches (group commit): under load
// one Store.Finish covers up to completerBatch deliveries; when idle an
// outcome is written at once. A failed write is retried until it succeeds
// or the engine stops; an outcome never written leaves its task running
// with a lease, so it is delivered again (at least once), never lost.
//
// add never blocks: when a burst is delivered faster than the store writes
// outcomes, the outcomes wait here rather than holding up the deliveries
// behind them. The queue is bounded by the tasks this node has started.
type completer struct {
	st    store.Store
	log   *slog.Logger
	busy  func() int64 // tasks started and not yet finished
	mu    sync.Mutex
	q     [][]store.Outcome // chunks of completerBatch: a burst's outcomes queue without copying
	since time.Time         // when the oldest queued outcome was added
	wake  chan struct{}     // one pending signal: q is not empty
	done  chan struct{}
	quit  chan struct{}
	once  sync.Once
}

func newCompleter(st store.Store, log *slog.Logger, busy func() int64) *completer {
	return &completer{st: st, log: log, busy: busy, wake: make(chan struct{}, 1), done: make(chan struct{}), quit: make(chan struct{})}
}

func (c *completer) start() { go c.run() }

func (c *completer) add(o store.Outcome) {
	c.mu.Lock()
	if len(c.q) == 0 {
		c.since = time.Now()
	}
	if n := len(c.q); n == 0 || len(c.q[n-1]) == completerBatch {
		c.q = append(c.q, make([]store.Outcome, 0, completerBatch))
	}
	last := &c.q[len(c.q)-1]
	*last = append(*last, o)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *completer) run() {
	defer close(c.done)
	for {
		select {
		case <-c.wake:
		case <-c.quit:
			// Write what is queued, then stop.
			c.flushAll(3)
			return
		}
		c.hold()
		c.flushAll(-1)
	}
}

// flushAll writes every queued outcome, a batch (chunk) at a time, until
// none is left.
func (c *completer) flushAll(tries int) {
	for {
		c.mu.Lock()
		q := c.q
		c.q = nil
		c.mu.Unlock()
		if len(q) == 0 {
			return
		}
		for _, batch := range q {
			c.flush(batch, tries)
		}
	}
}

// hold waits while many started tasks are still to be delivered (a burst
// released at its due time), for at most
// completerMaxHold from the oldest queued outcome, or until quit.
func (c *completer) hold() {
	for c.busy() > completerHoldAbove {
		c.mu.Lock()
		wait := completerMaxHold - time.Since(c.since)
		c.mu.Unlock()
		if wait <= 0 {
			return
		}
		select {
		case <-c.quit:
			return
		case <-time.After(min(wait, 5*time.Millisecond)):
		}
	}
}

// flush writes batch, retrying with backoff; tries < 0 means until quit.
func (c *completer) flush(batch []store.Outcome, tries int) {
	backoff := 50 * time.Millisecond
	for i := 0; tries < 0 || i < tries; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := c.st.Finish(ctx, batch)
		cancel()
		if err == nil {
			return
		}
		c.log.Warn("writing delivery outcomes failed; retrying", "count", len(batch), "err", err)
		if tries < 0 {
			select {
			case <-time.After(backoff):
			case <-c.quit:
				tries = i + 3 // a few more tries while stopping
			}
		} else {
			time.Sleep(backoff)
		}
		backoff = min(backoff*2, 5*time.Second)
	}
	c.log.Error("delivery outcomes not written; tasks will be delivered again after their lease", "count", len(batch))
}

// stop writes what is queued and stops.
func (c *completer) stop(ctx context.Context) error {
	c.once.Do(func() { close(c.quit) })
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
