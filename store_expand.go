package ontime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/internal/api"
	"github.com/ontimehq/ontime/internal/startstop"
	"github.com/ontimehq/ontime/internal/store/sqlstore"
)

// Expander runs the expansions that POST /v1/store:expand asks for, as
// `ontime store expand` would, on a store of its own opened from the
// node's config. It outlives the node it serves: the online cutover stops
// that node and starts another on the grown store (ontime serve), while
// the expansion goes on. Whoever builds it (ontime serve) starts and
// stops it and gives it to each node (WithExpander).
type Expander struct {
	startstop.Base
	cfg  Config
	log  *slog.Logger
	jobs chan apiv1.StoreExpandRequest

	mu   sync.Mutex
	busy bool
}

// NewExpander builds the expander of cfg's store.
func NewExpander(cfg Config, log *slog.Logger) *Expander {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Expander{cfg: cfg, log: log, jobs: make(chan apiv1.StoreExpandRequest, 1)}
}

// WithExpander lets the node's POST /v1/store:expand run expansions with
// x; without it the route answers 409 (run `ontime store expand`).
func WithExpander(x *Expander) NodeOption { return func(o *nodeOptions) { o.expander = x } }

// Start runs the expander until Stop.
func (x *Expander) Start(ctx context.Context) error { return x.Go(ctx, x.run) }

func (x *Expander) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case req := <-x.jobs:
			if err := x.expand(ctx, req); err != nil && ctx.Err() == nil {
				x.log.Error("store expansion (POST /v1/store:expand) stopped; GET /v1/store shows where; POST again to resume", "err", err)
			}
			x.mu.Lock()
			x.busy = false
			x.mu.Unlock()
		}
	}
}

// open opens the store of the config, with extra databases after it.
func (x *Expander) open(ctx context.Context, extra []string) (*sqlstore.Store, error) {
	dsns := append(append([]string{}, x.cfg.Store.Databases...), extra...)
	return sqlstore.Open(ctx, sqlstore.Config{Driver: x.cfg.Store.Driver, DSNs: dsns, Tables: x.cfg.Store.Tables, Segments: x.cfg.Store.Segments, MaxConns: x.cfg.Store.MaxConnections, Logger: x.log})
}

// begin records the expansion (or finds the one under way) and queues it.
func (x *Expander) begin(ctx context.Context, req apiv1.StoreExpandRequest) (*apiv1.StoreStatus, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.busy {
		return nil, fmt.Errorf("%w: this node runs an expansion already; GET /v1/store shows its progress", api.ErrStoreConflict)
	}
	// The new databases: the call's, else the node's config's.
	field := "databases"
	if len(req.Databases) == 0 && len(x.cfg.Store.ExpandDatabases) > 0 {
		req.Databases, field = x.cfg.Store.ExpandDatabases, "store.expand_databases"
	}
	st, err := x.open(ctx, nil)
	if errors.Is(err, sqlstore.ErrTopology) && len(req.Databases) > 0 {
		st, err = x.open(ctx, req.Databases) // after the cutover, the config not grown yet
	}
	if err != nil {
		return nil, err
	}
	defer st.Close()
	s, err := st.ExpansionStatus(ctx)
	if err != nil {
		return nil, err
	}
	switch {
	case s.Phase == sqlstore.PhaseNone && len(req.Databases) == 0:
		return nil, fmt.Errorf("%w: databases: name %d new databases, one per database of the store (or list them in the node's store.expand_databases)", api.ErrStoreConflict, s.Databases)
	case s.Phase != sqlstore.PhaseCleanup:
		if err := st.ExpandBeginAs(ctx, field, req.Databases); errors.Is(err, sqlstore.ErrExpansion) {
			return nil, fmt.Errorf("%w: %w", api.ErrStoreConflict, err)
		} else if err != nil {
			return nil, err
		}
	}
	if s, err = st.ExpansionStatus(ctx); err != nil {
		return nil, err
	}
	x.busy = true
	x.jobs <- req // room for one: busy was false
	return storeStatusView(s, st.Tables()), nil
}

// expand runs a recorded expansion: the copy, then with req.Cutover the
// online cutover and the cleanup.
func (x *Expander) expand(ctx context.Context, req apiv1.StoreExpandRequest) error {
	o := sqlstore.ExpandOptions{OnProgress: func(s sqlstore.ExpandStatus) {}, Nice: req.Nice, Rate: req.Rate}
	st, err := x.open(ctx, nil)
	var twins []string
	if errors.Is(err, sqlstore.ErrTopology) {
		w, werr := sqlstore.OpenWatch(x.cfg.Store.Driver, x.cfg.Store.Databases[0])
		if werr != nil {
			return werr
		}
		ts, werr := w.Read(ctx)
		w.Close()
		if werr != nil {
			return werr
		}
		twins = ts.Twins
		st, err = x.open(ctx, twins)
	}
	if err != nil {
		return err
	}
	defer func() { st.Close() }()
	s, err := st.ExpansionStatus(ctx)
	if err != nil {
		return err
	}
	if s.Phase == sqlstore.PhaseCopy {
		start := time.Now()
		if err := st.ExpandCopy(ctx, o); err != nil {
			return err
		}
		x.log.Info("store expansion: copied", "took", time.Since(start).Round(time.Millisecond))
		if !req.Cutover {
			return nil
		}
		w, err := sqlstore.OpenWatch(x.cfg.Store.Driver, x.cfg.Store.Databases[0])
		if err != nil {
			return err
		}
		ts, err := w.Read(ctx)
		w.Close()
		if err != nil {
			return err
		}
		twins = ts.Twins
		start = time.Now()
		if err := st.ExpandCutover(ctx, o); err != nil {
			return err
		}
		x.log.Info("store expansion: cut over", "pause", time.Since(start).Round(time.Millisecond))
		st.Close()
		if st, err = x.open(ctx, twins); err != nil {
			return fmt.Errorf("after the cutover: %w", err)
		}
	}
	start := time.Now()
	if err := st.ExpandCleanup(ctx, o); err != nil {
		return err
	}
	x.log.Info("store expansion: cleaned up", "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// StoreExpand answers POST /v1/store:expand: the expansion is recorded and
// runs on the node's expander; GET /v1/store shows its progress.
func (n *Node) StoreExpand(ctx context.Context, req apiv1.StoreExpandRequest) (*apiv1.StoreStatus, error) {
	if n.expander == nil {
		return nil, fmt.Errorf("%w: this node does not run expansions (an embedded node); run `ontime store expand`", api.ErrStoreConflict)
	}
	return n.expander.begin(ctx, req)
}
