package metrics

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ontimehq/ontime/internal/buildinfo"
	"github.com/ontimehq/ontime/internal/startstop"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// Refresh intervals of the worker's rounds. A scrape serves what the last
// round found and asks for a new round when it is older than roundEvery.
const (
	// roundEvery bounds how stale the cluster state (leader, term, live
	// nodes) and the scan lag a scrape reports may be.
	roundEvery = 5 * time.Second
	// countEvery bounds how often the leader reads the counts: on SQLite
	// and PostgreSQL the writes maintain them (a few hundred rows to
	// read); MariaDB counts every row, seconds with millions of rows, so
	// a count that took longer than countEvery/countShare waits
	// countShare times its own duration, and counting never takes more
	// than a tenth of the leader's time on the database.
	countEvery = 5 * time.Second
	countShare = 10
	// firstWait is how long the first scrape waits for the first round, so
	// that it already has every series.
	firstWait = 5 * time.Second
)

// TopicCounter counts the stored tasks by topic and status (store.Store).
type TopicCounter interface {
	CountTopics(ctx context.Context) ([]store.TopicCount, error)
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

// ClusterState is the cluster as this node sees it.
type ClusterState struct {
	Leader bool  // this node is the leader (a node alone always is)
	Term   int64 // the leader's term (0 without a coordinator)
	Live   int   // live nodes
	// ZoneLive counts live nodes per zone: every zone of store.zones
	// (0 when dark) and of the nodes (nil: no zones).
	ZoneLive map[string]int
}

// GaugesConfig configures Gauges.
type GaugesConfig struct {
	Tasks  TopicCounter // required
	Hot    HotLen       // required
	Lanes  Lanes        // required
	Topics *Topics      // the topic labels (Metrics.Topics); nil: a labeller of its own
	Dests  *Dests       // the destination labels (Metrics.Dests); nil: every lane is _other
	// Cluster reads the cluster state; nil: a node alone, always leader.
	Cluster func(ctx context.Context) (ClusterState, error)
	// ItemLags reads each task item's scan lag in seconds: how long its
	// earliest unclaimed pending task has been due (0 when none is).
	ItemLags func(ctx context.Context) ([]float64, error)
	// HeldBytes is the payload bytes this node has started and not
	// delivered yet (complete.Completer.HeldBytes); nil: not reported.
	HeldBytes func() int64
	// Window is hot.window, reported so that rules can compare the scan
	// lag with it.
	Window time.Duration
	Logger *slog.Logger
}

// Gauges reports the pipeline's levels at scrape time. Per node: the hot
// tier's size, the bytes held, per destination the deliveries queued and
// in flight and the breakers open, the cluster as this node sees it, the
// build. Cluster-wide, from the leader only (so that sum() over the nodes
// is the cluster's figure): tasks by status and by topic × status, every
// status present, the oldest overdue pending task per topic, and the scan
// lag of every task item. Reading the tables is slow, so the service's own
// worker does it, asked by a scrape when its figures are stale; a scrape
// never waits for the tables, except the first one, for the first round.
type Gauges struct {
	startstop.Base
	cfg GaugesConfig
	log *slog.Logger

	hotLen, held, window, queued, inflight, breakerOpen, build *prometheus.Desc
	leader, term, live, zoneLive                               *prometheus.Desc
	tasks, topicTasks, overdue, lagMax, lag                    *prometheus.Desc
	buildLabels                                                []string

	wake    chan struct{} // one pending request for a round
	ready   chan struct{} // closed when the first round is done
	once    sync.Once
	started atomic.Bool // the worker runs: a scrape may wait for its first round

	mu       sync.Mutex
	roundAt  time.Time // when the last round ended
	state    ClusterState
	stateOK  bool
	counted  bool // counts hold the leader's last count
	countAt  time.Time
	countDur time.Duration
	counts   []store.TopicCount
	lags     []float64
	lagsOK   bool
}

// LagBuckets are the scan-lag histogram's bounds, in seconds.
var LagBuckets = []float64{.1, .5, 1, 5, 10, 30, 60, 300, 900, 3600}

// NewGauges builds the collector; the node registers it and starts it.
func NewGauges(cfg GaugesConfig) *Gauges {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Topics == nil {
		cfg.Topics = NewTopics(nil, 0)
	}
	d := prometheus.NewDesc
	return &Gauges{cfg: cfg, log: log, wake: make(chan struct{}, 1), ready: make(chan struct{}),
		buildLabels: buildLabelValues(),
		hotLen:      d("ontime_hot_entries", "Entries waiting or in flight in the hot tier. Per node with the memory tier; the redis tier is shared, so every node reports the same cluster-wide figure (use max()).", nil, nil),
		held:        d("ontime_hot_held_bytes", "Per node: payload bytes of the tasks this node started and has not delivered yet (bounded by hot.max_bytes).", nil, nil),
		window:      d("ontime_hot_window_seconds", "Per node: hot.window, how far ahead tasks are claimed; a scan lag above it means due tasks wait unclaimed.", nil, nil),
		queued:      d("ontime_delivery_queued", "Per node: deliveries queued per destination (configured destinations by name, mq://BROKER, handler, else _other).", []string{"dest"}, nil),
		inflight: d("ontime_delivery_in_flight", "Per node: deliveries under way per destination (configured destinations by name, mq://BROKER, handler, else _other).",
			[]string{"dest"}, nil),
		breakerOpen: d("ontime_delivery_breaker_open", "Per node: destinations whose circuit breaker is open or half-open, per destination label (1 or 0 for a configured destination; _other counts every folded host).",
			[]string{"dest"}, nil),
		build:  d("ontime_build_info", "Per node: 1, labelled with the binary's module version, VCS revision and Go version.", []string{"version", "revision", "go"}, nil),
		leader: d("ontime_cluster_leader", "Per node: 1 while this node is the cluster's leader, else 0; sum() over the nodes is 1 when the cluster has a leader.", nil, nil),
		term:   d("ontime_cluster_term", "Per node: the leader's term as this node sees it (0 without a coordinator); it grows at each change of leader.", nil, nil),
		live:   d("ontime_cluster_nodes_live", "Per node: live nodes as this node sees them (1 without a coordinator).", nil, nil),
		zoneLive: d("ontime_cluster_zone_nodes_live", "Per node: live nodes per zone (cluster.zone) as this node sees them, every zone of store.zones present (0: the zone is dark and other zones run its items). Absent without zones.",
			[]string{"zone"}, nil),
		tasks: d("ontime_tasks", "Cluster-wide, reported by the leader only: tasks in the store by status, every status present (read at most every 5s; on MariaDB less often when counting is slow).",
			[]string{"status"}, nil),
		topicTasks: d("ontime_topic_tasks", "Cluster-wide, reported by the leader only: tasks in the store by topic (past metrics.max_topics folded into _other) and status, every status present.",
			[]string{"topic", "status"}, nil),
		overdue: d("ontime_topic_oldest_overdue_seconds", "Cluster-wide, reported by the leader only: per topic, how long the oldest pending task has been due (0 when none is), as of the last count.",
			[]string{"topic"}, nil),
		lagMax: d("ontime_scan_lag_max_seconds", "Cluster-wide, reported by the leader only: the largest scan lag of any task item (how long its earliest unclaimed pending task has been due).", nil, nil),
		lag:    d("ontime_scan_lag_seconds", "Cluster-wide, reported by the leader only: the task items by scan lag, one observation per item at each round.", nil, nil),
	}
}

// BuildVersion is this binary's version as ontime_build_info labels it:
// the version (the release stamp, else the module version; "(devel)" for
// an unstamped build from a work tree), followed by the commit's first 12
// characters when known.
func BuildVersion() string {
	b := buildinfo.Read()
	if b.Commit != "" {
		return b.Version + " " + b.ShortCommit()
	}
	return b.Version
}

// buildLabelValues is the version, revision and go labels of
// ontime_build_info: what `ontime version` prints.
func buildLabelValues() []string {
	b := buildinfo.Read()
	return []string{b.Version, b.Commit, b.Go}
}

// Describe implements prometheus.Collector.
func (g *Gauges) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{g.hotLen, g.held, g.window, g.queued, g.inflight, g.breakerOpen, g.build,
		g.leader, g.term, g.live, g.zoneLive, g.tasks, g.topicTasks, g.overdue, g.lagMax, g.lag} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (g *Gauges) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(g.build, 1, g.buildLabels...)
	gauge(g.window, g.cfg.Window.Seconds())
	if n, err := g.cfg.Hot.Len(ctx); err == nil {
		gauge(g.hotLen, float64(n))
	}
	if g.cfg.HeldBytes != nil {
		gauge(g.held, float64(g.cfg.HeldBytes()))
	}
	g.collectLanes(gauge)
	g.collectRound(gauge, ch)
}

// collectLanes folds the lanes into their bounded labels: every
// configured destination is present, at 0 while idle.
func (g *Gauges) collectLanes(gauge func(*prometheus.Desc, float64, ...string)) {
	type level struct{ queued, inflight, open int }
	by := map[string]*level{Other: {}}
	for _, l := range g.cfg.Dests.labels() {
		by[l] = &level{}
	}
	for dest, s := range g.cfg.Lanes.Levels() {
		l := g.cfg.Dests.Label(dest)
		lv := by[l]
		if lv == nil {
			lv = &level{}
			by[l] = lv
		}
		lv.queued += s.Queued
		lv.inflight += s.InFlight
		if s.Breaker != "closed" {
			lv.open++
		}
	}
	for l, lv := range by {
		gauge(g.queued, float64(lv.queued), l)
		gauge(g.inflight, float64(lv.inflight), l)
		gauge(g.breakerOpen, float64(lv.open), l)
	}
}

// collectRound reports what the worker's last round found, asking for a
// new round when it is stale; the first scrape waits for the first round.
func (g *Gauges) collectRound(gauge func(*prometheus.Desc, float64, ...string), ch chan<- prometheus.Metric) {
	if g.started.Load() {
		select {
		case <-g.ready:
		default:
			t := time.NewTimer(firstWait)
			select {
			case <-g.ready:
			case <-t.C:
			}
			t.Stop()
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if time.Since(g.roundAt) >= roundEvery {
		select {
		case g.wake <- struct{}{}:
		default:
		}
	}
	if !g.stateOK {
		return
	}
	leader := 0.0
	if g.state.Leader {
		leader = 1
	}
	gauge(g.leader, leader)
	gauge(g.term, float64(g.state.Term))
	gauge(g.live, float64(g.state.Live))
	for z, n := range g.state.ZoneLive {
		gauge(g.zoneLive, float64(n), z)
	}
	if !g.state.Leader {
		return // the cluster-wide series: the leader's alone
	}
	if g.lagsOK {
		mx := 0.0
		buckets := make(map[float64]uint64, len(LagBuckets))
		sum := 0.0
		for _, l := range g.lags {
			mx = max(mx, l)
			sum += l
			for _, b := range LagBuckets {
				if l <= b {
					buckets[b]++
				}
			}
		}
		gauge(g.lagMax, mx)
		ch <- prometheus.MustNewConstHistogram(g.lag, uint64(len(g.lags)), sum, buckets)
	}
	if !g.counted {
		return
	}
	now := time.Now()
	total := map[task.Status]int64{}
	type topicLevel struct {
		n      map[task.Status]int64
		minDue time.Time
	}
	topics := map[string]*topicLevel{}
	for _, c := range g.counts {
		total[c.Status] += c.N
		label := g.cfg.Topics.Label(c.Topic)
		tl := topics[label]
		if tl == nil {
			tl = &topicLevel{n: map[task.Status]int64{}}
			topics[label] = tl
		}
		tl.n[c.Status] += c.N
		if !c.MinDue.IsZero() && (tl.minDue.IsZero() || c.MinDue.Before(tl.minDue)) {
			tl.minDue = c.MinDue
		}
	}
	for _, s := range task.Statuses() {
		gauge(g.tasks, float64(total[s]), s.String())
	}
	for label, tl := range topics {
		for _, s := range task.Statuses() {
			gauge(g.topicTasks, float64(tl.n[s]), label, s.String())
		}
		age := 0.0
		if !tl.minDue.IsZero() && tl.minDue.Before(now) {
			age = now.Sub(tl.minDue).Seconds()
		}
		gauge(g.overdue, age, label)
	}
}

// Start runs the worker, which makes its first round at once.
func (g *Gauges) Start(ctx context.Context) error {
	select {
	case g.wake <- struct{}{}:
	default:
	}
	g.started.Store(true)
	return g.Go(ctx, g.work)
}

// work makes a round whenever a scrape found the last one stale.
func (g *Gauges) work(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-g.wake:
			g.round(ctx)
			g.once.Do(func() { close(g.ready) })
		}
	}
}

// round reads the cluster state, and on the leader the scan lags and
// (when stale) the task counts.
func (g *Gauges) round(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	state, err := ClusterState{Leader: true, Live: 1}, error(nil)
	if g.cfg.Cluster != nil {
		state, err = g.cfg.Cluster(ctx)
	}
	g.mu.Lock()
	g.state, g.stateOK = state, err == nil
	if err != nil {
		g.log.Debug("reading the cluster state for metrics", "err", err)
	}
	leader := err == nil && state.Leader
	if !leader {
		// Another node reports the cluster-wide series; a later
		// leadership starts from a fresh count.
		g.counted, g.counts, g.lags, g.lagsOK = false, nil, nil, false
	}
	countDue := leader && (!g.counted || time.Since(g.countAt) >= max(countEvery, countShare*g.countDur))
	g.mu.Unlock()
	if leader && g.cfg.ItemLags != nil {
		lags, err := g.cfg.ItemLags(ctx)
		if err != nil {
			g.log.Debug("reading the scan lags for metrics", "err", err)
		}
		g.mu.Lock()
		g.lags, g.lagsOK = lags, err == nil
		g.mu.Unlock()
	}
	if countDue {
		t0 := time.Now()
		counts, err := g.cfg.Tasks.CountTopics(ctx)
		g.mu.Lock()
		g.countAt, g.countDur = time.Now(), time.Since(t0)
		if err != nil {
			// A failed count reports no task series rather than a wrong one.
			g.log.Debug("counting tasks for metrics", "err", err)
			g.counted, g.counts = false, nil
		} else {
			g.counted, g.counts = true, slices.Clip(counts)
		}
		g.mu.Unlock()
	}
	g.mu.Lock()
	g.roundAt = time.Now()
	g.mu.Unlock()
}
