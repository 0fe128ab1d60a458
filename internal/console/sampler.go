package console

import (
	"context"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/ontimehq/ontime/internal/startstop"
)

// The series the sampler reads from the node's counters.
const (
	outcomesMetric = "ontime_deliveries_total"      // by outcome
	latenessMetric = "ontime_fire_lateness_seconds" // histogram
	// SampleWindow is how far back the overview's charts reach.
	SampleWindow = 15 * time.Minute
)

// Sample is one second of the node's delivery: rates over the second
// before At, and the lateness quantiles of the deliveries started in it
// (NaN when none started).
type Sample struct {
	At         time.Time
	Deliveries float64 // attempts that succeeded (outcome done), per second
	Failures   float64 // attempts that failed (retry, dead), per second
	P50, P99   float64 // lateness, seconds
}

// Sampler keeps a ring of per-second samples of the node's own counters
// for the overview's charts: a gather of two series once a second (a few
// microseconds), whether or not anyone watches, so a page opened during an
// incident shows the 15 minutes before it.
type Sampler struct {
	startstop.Base
	src prometheus.Gatherer

	mu   sync.Mutex
	ring []Sample // len SampleWindow/s once full, oldest at next
	next int
	prev snapshot
}

type snapshot struct {
	at       time.Time
	ok       bool
	done     float64
	failed   float64
	buckets  []bucket // cumulative, by upper bound
	observed uint64
}

type bucket struct {
	upper float64
	count uint64
}

// NewSampler samples src, a gatherer holding ontime_deliveries_total and
// ontime_fire_lateness_seconds (the node registers the two on a registry
// of their own, so a sample does not run its other collectors).
func NewSampler(src prometheus.Gatherer) *Sampler {
	return &Sampler{src: src, ring: make([]Sample, 0, int(SampleWindow/time.Second))}
}

// Start samples every second until Stop.
func (s *Sampler) Start(ctx context.Context) error {
	return s.Go(ctx, func(ctx context.Context) {
		s.sample(time.Now())
		startstop.Every(ctx, time.Second, func(context.Context) { s.sample(time.Now()) })
	})
}

// sample reads the counters and appends the second since the last read.
func (s *Sampler) sample(now time.Time) {
	cur := s.read(now)
	s.mu.Lock()
	defer s.mu.Unlock()
	prev := s.prev
	s.prev = cur
	if !prev.ok || !cur.ok {
		return
	}
	secs := cur.at.Sub(prev.at).Seconds()
	if secs <= 0 {
		return
	}
	sm := Sample{At: cur.at, Deliveries: (cur.done - prev.done) / secs, Failures: (cur.failed - prev.failed) / secs, P50: math.NaN(), P99: math.NaN()}
	if cur.observed > prev.observed && len(cur.buckets) == len(prev.buckets) {
		delta := make([]bucket, len(cur.buckets))
		for i := range cur.buckets {
			delta[i] = bucket{upper: cur.buckets[i].upper, count: cur.buckets[i].count - prev.buckets[i].count}
		}
		total := cur.observed - prev.observed
		sm.P50 = quantile(0.5, delta, total)
		sm.P99 = quantile(0.99, delta, total)
	}
	if len(s.ring) < cap(s.ring) {
		s.ring = append(s.ring, sm)
		return
	}
	s.ring[s.next] = sm
	s.next = (s.next + 1) % len(s.ring)
}

func (s *Sampler) read(now time.Time) snapshot {
	mfs, err := s.src.Gather()
	if err != nil {
		return snapshot{}
	}
	snap := snapshot{at: now, ok: true}
	for _, mf := range mfs {
		switch mf.GetName() {
		case outcomesMetric:
			for _, m := range mf.GetMetric() {
				v := m.GetCounter().GetValue()
				switch label(m, "outcome") {
				case "done":
					snap.done += v
				case "retry", "dead":
					snap.failed += v
				}
			}
		case latenessMetric:
			for _, m := range mf.GetMetric() {
				h := m.GetHistogram()
				snap.observed += h.GetSampleCount()
				for _, b := range h.GetBucket() {
					snap.buckets = append(snap.buckets, bucket{upper: b.GetUpperBound(), count: b.GetCumulativeCount()})
				}
			}
			sort.Slice(snap.buckets, func(i, j int) bool { return snap.buckets[i].upper < snap.buckets[j].upper })
		}
	}
	return snap
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// quantile interpolates q within cumulative buckets holding total
// observations, as PromQL's histogram_quantile does; past the last bucket
// it answers that bucket's bound.
func quantile(q float64, buckets []bucket, total uint64) float64 {
	if total == 0 || len(buckets) == 0 {
		return math.NaN()
	}
	rank := q * float64(total)
	lower, below := 0.0, uint64(0)
	for _, b := range buckets {
		if float64(b.count) >= rank {
			in := b.count - below
			if in == 0 {
				return b.upper
			}
			return lower + (b.upper-lower)*(rank-float64(below))/float64(in)
		}
		lower, below = b.upper, b.count
	}
	return buckets[len(buckets)-1].upper
}

// Samples returns the samples in time order, oldest first.
func (s *Sampler) Samples() []Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Sample, 0, len(s.ring))
	if len(s.ring) < cap(s.ring) {
		return append(out, s.ring...)
	}
	out = append(out, s.ring[s.next:]...)
	return append(out, s.ring[:s.next]...)
}
