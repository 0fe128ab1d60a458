package metrics

import "github.com/prometheus/client_golang/prometheus"

// Jobs are the scan jobs' series (internal/scanjob).
type Jobs struct {
	Rows     *prometheus.CounterVec   // job, result: fetched | processed | failed | left
	Duration *prometheus.HistogramVec // job: seconds from an item run's start to its end
	ItemLag  *prometheus.GaugeVec     // job: seconds since the owned item furthest behind last found nothing left
	Skipped  *prometheus.CounterVec   // job: triggers skipped because the item was still running (overlap: skip)
	Broken   *prometheus.GaugeVec     // job: 1 while the database refuses a statement of the SQL job (it runs nothing), else 0
}

// NewJobs creates the series and registers them on reg (nil: not registered).
func NewJobs(reg prometheus.Registerer) *Jobs {
	m := &Jobs{
		Rows: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ontime_job_rows_total",
			Help: "Per node: rows of users' tables handled by scan jobs, by result (fetched, processed, failed, left after max_attempts)."}, []string{"job", "result"}),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "ontime_job_run_duration_seconds",
			Help:    "Per node: duration of one item's run of a scan job.",
			Buckets: []float64{.01, .05, .1, .5, 1, 5, 10, 30, 60, 300, 1800}}, []string{"job"}),
		ItemLag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ontime_job_item_lag_seconds",
			Help: "Per node: per job, seconds since the item of this node furthest behind last found nothing left to process."}, []string{"job"}),
		Skipped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ontime_job_triggers_skipped_total",
			Help: "Per node: triggers skipped because the item was still running (overlap: skip)."}, []string{"job"}),
		Broken: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ontime_job_broken",
			Help: "Per node: 1 while the database refuses a statement of the SQL job (a missing table or column, a bad on_success.set): it runs nothing until the statement passes; else 0."}, []string{"job"}),
	}
	if reg != nil {
		reg.MustRegister(m.Rows, m.Duration, m.ItemLag, m.Skipped, m.Broken)
	}
	return m
}

// Add makes job's series present at 0 (a job's label values come from the
// config and the program, so they are bounded).
func (m *Jobs) Add(job string) {
	for _, r := range []string{"fetched", "processed", "failed", "left"} {
		m.Rows.WithLabelValues(job, r)
	}
	m.Duration.WithLabelValues(job)
	m.ItemLag.WithLabelValues(job)
	m.Skipped.WithLabelValues(job)
	m.Broken.WithLabelValues(job)
}
