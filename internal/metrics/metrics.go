// Package metrics holds the Prometheus series of a node's pipeline stages.
// Each stage records into the series of its step; the node registers them
// on its own registry, never on the global default one. Gauges, one of the
// node's services, reports the pipeline's levels at scrape time.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the pipeline's Prometheus series. They are registered on the
// registry the node passes in, never on the global default one.
type Metrics struct {
	Submitted *prometheus.CounterVec // result: created | existing | invalid
	Claimed   prometheus.Counter
	Started   prometheus.Counter
	// StartedDirect: of Started, the tasks that went to delivery without
	// the hot tier and a Start: due at once, inserted running by the node
	// that took the submit, or overdue, claimed running by a scanner.
	StartedDirect prometheus.Counter
	Outcomes      *prometheus.CounterVec // outcome: done | retry | dead | deferred | snoozed | cancelled | handed_off | unhandled
	Lateness      prometheus.Histogram   // seconds from due time to the start of delivery
	Extended      prometheus.Counter     // running leases extended while the outcome waited
	Scans         prometheus.Counter
	ScanErrs      prometheus.Counter
	// ItemsScanned: the sharding items this node scans now. An item moved
	// here from a live node counts only once the handover is done (the
	// old owner has surely let go), so a rebalance shows here, not in the
	// cluster view's owners, as the time nobody scans the moved items.
	ItemsScanned prometheus.Gauge
	// LeasesEnded: leases ended early so their tasks are claimed again at
	// once; reason node_gone (a dead node's items moved here) or tier_lost.
	LeasesEnded *prometheus.CounterVec
	Paused      prometheus.Counter // hot entries of paused topics handed back unstarted
	// GroupSubmits: submits written together by one group commit (a
	// lone submit is a group of one).
	GroupSubmits prometheus.Histogram
	// OutcomesPending: started tasks whose outcome is not written yet
	// (delivering, or queued for the store); the fire stage starts no more
	// past its bound.
	OutcomesPending prometheus.Gauge
	// ClaimsExtended: claims of tasks waiting in the hot tier extended by
	// the scanner's heartbeat.
	ClaimsExtended prometheus.Counter
	// EntriesRestored: hot entries put back for a task still claimed under
	// a live lease after a stale entry of it lost its start (restore.go of
	// the fire stage).
	EntriesRestored prometheus.Counter
	FinishSeconds   prometheus.Histogram // one batch of outcomes written
	ExtendSeconds   prometheus.Histogram // one heartbeat (all held leases)
	// Topics are the per-topic series, label values bounded
	// (metrics.max_topics); ontime_tasks_unhandled_total among them.
	Topics *Topics
	// Dests labels destinations with bounded values and counts failed
	// attempts per destination and class.
	Dests *Dests
}

// Options size the labelled series.
type Options struct {
	MaxTopics int      // topics with a label of their own; 0: DefaultMaxTopics
	Webhooks  []string // configured webhook destinations (lane keys): dest label values
	Brokers   []string // configured broker names: dest="mq://NAME"
}

// New creates the series with default Options and registers them on reg
// (nil: not registered).
func New(reg prometheus.Registerer) *Metrics { return NewWith(reg, Options{}) }

// NewWith creates the series and registers them on reg (nil: not
// registered). Every help text says whether the series is per node (sum
// over nodes for the cluster) or cluster-wide.
func NewWith(reg prometheus.Registerer, o Options) *Metrics {
	m := &Metrics{Topics: NewTopics(reg, o.MaxTopics), Dests: NewDests(reg, o.Webhooks, o.Brokers),
		Submitted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ontime_tasks_submitted_total", Help: "Per node: tasks submitted, by result."}, []string{"result"}),
		Claimed:   prometheus.NewCounter(prometheus.CounterOpts{Name: "ontime_tasks_claimed_total", Help: "Per node: tasks claimed by scanners, into the hot tier or, overdue, straight to running."}),
		Started:   prometheus.NewCounter(prometheus.CounterOpts{Name: "ontime_deliveries_started_total", Help: "Per node: delivery attempts started."}),
		StartedDirect: prometheus.NewCounter(prometheus.CounterOpts{Name: "ontime_deliveries_started_direct_total",
			Help: "Per node: of the delivery attempts started, those started without the hot tier and a start: tasks due at once inserted running, and overdue tasks claimed running."}),
		Outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ontime_deliveries_total", Help: "Per node: delivery attempts finished, by outcome."}, []string{"outcome"}),
		Lateness: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ontime_fire_lateness_seconds", Help: "Per node: time from a task's due time to the start of its delivery.",
			Buckets: []float64{.0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 5, 30}}),
		Extended: prometheus.NewCounter(prometheus.CounterOpts{Name: "ontime_leases_extended_total", Help: "Per node: running leases extended because the task's outcome was not written yet."}),
		Scans:    prometheus.NewCounter(prometheus.CounterOpts{Name: "ontime_scans_total", Help: "Per node: item scans (claim rounds) run."}),
		ScanErrs: prometheus.NewCounter(prometheus.CounterOpts{Name: "ontime_scan_errors_total", Help: "Per node: item scans that failed."}),
		ItemsScanned: prometheus.NewGauge(prometheus.GaugeOpts{Name: "ontime_items_scanned",
			Help: "Per node: sharding items this node scans now (an item handed over from a live node counts once the handover is done)."}),
		LeasesEnded: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ontime_leases_ended_total",
			Help: "Per node: leases ended early so their tasks were claimed again at once, by reason: node_gone, tier_lost."}, []string{"reason"}),
		Paused: prometheus.NewCounter(prometheus.CounterOpts{Name: "ontime_paused_released_total", Help: "Per node: claimed tasks of paused topics handed back to the store unstarted."}),
		GroupSubmits: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ontime_submit_group_submits", Help: "Per node: submits written together by one group commit (one transaction per database).",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000}}),
		OutcomesPending: prometheus.NewGauge(prometheus.GaugeOpts{Name: "ontime_tasks_held",
			Help: "Per node: started tasks whose outcome is not written yet (being delivered, or queued for the store)."}),
		ClaimsExtended: prometheus.NewCounter(prometheus.CounterOpts{Name: "ontime_claims_extended_total", Help: "Per node: claims of tasks waiting in the hot tier extended by the scanner's heartbeat."}),
		EntriesRestored: prometheus.NewCounter(prometheus.CounterOpts{Name: "ontime_entries_restored_total",
			Help: "Per node: hot entries put back for tasks still claimed after a stale entry of theirs lost its start."}),
		FinishSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ontime_outcome_write_seconds", Help: "Per node: time to write one batch of delivery outcomes.",
			Buckets: []float64{.001, .005, .01, .05, .1, .5, 1, 5, 30}}),
		ExtendSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ontime_lease_heartbeat_seconds", Help: "Per node: time to extend the leases a node holds (one heartbeat).",
			Buckets: []float64{.001, .005, .01, .05, .1, .5, 1, 5, 30}}),
	}
	// Every fixed label value is present from the first scrape, at 0:
	// rate() and alerts see a series before its first event.
	for _, r := range []string{"created", "existing", "updated", "invalid"} {
		m.Submitted.WithLabelValues(r)
	}
	for _, o := range []string{OutcomeDone, OutcomeRetry, OutcomeDead, OutcomeCancelled, "deferred", "snoozed", "handed_off", "unhandled"} {
		m.Outcomes.WithLabelValues(o)
	}
	for _, r := range []string{"node_gone", "tier_lost"} {
		m.LeasesEnded.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(m.Submitted, m.Claimed, m.Started, m.StartedDirect, m.Outcomes, m.Lateness, m.Extended, m.Scans, m.ScanErrs, m.ItemsScanned, m.LeasesEnded, m.Paused, m.GroupSubmits,
			m.OutcomesPending, m.ClaimsExtended, m.EntriesRestored, m.FinishSeconds, m.ExtendSeconds)
	}
	return m
}
