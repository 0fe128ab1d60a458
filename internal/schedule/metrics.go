package schedule

import "github.com/prometheus/client_golang/prometheus"

// metrics are the schedule service's Prometheus series, registered on the
// node's registry (Config.Registerer).
type metrics struct {
	made      prometheus.Counter     // tasks made from fire times (not found existing by key)
	missed    *prometheus.CounterVec // misfire: skip | fire_once
	withdrawn prometheus.Counter
	// firesMissed: tasks made ahead that started later than the misfire
	// threshold and were not delivered (Screen), by misfire policy.
	firesMissed *prometheus.CounterVec
	failures    prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		made: prometheus.NewCounter(prometheus.CounterOpts{Name: "ontime_schedule_tasks_made_total",
			Help: "Per node: tasks made from schedules' fire times (and triggers) by this node."}),
		missed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ontime_schedule_misfires_total",
			Help: "Per node: times a schedule found fire times missed while no node made them, by misfire policy."}, []string{"misfire"}),
		withdrawn: prometheus.NewCounter(prometheus.CounterOpts{Name: "ontime_schedule_tasks_withdrawn_total",
			Help: "Per node: tasks made ahead and withdrawn because their schedule changed, was paused or deleted."}),
		firesMissed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ontime_schedule_fires_missed_total",
			Help: "Per node: tasks made ahead that started later than the misfire threshold and were cancelled, not delivered, by misfire policy."}, []string{"misfire"}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{Name: "ontime_schedule_round_failures_total",
			Help: "Per node: schedule rounds that failed on the store (retried)."}),
	}
	for _, p := range []string{"skip", "fire_once"} {
		m.missed.WithLabelValues(p)
		m.firesMissed.WithLabelValues(p)
	}
	if reg != nil {
		reg.MustRegister(m.made, m.missed, m.withdrawn, m.firesMissed, m.failures)
	}
	return m
}
