// Package limit holds rate and concurrency limits that hold across a
// cluster: a destination's or a topic's `rate` (calls per second) and
// `concurrency` (calls in flight) are totals of every node, not per node.
// Two backends, chosen by what the cluster already has:
//
//   - Redis (hot.tier: redis): one GCRA bucket and one semaphore per limit
//     in Redis, each state change one Lua script (scripts.go) judged by
//     Redis's clock. Every call asks Redis, so the total holds whatever
//     the nodes' shares of the work.
//   - Shares (no Redis): each live node takes an equal share of the
//     limit, by its place among the live nodes the coordinator lists:
//     rate/N each, and the concurrency split so the shares add up to it
//     (every node at least 1). Re-split when membership changes (Shares
//     looks every second). A node without work leaves its share unused.
//
// A Gate is what a delivery lane asks before each call (deliver.Gate).
package limit

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Spec is one limit: a destination's or a topic's settings.
type Spec struct {
	// Rate is the calls per second at most, cluster wide; 0: no limit.
	Rate float64
	// Concurrency is the calls in flight at most, cluster wide; 0: no
	// limit.
	Concurrency int
	// Lease bounds how long a call may hold a concurrency slot (the
	// delivery timeout and a margin): a node killed mid-call gives its
	// slots back then. Redis only.
	Lease time.Duration
}

// Validate checks s; field is the config key it came from
// (destinations."https://h" or topics.NAME).
func (s Spec) Validate(field string) error {
	switch {
	case math.IsNaN(s.Rate) || s.Rate < 0 || s.Rate > MaxRate:
		return fmt.Errorf("%s.rate: %v is out of range 0..%v calls per second (0: no limit)", field, s.Rate, MaxRate)
	case s.Concurrency < 0 || s.Concurrency > MaxConcurrency:
		return fmt.Errorf("%s.concurrency: %d is out of range 0..%d (0: no limit)", field, s.Concurrency, MaxConcurrency)
	}
	return nil
}

// Bounds of a Spec.
const (
	MaxRate        = 1e6
	MaxConcurrency = 10000
)

// Kinds of limits, the label kind of the metrics.
const (
	KindDestination = "destination"
	KindTopic       = "topic"
)

// Metrics are the limits' series: per kind and name, the configured
// total, this node's share of it, and the calls that had to wait.
type Metrics struct {
	limit     *prometheus.GaugeVec
	share     *prometheus.GaugeVec
	throttled *prometheus.CounterVec
}

// NewMetrics makes the series and registers them on reg (nil: not
// registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		limit: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ontime_limit",
			Help: "Cluster wide: a destination's or topic's configured limit, per kind (destination, topic), name and limit (rate: calls/s; concurrency: calls in flight)."},
			[]string{"kind", "name", "limit"}),
		share: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ontime_limit_share",
			Help: "Per node: the part of ontime_limit this node may use now (the whole limit with Redis, shared call by call; limit / live nodes without)."},
			[]string{"kind", "name", "limit"}),
		throttled: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ontime_limit_throttled_total",
			Help: "Per node: calls that waited for a cluster-wide limit, per kind, name and limit."},
			[]string{"kind", "name", "limit"}),
	}
	if reg != nil {
		reg.MustRegister(m.limit, m.share, m.throttled)
	}
	return m
}

// series are one gate's children of the metrics.
type series struct {
	rateShare, concShare         prometheus.Gauge
	rateThrottled, concThrottled prometheus.Counter
}

func (m *Metrics) series(kind, name string, s Spec) series {
	if m == nil {
		m = NewMetrics(nil)
	}
	m.limit.WithLabelValues(kind, name, "rate").Set(s.Rate)
	m.limit.WithLabelValues(kind, name, "concurrency").Set(float64(s.Concurrency))
	return series{
		rateShare: m.share.WithLabelValues(kind, name, "rate"), concShare: m.share.WithLabelValues(kind, name, "concurrency"),
		rateThrottled: m.throttled.WithLabelValues(kind, name, "rate"), concThrottled: m.throttled.WithLabelValues(kind, name, "concurrency"),
	}
}

// View is a limit as the API shows it (GET /v1/topics).
type View struct {
	Spec
	RateShare        float64 // this node's share now
	ConcurrencyShare int
	Throttled        int64 // calls of this node that waited
}

// Gate admits calls against one limit.
type Gate interface {
	// Enter waits until one call may start and returns the function that
	// ends it. An error (ctx ended) means the call must not be made.
	Enter(ctx context.Context) (leave func(), err error)
	// View describes the limit and this node's use of it.
	View() View
}

func noop() {}
