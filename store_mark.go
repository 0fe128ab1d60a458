package ontime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ontimehq/ontime/internal/startstop"
	"github.com/ontimehq/ontime/internal/store/sqlstore"
)

// storeMark marks the node as using the store every markEvery (the store's
// ontime_store_users), whatever its coordinator, and unmarks it on stop.
// The mark also reads the store's topology: when an expansion's cutover
// is pending, or the store's databases changed under the node, it closes
// changed (Node.TopologyChanged) so that ontime serve stops the pipeline
// and reopens the store with the grown list (sqlstore/fence.go). The mark
// keeps the store's write fence open; a node whose marks stop writes no
// more after sqlstore.FenceLease.
type storeMark struct {
	startstop.Base
	st   *sqlstore.Store
	node string
	log  *slog.Logger

	once    sync.Once
	changed chan struct{}
}

// markEvery is the mark's period: how soon a node hears of a pending
// cutover; sqlstore.FenceLease is several of them. While an expansion
// copies, a cutover may come at any moment and every node's delay in
// hearing of it adds to the pause of all: the marks come every
// markDuringCopy then (three small queries each, for minutes or hours).
const (
	markEvery      = time.Second
	markDuringCopy = 200 * time.Millisecond
)

func newStoreMark(st *sqlstore.Store, node string, log *slog.Logger) *storeMark {
	return &storeMark{st: st, node: node, log: log, changed: make(chan struct{})}
}

// Start fences the store's writes by the marks (sqlstore.EnableFence) and
// marks once before anything writes: a node started with the databases of
// before a cutover stops there.
func (m *storeMark) Start(ctx context.Context) error {
	m.st.EnableFence()
	if _, err := m.st.MarkInUse(ctx, m.node, time.Now()); errors.Is(err, sqlstore.ErrTopology) {
		return err
	}
	return m.Go(ctx, m.run)
}

func (m *storeMark) run(ctx context.Context) {
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := m.st.Unmark(uctx, m.node); err != nil {
			m.log.Warn("store: unmark", "err", err)
		}
	}()
	mark := func(ctx context.Context) time.Duration {
		st, err := m.st.MarkInUse(ctx, m.node, time.Now())
		next := markEvery
		if st.Phase == sqlstore.PhaseCopy {
			next = markDuringCopy
		}
		switch {
		case errors.Is(err, sqlstore.ErrTopology):
			m.log.Error("store: the databases changed under this node", "err", err)
			m.signal()
		case errors.Is(err, sqlstore.ErrClockSkew):
			// Writes stop once the fence runs out (sqlstore.FenceLease).
			m.log.Error("store: writes refused", "err", err)
			if st.Waiting(time.Now()) {
				m.signal()
			}
		case err != nil && ctx.Err() == nil:
			m.log.Warn("store: mark in use", "err", err)
		case err == nil && st.Waiting(time.Now()):
			m.log.Info("store: an expansion's cutover is pending: stopping the pipeline until it is done", "epoch", st.FenceEpoch)
			m.signal()
		}
		return next
	}
	for next := mark(ctx); ; next = mark(ctx) {
		startstop.Sleep(ctx, next)
		if ctx.Err() != nil {
			return
		}
	}
}

func (m *storeMark) signal() { m.once.Do(func() { close(m.changed) }) }

// WaitTopology waits, with the node of cfg stopped, until no cutover of an
// expansion is pending, and returns cfg with the store's databases as the
// store then records them: the same ones when the cutover did not happen
// (given up, aborted), grown by the new databases the expander recorded
// when it did. It fails when the store's databases changed otherwise.
func WaitTopology(ctx context.Context, cfg Config, epoch int64, log *slog.Logger) (Config, error) {
	if len(cfg.Store.Databases) == 0 {
		return cfg, errors.New("store.databases: none to watch")
	}
	w, err := sqlstore.OpenWatch(cfg.Store.Driver, cfg.Store.Databases[0])
	if err != nil {
		return cfg, fmt.Errorf("store.databases[0]: %w", err)
	}
	defer w.Close()
	for {
		st, err := w.Read(ctx)
		switch {
		case err != nil:
			log.Warn("store: waiting for the cutover", "err", err)
		case st.Waiting(time.Now()):
		case st.Epoch == epoch:
			return cfg, nil // no cutover: the same databases
		case st.Epoch == epoch+1 && (st.Phase == sqlstore.PhaseCleanup || st.Phase == sqlstore.PhaseNone) && st.From == len(cfg.Store.Databases) && len(st.Twins) == st.From:
			// Cut over (the cleanup may be over already: its record
			// keeps the new databases).
			grown := cfg
			grown.Store.Databases = append(append([]string{}, cfg.Store.Databases...), st.Twins...)
			return grown, nil
		default:
			return cfg, fmt.Errorf("%w: the store's databases changed (topology epoch %d, this node had %d): restart it with store.databases as `ontime store status` lists them", sqlstore.ErrTopology, st.Epoch, epoch)
		}
		select {
		case <-ctx.Done():
			return cfg, ctx.Err()
		case <-time.After(100 * time.Millisecond): // one read of the first database's meta
		}
	}
}

// TopologyEpoch is the store's topology epoch the node opened it at.
func (n *Node) TopologyEpoch() int64 { return n.store.Epoch() }

// TopologyChanged is closed when the store's topology is about to change
// or changed under the node: an expansion's cutover is pending
// (`ontime store expand --cutover`), or the store's databases are no
// longer the node's. The node's writes are fenced from then on once the
// epoch moved; a program that embeds a node calls SwitchTopology, as
// ontime serve does, and uses the node it returns from then on. One that
// does not makes the cutover wait for it, then give up (--fence-wait).
func (n *Node) TopologyChanged() <-chan struct{} { return n.mark.changed }

// handlerReg is a Handle call, made again on the node that replaces a
// node at a cutover.
type handlerReg struct {
	topic string
	h     Handler
	opts  []HandleOption
}

// SwitchTopology does for node, once its TopologyChanged is closed, what
// ontime serve does: it stops node (waiting up to grace for deliveries
// under way), waits for the expansion's cutover (WaitTopology), and
// starts a node on the store's databases then — grown when the cutover
// happened, the same ones when it did not — with node's config but for
// store.databases, node's handlers (Handle) and logger, and opts. The
// caller uses the node returned from then on (its HTTPHandler too), and
// puts the config returned in its own before its next restart. On error
// node stays stopped.
func SwitchTopology(ctx context.Context, node *Node, grace time.Duration, opts ...NodeOption) (*Node, Config, error) {
	cfg, log := node.cfg, node.log
	epoch := node.TopologyEpoch()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	err := node.Stop(sctx)
	cancel()
	if err != nil {
		log.Warn("stop for the cutover", "err", err)
	}
	next, err := WaitTopology(ctx, cfg, epoch, log)
	if err != nil {
		return nil, cfg, err
	}
	n, err := NewNode(ctx, next, append([]NodeOption{WithLogger(log)}, opts...)...)
	if err != nil {
		return nil, cfg, fmt.Errorf("after the cutover: %w", err)
	}
	for _, r := range node.handlers {
		if err := n.Handle(r.topic, r.h, r.opts...); err != nil {
			_ = n.Stop(context.Background())
			return nil, cfg, fmt.Errorf("after the cutover: %w", err)
		}
	}
	if err := n.Start(ctx); err != nil {
		_ = n.Stop(context.Background())
		return nil, cfg, fmt.Errorf("after the cutover: %w", err)
	}
	return n, next, nil
}
