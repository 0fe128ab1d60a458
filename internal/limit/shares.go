package limit

import (
	"context"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/ontimehq/ontime/internal/startstop"
)

// DefaultSharesEvery is how often Shares reads the live nodes.
const DefaultSharesEvery = time.Second

// SharesConfig configures Shares.
type SharesConfig struct {
	// Self is this node's ID.
	Self string
	// Live lists the IDs of the live nodes, as the coordinator sees them
	// (this one may be missing while it joins: it counts anyway).
	Live func(ctx context.Context) ([]string, error)
	// Every is how often Live is read; default DefaultSharesEvery.
	Every   time.Duration
	Metrics *Metrics
	Logger  *slog.Logger
}

// Shares splits limits among the live nodes (the backend without Redis).
// Until it has read the live nodes once, this node takes the whole limit,
// as a node alone does.
type Shares struct {
	startstop.Base
	cfg SharesConfig

	mu     sync.Mutex
	n, idx int
	gates  []*shareGate
}

// NewShares builds Shares; nothing runs until Start.
func NewShares(cfg SharesConfig) *Shares {
	if cfg.Every <= 0 {
		cfg.Every = DefaultSharesEvery
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Shares{cfg: cfg, n: 1}
}

// Start reads the live nodes, then again every Every.
func (s *Shares) Start(ctx context.Context) error {
	if s.cfg.Live == nil {
		return nil
	}
	return s.Go(ctx, func(ctx context.Context) {
		s.refresh(ctx)
		startstop.Every(ctx, s.cfg.Every, s.refresh)
	})
}

func (s *Shares) refresh(ctx context.Context) {
	ids, err := s.cfg.Live(ctx)
	if err != nil {
		s.cfg.Logger.Debug("limits: reading the live nodes failed; shares kept", "err", err)
		return
	}
	if !slices.Contains(ids, s.cfg.Self) {
		ids = append(ids, s.cfg.Self)
	}
	slices.Sort(ids)
	s.set(len(ids), slices.Index(ids, s.cfg.Self))
}

// set re-splits every gate's limit for n live nodes of which this is the
// idx-th.
func (s *Shares) set(n, idx int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n == s.n && idx == s.idx {
		return
	}
	s.n, s.idx = n, idx
	for _, g := range s.gates {
		g.split(n, idx)
	}
}

// Gate returns a gate for spec whose share follows the live nodes.
func (s *Shares) Gate(kind, name string, spec Spec) Gate {
	g := &shareGate{spec: spec, m: s.cfg.Metrics.series(kind, name, spec), wake: make(chan struct{})}
	if spec.Rate > 0 {
		g.lim = rate.NewLimiter(rate.Limit(spec.Rate), 1)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g.split(s.n, s.idx)
	s.gates = append(s.gates, g)
	return g
}

// shareGate is one limit's share on this node.
type shareGate struct {
	spec Spec
	m    series
	lim  *rate.Limiter // nil: no rate

	mu        sync.Mutex
	share     float64 // rate share
	cap       int     // concurrency share; 0: no limit
	inFlight  int
	wake      chan struct{} // closed when a slot frees or cap grows
	throttled atomic.Int64
}

// split sets the share of node idx of n: rate/n; the concurrency's
// integer split, the remainder to the first nodes, at least 1 each.
func (g *shareGate) split(n, idx int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.lim != nil {
		g.share = g.spec.Rate / float64(n)
		// A tenth of a second of calls, as a node's own limit holds:
		// over 30 s that is within 0.4 % of the rate.
		g.lim.SetLimit(rate.Limit(g.share))
		g.lim.SetBurst(max(1, int(math.Ceil(g.share/10))))
		g.m.rateShare.Set(g.share)
	}
	if c := g.spec.Concurrency; c > 0 {
		g.cap = c / n
		if idx < c%n {
			g.cap++
		}
		g.cap = max(g.cap, 1)
		g.m.concShare.Set(float64(g.cap))
		close(g.wake)
		g.wake = make(chan struct{})
	}
}

func (g *shareGate) Enter(ctx context.Context) (func(), error) {
	if g.lim != nil {
		r := g.lim.Reserve()
		if d := r.Delay(); d > 0 {
			g.throttled.Add(1)
			g.m.rateThrottled.Inc()
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				r.Cancel()
				return nil, ctx.Err()
			case <-t.C:
			}
		}
	}
	if g.spec.Concurrency <= 0 {
		return noop, nil
	}
	counted := false
	for {
		g.mu.Lock()
		if g.inFlight < g.cap {
			g.inFlight++
			g.mu.Unlock()
			return g.leave, nil
		}
		wake := g.wake
		g.mu.Unlock()
		if !counted {
			counted = true
			g.throttled.Add(1)
			g.m.concThrottled.Inc()
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-wake:
		}
	}
}

func (g *shareGate) leave() {
	g.mu.Lock()
	g.inFlight--
	close(g.wake)
	g.wake = make(chan struct{})
	g.mu.Unlock()
}

func (g *shareGate) View() View {
	g.mu.Lock()
	defer g.mu.Unlock()
	return View{Spec: g.spec, RateShare: g.share, ConcurrencyShare: g.cap, Throttled: g.throttled.Load()}
}
