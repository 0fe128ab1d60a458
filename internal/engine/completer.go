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
	completerQueue = 16384
)

// completer writes delivery outcomes in batches (group commit): under load
// one Store.Finish covers up to completerBatch deliveries; when idle an
// outcome is written at once. A failed write is retried until it succeeds
// or the engine stops; an outcome never written leaves its task running
// with a lease, so it is delivered again (at least once), never lost.
type completer struct {
	st   store.Store
	log  *slog.Logger
	ch   chan store.Outcome
	done chan struct{}
	quit chan struct{}
	once sync.Once
}

func newCompleter(st store.Store, log *slog.Logger) *completer {
	return &completer{st: st, log: log, ch: make(chan store.Outcome, completerQueue), done: make(chan struct{}), quit: make(chan struct{})}
}

func (c *completer) start() { go c.run() }

func (c *completer) add(o store.Outcome) { c.ch <- o }

func (c *completer) run() {
	defer close(c.done)
	batch := make([]store.Outcome, 0, completerBatch)
	for {
		select {
		case o := <-c.ch:
			batch = append(batch[:0], o)
		case <-c.quit:
			// Write what is queued, then stop.
			for {
				batch = c.take(batch[:0])
				if len(batch) == 0 {
					return
				}
				c.flush(batch, 3)
			}
		}
		batch = c.take(batch)
		c.flush(batch, -1)
	}
}

// take appends queued outcomes to batch without waiting, up to a batch.
func (c *completer) take(batch []store.Outcome) []store.Outcome {
	for len(batch) < completerBatch {
		select {
		case o := <-c.ch:
			batch = append(batch, o)
		default:
			return batch
		}
	}
	return batch
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
