// Package handoff is how a task without a target reaches a node that has
// the Go handler for its topic when another node fired it: that node,
// finding no handler of its own, writes the task back claimed for one
// that has (the completion stage, complete.Unhandled) and leaves it in the
// store's mailbox (ontime_handoffs); the Receiver of the node it was left
// for takes its mail every poll and puts the tasks in its hot tier, under
// the claim's token, to fire at their due time like any claimed task.
//
// The mailbox is a hint and the row's claim the truth: a handoff never
// taken (the node died) leaves the task claimed until its lease ends, when
// the scanner of its item claims it again; a stale one presents a token
// the row no longer has, and its start does nothing.
package handoff

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/ontimehq/ontime/internal/hot"
	"github.com/ontimehq/ontime/internal/startstop"
	"github.com/ontimehq/ontime/internal/store"
)

// Store is the mailbox, and the release of what the tier refused.
type Store interface {
	// TakeHandoffs returns and deletes up to limit of node's handoffs.
	TakeHandoffs(ctx context.Context, node string, limit int) ([]store.Ref, error)
	// PruneHandoffs deletes the handoffs to any node left before cutoff.
	PruneHandoffs(ctx context.Context, cutoff time.Time) error
	// Release hands claimed tasks back (pending).
	Release(ctx context.Context, refs []store.Ref) error
}

// Tier is the feeding side of the hot tier.
type Tier interface {
	Add(ctx context.Context, entries ...hot.Entry) error
}

// Defaults of Config.
const (
	// DefaultEvery is the poll period: a handed-off task is delivered this
	// much later, at most, than if its own node had had the handler. An
	// empty mailbox costs one primary-key read a poll.
	DefaultEvery = 100 * time.Millisecond
	// takeMax bounds one take; a fuller mailbox is emptied poll by poll.
	takeMax = 1000
	// pruneEvery and pruneAge: handoffs older than pruneAge (their claims
	// ended long since) are deleted, by whichever node, every pruneEvery.
	pruneEvery = time.Minute
	pruneAge   = time.Hour
)

// Config wires a Receiver. Store, Tier, Planner and NodeID are required.
type Config struct {
	Store   Store
	Tier    Tier
	Planner *hot.Planner // when each entry leaves the tier
	NodeID  string
	// Active, when set, says whether to poll: only a node with Go
	// handlers is handed anything.
	Active func() bool
	Every  time.Duration // 0: DefaultEvery
	Logger *slog.Logger
}

// Receiver takes the tasks handed off to this node into its hot tier.
type Receiver struct {
	startstop.Base
	cfg       Config
	log       *slog.Logger
	lastPrune time.Time
}

// New checks cfg and builds a receiver; nothing runs until Start.
func New(cfg Config) (*Receiver, error) {
	if cfg.Store == nil || cfg.Tier == nil || cfg.Planner == nil || cfg.NodeID == "" {
		return nil, errors.New("handoff: Store, Tier, Planner and NodeID are required")
	}
	if cfg.Every <= 0 {
		cfg.Every = DefaultEvery
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Receiver{cfg: cfg, log: cfg.Logger}, nil
}

// Start polls the mailbox until Stop.
func (r *Receiver) Start(ctx context.Context) error {
	return r.Go(ctx, func(ctx context.Context) { startstop.Every(ctx, r.cfg.Every, r.Take) })
}

// Take takes this node's handoffs into the hot tier, once.
func (r *Receiver) Take(ctx context.Context) {
	if r.cfg.Active != nil && !r.cfg.Active() {
		return
	}
	now := time.Now()
	if now.Sub(r.lastPrune) >= pruneEvery {
		r.lastPrune = now
		if err := r.cfg.Store.PruneHandoffs(ctx, now.Add(-pruneAge)); err != nil && ctx.Err() == nil {
			r.log.Debug("pruning old handoffs failed", "err", err)
		}
	}
	refs, err := r.cfg.Store.TakeHandoffs(ctx, r.cfg.NodeID, takeMax)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("taking the tasks handed off to this node failed", "err", err)
		}
		return
	}
	if len(refs) == 0 {
		return
	}
	entries := make([]hot.Entry, len(refs))
	for i, ref := range refs {
		entries[i] = r.cfg.Planner.Entry(now, ref.ID, ref.Topic, ref.DueAt, ref.Token)
	}
	if err := r.cfg.Tier.Add(ctx, entries...); err != nil {
		// Claimed for this node and not in its tier: handed back, for the
		// scanners (not left to wait out their leases).
		if rerr := r.cfg.Store.Release(context.WithoutCancel(ctx), refs); rerr != nil {
			r.log.Warn("hot tier add of handed-off tasks failed and releasing them failed; they wait for their leases", "count", len(refs), "add_err", err, "err", rerr)
			return
		}
		r.log.Warn("hot tier add of handed-off tasks failed; handed back to the scanners", "count", len(refs), "err", err)
		return
	}
	r.log.Debug("took handed-off tasks", "count", len(refs))
}
