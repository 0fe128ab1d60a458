// Package engine runs one node's pipeline: it scans the sharding items it
// owns, claims tasks due within the preheat window into the hot tier, fires
// them at their due time, hands them to delivery, and writes outcomes back
// in batches. It also implements api.Service, the submit side.
//
// Follow one task: Submit (this file) → insert, claimed at once when due
// within the window → hot tier → fireLoop (fire.go) → Store.Start → the
// dispatcher lane of its destination → finish → completer (completer.go) →
// Store.Finish. Tasks due later are found by scanItem (scanner.go).
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ontimehq/ontime/internal/deliver"
	"github.com/ontimehq/ontime/internal/hot"
	"github.com/ontimehq/ontime/internal/router"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// Defaults for Config.
const (
	DefaultWindow        = 30 * time.Second
	DefaultLeaseTTL      = 30 * time.Second
	DefaultDeliveryLease = 60 * time.Second
	DefaultClaimBatch    = 500
	DefaultFireBatch     = 2048
	DefaultFireWorkers   = 4
	DefaultShutdownGrace = 15 * time.Second
	DefaultFireLead      = 20 * time.Millisecond
	DefaultMaxFireLead   = 5 * time.Second
)

// Config wires an engine. Store, Tier, Dispatcher and Topology are required.
type Config struct {
	Store      store.Store
	Tier       hot.Tier
	Dispatcher *deliver.Dispatcher
	Webhook    deliver.Sink    // sink for http(s) targets; nil: such tasks fail
	Topology   router.Topology // must match the store's
	Segments   int             // must match the store's

	NodeID string
	// Window is how far ahead tasks are claimed into the hot tier.
	Window time.Duration
	// LeaseTTL is how long a claim outlives the latest due time it covers:
	// after a crash, others deliver the node's claimed tasks this long after
	// they were due, at the latest.
	LeaseTTL time.Duration
	// DeliveryLease is the lease of a running task; it must exceed the
	// longest delivery (the webhook timeout).
	DeliveryLease time.Duration
	ClaimBatch    int
	FireBatch     int
	FireWorkers   int
	// ScanIdle is the longest an item scanner sleeps when it knows of nothing
	// due: the bound on how late it notices tasks written by other nodes.
	// Default min(Window/4, 5s).
	ScanIdle      time.Duration
	ShutdownGrace time.Duration
	// FireLead is how long before its due time a task leaves the hot tier
	// and is marked running in the store; delivery itself waits for the due
	// time. It keeps the store write off the lateness path. From then on a
	// cancel answers 409. Default 20ms.
	FireLead time.Duration
	// MaxFireLead bounds how far ahead a task of a burst may be fired when
	// more tasks are due together than the store can start in FireLead
	// (see leadPlanner). Default 5s; a value not above FireLead turns the
	// spreading off, so every task fires FireLead ahead.
	MaxFireLead time.Duration
	Limits      task.Limits
	Retry       deliver.RetryPolicy
	Logger      *slog.Logger
	Metrics     *Metrics // nil: series kept but not registered
}

func (c *Config) withDefaults() {
	if c.Window <= 0 {
		c.Window = DefaultWindow
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.DeliveryLease <= 0 {
		c.DeliveryLease = DefaultDeliveryLease
	}
	if c.ClaimBatch <= 0 {
		c.ClaimBatch = DefaultClaimBatch
	}
	if c.FireBatch <= 0 {
		c.FireBatch = DefaultFireBatch
	}
	if c.FireWorkers <= 0 {
		c.FireWorkers = DefaultFireWorkers
	}
	if c.ScanIdle <= 0 {
		c.ScanIdle = min(c.Window/4, 5*time.Second)
	}
	if c.ShutdownGrace <= 0 {
		c.ShutdownGrace = DefaultShutdownGrace
	}
	if c.FireLead <= 0 {
		c.FireLead = DefaultFireLead
	}
	if c.MaxFireLead == 0 {
		c.MaxFireLead = DefaultMaxFireLead
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.Limits = c.Limits.WithDefaults()
	if c.Metrics == nil {
		c.Metrics = NewMetrics(nil)
	}
}

func (c *Config) validate() error {
	switch {
	case c.Store == nil:
		return errors.New("engine: Store is required")
	case c.Tier == nil:
		return errors.New("engine: Tier is required")
	case c.Dispatcher == nil:
		return errors.New("engine: Dispatcher is required")
	case c.NodeID == "":
		return errors.New("engine: NodeID is required")
	case c.Segments < 1:
		return errors.New("engine: Segments must be at least 1")
	}
	return c.Topology.Validate()
}

// Engine is one node's pipeline. Create with New, then Start and Stop.
type Engine struct {
	cfg   Config
	log   *slog.Logger
	m     *Metrics
	store store.Store
	tier  hot.Tier

	handlersMu sync.RWMutex
	handlers   map[string]deliver.Sink

	scanners *scanners
	comp     *completer
	lead     *leadPlanner

	started  atomic.Bool
	stopping atomic.Bool
	runCtx   context.Context // lives until Stop finishes; deliveries use it
	cancel   context.CancelFunc
	fireCtx  context.Context
	fireStop context.CancelFunc
	fireWG   sync.WaitGroup
	waiting  sync.WaitGroup // started tasks waiting for their due time
	inflight sync.WaitGroup
	// outstanding counts started tasks whose outcome is not in yet.
	outstanding atomic.Int64
	stopOnce    sync.Once
	stopErr     error
}

// New checks cfg and builds an engine; nothing runs until Start.
func New(cfg Config) (*Engine, error) {
	cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	e := &Engine{cfg: cfg, log: cfg.Logger, m: cfg.Metrics, store: cfg.Store, tier: cfg.Tier, handlers: map[string]deliver.Sink{}}
	e.scanners = newScanners(e)
	e.comp = newCompleter(cfg.Store, cfg.Logger, e.outstanding.Load)
	e.lead = newLeadPlanner(cfg.FireLead, cfg.MaxFireLead)
	return e, nil
}

// Handle registers the Go handler for tasks of topic that have no target.
func (e *Engine) Handle(topic string, h deliver.Sink) error {
	if err := task.ValidateTopic(topic); err != nil {
		return err
	}
	if h == nil {
		return errors.New("engine: nil handler")
	}
	e.handlersMu.Lock()
	e.handlers[topic] = h
	e.handlersMu.Unlock()
	return nil
}

func (e *Engine) handler(topic string) deliver.Sink {
	e.handlersMu.RLock()
	defer e.handlersMu.RUnlock()
	return e.handlers[topic]
}

// Start launches the pipeline and returns at once. With no coordinator the
// node owns every sharding item; a coordinator calls SetItems instead.
func (e *Engine) Start(ctx context.Context, ownAll bool) error {
	if !e.started.CompareAndSwap(false, true) {
		return errors.New("engine: already started")
	}
	if err := e.store.Ping(ctx); err != nil {
		return fmt.Errorf("engine: store: %w", err)
	}
	e.runCtx, e.cancel = context.WithCancel(context.WithoutCancel(ctx))
	e.fireCtx, e.fireStop = context.WithCancel(e.runCtx)
	e.comp.start()
	for range e.cfg.FireWorkers {
		e.fireWG.Add(1)
		go e.fireLoop()
	}
	if ownAll {
		e.SetItems(e.store.Items())
	}
	e.log.Info("engine started", "node", e.cfg.NodeID, "window", e.cfg.Window, "items", len(e.store.Items()))
	return nil
}

// SetItems makes the node scan exactly these items: scanners of items no
// longer listed stop, new ones start.
func (e *Engine) SetItems(items []store.Item) { e.scanners.set(e.runCtx, items) }

// Stop stops claiming, lets in-flight deliveries finish within the grace
// period, writes their outcomes, releases what the hot tier still holds
// and closes the tier. Idempotent.
func (e *Engine) Stop(ctx context.Context) error {
	if !e.started.Load() {
		return nil
	}
	e.stopOnce.Do(func() { e.stopErr = e.stop(ctx) })
	return e.stopErr
}

func (e *Engine) stop(ctx context.Context) error {
	e.stopping.Store(true)
	e.scanners.stopAll()
	e.fireStop()
	e.fireWG.Wait()
	e.waiting.Wait() // at most MaxFireLead: started tasks reach their lanes

	grace, cancel := context.WithTimeout(ctx, e.cfg.ShutdownGrace)
	defer cancel()
	var errs []error
	if err := e.cfg.Dispatcher.Stop(grace); err != nil {
		errs = append(errs, fmt.Errorf("dispatcher: %w", err))
	}
	e.inflight.Wait() // every done callback has queued its outcome
	if err := e.comp.stop(ctx); err != nil {
		errs = append(errs, fmt.Errorf("completer: %w", err))
	}
	if d, ok := e.tier.(drainer); ok {
		if entries := d.Drain(); len(entries) > 0 {
			if err := e.store.Release(ctx, refsOf(entries)); err != nil {
				errs = append(errs, fmt.Errorf("release %d held tasks: %w", len(entries), err))
			} else {
				e.log.Info("released held tasks", "count", len(entries))
			}
		}
	}
	if err := e.tier.Close(); err != nil {
		errs = append(errs, fmt.Errorf("hot tier: %w", err))
	}
	e.cancel()
	e.log.Info("engine stopped", "node", e.cfg.NodeID)
	return errors.Join(errs...)
}

// drainer is a hot tier private to this process (memory): at shutdown its
// waiting entries are handed back to the store rather than left to expire.
type drainer interface {
	Drain() []hot.Entry
}

// entry is the hot-tier entry of a claimed task: it leaves the tier when
// the lead planner says, FireLead (or, in a burst, up to MaxFireLead)
// before the task is due.
func (e *Engine) entry(now time.Time, id, topic string, due time.Time, token int64) hot.Entry {
	return hot.Entry{ID: id, Topic: topic, DueAt: e.lead.fireAt(now, due), Token: token}
}

func refsOf(entries []hot.Entry) []store.Ref {
	refs := make([]store.Ref, len(entries))
	for i, en := range entries {
		refs[i] = store.Ref{ID: en.ID, Token: en.Token, DueAt: en.DueAt, Topic: en.Topic}
	}
	return refs
}

func newToken() int64 {
	for {
		if t := rand.Int64(); t != 0 {
			return t
		}
	}
}

// item returns the sharding item that holds a task.
func (e *Engine) item(hash uint32, seg int) store.Item {
	db, table := e.cfg.Topology.Locate(hash)
	return store.Item{DB: db, Table: table, Segment: seg}
}
