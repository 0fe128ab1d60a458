package ontime

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ontimehq/ontime/internal/deliver"
	"github.com/ontimehq/ontime/internal/hot"
	"github.com/ontimehq/ontime/internal/startstop"
	"github.com/ontimehq/ontime/internal/store"
)

// countEvery bounds how often a scrape recounts the task tables: counting
// by status reads an index of every table, seconds with millions of rows,
// so a scrape serves the last count and starts a new one when it is older.
const countEvery = 15 * time.Second

// gauges reports the pipeline's levels at scrape time: tasks by status,
// the hot tier's size, and per destination the deliveries queued and in
// flight and the breaker's state. Counting tasks is slow, so it is done by
// the service's own worker, asked by a scrape when the count is stale.
type gauges struct {
	startstop.Base
	st   store.Store
	tier hot.Tier
	disp *deliver.Dispatcher
	log  *slog.Logger

	tasks, hotLen, queued, inflight, breakerOpen *prometheus.Desc

	recount chan struct{} // one pending request

	mu      sync.Mutex
	counts  map[string]int64
	countAt time.Time
}

func newGauges(st store.Store, tier hot.Tier, disp *deliver.Dispatcher, log *slog.Logger) *gauges {
	return &gauges{st: st, tier: tier, disp: disp, log: log, recount: make(chan struct{}, 1),
		tasks:       prometheus.NewDesc("ontime_tasks", "Tasks in the store by status (recounted at most every 15s).", []string{"status"}, nil),
		hotLen:      prometheus.NewDesc("ontime_hot_entries", "Entries waiting or in flight in the hot tier.", nil, nil),
		queued:      prometheus.NewDesc("ontime_delivery_queued", "Deliveries queued per destination.", []string{"dest"}, nil),
		inflight:    prometheus.NewDesc("ontime_delivery_in_flight", "Deliveries under way per destination.", []string{"dest"}, nil),
		breakerOpen: prometheus.NewDesc("ontime_delivery_breaker_open", "1 while a destination's circuit breaker is open or half-open.", []string{"dest"}, nil),
	}
}

func (g *gauges) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{g.tasks, g.hotLen, g.queued, g.inflight, g.breakerOpen} {
		ch <- d
	}
}

func (g *gauges) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if n, err := g.tier.Len(ctx); err == nil {
		ch <- prometheus.MustNewConstMetric(g.hotLen, prometheus.GaugeValue, float64(n))
	}
	for dest, s := range g.disp.Stats() {
		ch <- prometheus.MustNewConstMetric(g.queued, prometheus.GaugeValue, float64(s.Queued), dest)
		ch <- prometheus.MustNewConstMetric(g.inflight, prometheus.GaugeValue, float64(s.InFlight), dest)
		open := 0.0
		if s.Breaker != "closed" {
			open = 1
		}
		ch <- prometheus.MustNewConstMetric(g.breakerOpen, prometheus.GaugeValue, open, dest)
	}
	for status, n := range g.taskCounts() {
		ch <- prometheus.MustNewConstMetric(g.tasks, prometheus.GaugeValue, float64(n), status)
	}
}

// Start runs the counting worker.
func (g *gauges) Start(ctx context.Context) error {
	ctx, ok, started, stopped := g.StartInit(ctx)
	if !ok {
		return nil
	}
	go func() {
		defer stopped()
		started()
		for {
			select {
			case <-ctx.Done():
				return
			case <-g.recount:
				g.count(ctx)
			}
		}
	}()
	return nil
}

// taskCounts returns the last count and, when it is stale, asks the worker
// for a new one: a scrape never waits for the tables.
func (g *gauges) taskCounts() map[string]int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	if time.Since(g.countAt) >= countEvery {
		select {
		case g.recount <- struct{}{}:
		default:
		}
	}
	return g.counts
}

func (g *gauges) count(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	counts, err := g.st.Count(ctx)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.countAt = time.Now()
	if err != nil {
		g.log.Debug("counting tasks for metrics", "err", err)
		return
	}
	g.counts = make(map[string]int64, len(counts))
	for s, n := range counts {
		g.counts[s.String()] = n
	}
}
