// Package hot defines the hot tier: where claimed tasks due soon wait for
// their due time. Two tiers keep this contract: memory (an in-process timer,
// one node) and redis (slotted sorted sets shared by a cluster, with the
// two-phase store → prepare → ack protocol of seed 001).
//
// The hot tier is a cache. The store is the truth: every entry is a claimed
// row whose lease will expire, so whatever a tier loses, the scanner finds
// again. A tier therefore never needs to persist anything.
package hot

import (
	"context"
	"errors"
	"time"
)

// Bounds and defaults of the tiers; the config uses these.
const (
	// DefaultVisibility is how long a popped entry stays in flight before
	// the tier offers it again, unless acked or nacked.
	DefaultVisibility = 30 * time.Second
	// DefaultSlots and MaxSlots: Redis sorted-set slots per topic.
	DefaultSlots = 8
	MaxSlots     = 1024
)

// ErrClosed is returned by a tier's methods after Close.
var ErrClosed = errors.New("hot tier closed")

// Entry is one claimed task waiting in the hot tier. Entries with the same
// ID and Token are the same entry; Add of an entry already present keeps one.
type Entry struct {
	ID    string
	Topic string
	DueAt time.Time
	Token int64
	// Priority orders entries that are due together (task.Rank): a tier
	// hands out the lowest ranks first when more are due than a Pop takes.
	Priority int
}

// Tier is the hot tier contract.
type Tier interface {
	// Add puts entries in the tier. It never blocks on due times.
	Add(ctx context.Context, entries ...Entry) error

	// Pop blocks until at least one entry is due (DueAt <= now+ahead,
	// never earlier) and returns up to max due entries, earliest first
	// within the call (across calls, a tier with slots may return a
	// later-due entry before an earlier one of another slot: both are
	// due). ahead (>= 0) is how much earlier than booked the caller takes
	// entries now: the lead has grown since they were booked (Planner's
	// PopAhead). Popped entries are in flight: they are not returned by
	// another Pop until they are acked, nacked, or their visibility timeout
	// passes (judged by now alone). Pop returns ctx.Err() when ctx ends and
	// ErrClosed after Close.
	Pop(ctx context.Context, max int, ahead time.Duration) ([]Entry, error)

	// Ack removes in-flight entries for good.
	Ack(ctx context.Context, entries ...Entry) error

	// Nack returns in-flight entries to the tier, due again at retryAt.
	Nack(ctx context.Context, retryAt time.Time, entries ...Entry) error

	// Remove drops waiting entries (a cancelled task), by ID and Topic;
	// unknown entries are ignored.
	Remove(ctx context.Context, entries ...Entry) error

	// Len is the number of waiting plus in-flight entries (for metrics).
	Len(ctx context.Context) (int, error)

	// Close wakes blocked Pops and releases resources. Idempotent.
	Close() error
}

// TokenLister is a tier that can tell which claims its entries are held
// under. The scanner then extends those claims while the entries wait, so
// a backlog held back by the fire stage's bound (or a slow store) keeps
// its claims instead of expiring into claims again, new tokens and stale
// entries. A tier without it (redis, shared by the cluster) lets claims
// run out as before: the tokens fence off every stale entry.
type TokenLister interface {
	Tokens(ctx context.Context) ([]int64, error)
}
