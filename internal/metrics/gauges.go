package metrics

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ontimehq/ontime/internal/startstop"
	"github.com/ontimehq/ontime/internal/task"
)

// countEvery bounds how often a scrape recounts the task tables: counting
// by status reads an index of every table, seconds with millions of rows,
// so a scrape serves the last count and starts a new one when it is older.
const countEvery = 15 * time.Second

// TaskCounter counts the stored tasks by status (store.Store).
type TaskCounter interface {
	Count(ctx context.Context) (map[task.Status]int64, error)
}

// HotLen measures the hot tier (hot.Tier).
type HotLen interface {
	Len(ctx context.Context) (int, error)
}

// LaneLevel is one destination's delivery levels at scrape time.
type LaneLevel struct {
	Queued   int
	InFlight int
	Breaker  string // closed | open | half-open
}

// Lanes reports the delivery levels per destination (deliver.Dispatcher).
type Lanes interface {
	Levels() map[string]LaneLevel
}

// GaugesConfig configures Gauges; every field but Logger is required.
type GaugesConfig struct {
	Tasks  TaskCounter
	Hot    HotLen
	Lanes  Lanes
	Logger *slog.Logger
}

// Gauges reports the pipeline's levels at scrape time: tasks by status,
// the hot tier's size, and per destination the deliveries queued and in
// flight and the breaker's state. It is a prometheus.Collector and one of
// the node's services: counting tasks is slow, so it is done by the
// service's own worker, asked by a scrape when the count is stale.
type Gauges struct {
	startstop.Base
	cfg GaugesConfig
	log *slog.Logger

	tasks, hotLen, queued, inflight, breakerOpen *prometheus.Desc

	recount chan struct{} // one pending request

	mu      sync.Mutex
	counts  map[string]int64
	countAt time.Time
}

// NewGauges builds the collector; the node registers it and starts it.
func NewGauges(cfg GaugesConfig) *Gauges {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Gauges{cfg: cfg, log: log, recount: make(chan struct{}, 1),
		tasks:       prometheus.NewDesc("ontime_tasks", "Tasks in the store by status (recounted at most every 15s).", []string{"status"}, nil),
		hotLen:      prometheus.NewDesc("ontime_hot_entries", "Entries waiting or in flight in the hot tier.", nil, nil),
		queued:      prometheus.NewDesc("ontime_delivery_queued", "Deliveries queued per destination.", []string{"dest"}, nil),
		inflight:    prometheus.NewDesc("ontime_delivery_in_flight", "Deliveries under way per destination.", []string{"dest"}, nil),
		breakerOpen: prometheus.NewDesc("ontime_delivery_breaker_open", "1 while a destination's circuit breaker is open or half-open.", []string{"dest"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (g *Gauges) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{g.tasks, g.hotLen, g.queued, g.inflight, g.breakerOpen} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (g *Gauges) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if n, err := g.cfg.Hot.Len(ctx); err == nil {
		ch <- prometheus.MustNewConstMetric(g.hotLen, prometheus.GaugeValue, float64(n))
	}
	for dest, s := range g.cfg.Lanes.Levels() {
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
func (g *Gauges) Start(ctx context.Context) error { return g.Go(ctx, g.work) }

// work counts the tasks whenever a scrape found the last count stale.
func (g *Gauges) work(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-g.recount:
			g.count(ctx)
		}
	}
}

// taskCounts returns the last count and, when it is stale, asks the worker
// for a new one: a scrape never waits for the tables.
func (g *Gauges) taskCounts() map[string]int64 {
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

func (g *Gauges) count(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	counts, err := g.cfg.Tasks.Count(ctx)
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
