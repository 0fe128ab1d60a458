package metrics

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Other is the label value of everything past a bound: topics beyond
// metrics.max_topics, destinations the config does not name.
const Other = "_other"

// DefaultMaxTopics is metrics.max_topics' default.
const DefaultMaxTopics = 200

// Outcome labels of the per-topic delivery counter. Only these four: the
// others (deferred, snoozed, unhandled, handed_off) use no attempt and
// stay in ontime_deliveries_total{outcome}.
const (
	OutcomeDone      = "done"
	OutcomeRetry     = "retry"
	OutcomeDead      = "dead"
	OutcomeCancelled = "cancelled"
)

// TopicSeries are one topic label's children, resolved once: a stage
// recording a task's event looks its topic up (Topics.For) and touches
// these, never a label map of the vectors.
type TopicSeries struct {
	Label                        string
	Submitted                    prometheus.Counter
	Done, Retry, Dead, Cancelled prometheus.Counter
	Duration, Lateness           prometheus.Observer
	Unhandled                    prometheus.Counter
}

// Topics are the per-topic series with a bounded label: the first
// max topics a node sees get their own label value, the rest fold into
// topic="_other", so a submitter choosing topic names cannot grow the
// series without end. Which topics get a label is per node (first seen);
// the leader's table gauges use the same labeller, so its folding and its
// counters' agree.
type Topics struct {
	max   int
	n     atomic.Int64 // topics with a label of their own
	known sync.Map     // topic → *TopicSeries
	mu    sync.Mutex   // adding to known
	other *TopicSeries

	submitted, deliveries, unhandled *prometheus.CounterVec
	duration, lateness               *prometheus.HistogramVec
}

// NewTopics creates the per-topic series (max < 1: DefaultMaxTopics) and
// registers them on reg (nil: not registered).
func NewTopics(reg prometheus.Registerer, max int) *Topics {
	if max < 1 {
		max = DefaultMaxTopics
	}
	t := &Topics{max: max,
		submitted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ontime_topic_submitted_total",
			Help: "Per node: tasks created by submits on this node, per topic (topics past metrics.max_topics fold into topic=\"_other\"); sum over nodes for the cluster."}, []string{"topic"}),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ontime_topic_deliveries_total",
			Help: "Per node: delivery attempts finished on this node, per topic and outcome (done, retry, dead, cancelled); sum over nodes for the cluster."}, []string{"topic", "outcome"}),
		unhandled: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ontime_tasks_unhandled_total",
			Help: "Per node: deliveries of tasks without a target deferred, unattempted, because no live node has a Go handler for their topic, per topic."}, []string{"topic"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "ontime_topic_delivery_duration_seconds",
			Help:    "Per node: time from handing a task to its destination's lane to its delivery's answer (lane wait included), per topic.",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}}, []string{"topic"}),
		lateness: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "ontime_topic_lateness_seconds",
			Help:    "Per node: time from a task's due time to the start of its first delivery attempt, per topic.",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 5, 30, 60, 300}}, []string{"topic"}),
	}
	t.other = t.series(Other)
	if reg != nil {
		reg.MustRegister(t.submitted, t.deliveries, t.unhandled, t.duration, t.lateness)
	}
	return t
}

func (t *Topics) series(label string) *TopicSeries {
	return &TopicSeries{Label: label,
		Submitted: t.submitted.WithLabelValues(label),
		Done:      t.deliveries.WithLabelValues(label, OutcomeDone),
		Retry:     t.deliveries.WithLabelValues(label, OutcomeRetry),
		Dead:      t.deliveries.WithLabelValues(label, OutcomeDead),
		Cancelled: t.deliveries.WithLabelValues(label, OutcomeCancelled),
		Unhandled: t.unhandled.WithLabelValues(label),
		Duration:  t.duration.WithLabelValues(label),
		Lateness:  t.lateness.WithLabelValues(label),
	}
}

// For returns topic's series: its own while fewer than max topics have
// one, else the "_other" series. A known topic costs one sync.Map load.
func (t *Topics) For(topic string) *TopicSeries {
	if s, ok := t.known.Load(topic); ok {
		return s.(*TopicSeries)
	}
	if t.n.Load() >= int64(t.max) || topic == Other {
		return t.other
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.known.Load(topic); ok {
		return s.(*TopicSeries)
	}
	if t.n.Load() >= int64(t.max) {
		return t.other
	}
	s := t.series(topic)
	t.known.Store(topic, s)
	t.n.Add(1)
	return s
}

// Label is topic's label value (For(topic).Label).
func (t *Topics) Label(topic string) string { return t.For(topic).Label }

// Max is the number of topics that get a label of their own.
func (t *Topics) Max() int { return t.max }
