package console

import (
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/internal/api"
)

// TestSamplerRates: the ring holds per-second rates of the outcomes
// counter and lateness quantiles of the observations made in each second.
func TestSamplerRates(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	out := prometheus.NewCounterVec(prometheus.CounterOpts{Name: outcomesMetric}, []string{"outcome"})
	late := prometheus.NewHistogram(prometheus.HistogramOpts{Name: latenessMetric, Buckets: []float64{0.001, 0.01, 0.1, 1}})
	reg.MustRegister(out, late)
	s := NewSampler(reg)
	t0 := time.Unix(1_000_000, 0)
	s.sample(t0) // the first read is the base: no sample
	out.WithLabelValues("done").Add(10)
	out.WithLabelValues("retry").Add(2)
	out.WithLabelValues("dead").Add(1)
	out.WithLabelValues("cancelled").Add(7) // neither
	for range 98 {
		late.Observe(0.005) // (0.001, 0.01]
	}
	late.Observe(0.5)
	late.Observe(0.5)
	s.sample(t0.Add(2 * time.Second))
	s.sample(t0.Add(3 * time.Second)) // a second with nothing
	got := s.Samples()
	if len(got) != 2 {
		t.Fatalf("%d samples", len(got))
	}
	if got[0].Deliveries != 5 || got[0].Failures != 1.5 {
		t.Errorf("rates %+v, want 5/s done and 1.5/s failed over 2 s", got[0])
	}
	if got[0].P50 <= 0.001 || got[0].P50 > 0.01 || got[0].P99 <= 0.1 || got[0].P99 > 1 {
		t.Errorf("quantiles %+v", got[0])
	}
	if got[1].Deliveries != 0 || !math.IsNaN(got[1].P50) {
		t.Errorf("an idle second: %+v", got[1])
	}
}

// TestSamplerRing: past the window the oldest samples go first.
func TestSamplerRing(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	out := prometheus.NewCounterVec(prometheus.CounterOpts{Name: outcomesMetric}, []string{"outcome"})
	reg.MustRegister(out)
	s := NewSampler(reg)
	t0 := time.Unix(2_000_000, 0)
	n := int(SampleWindow/time.Second) + 30
	for i := range n + 1 {
		s.sample(t0.Add(time.Duration(i) * time.Second))
	}
	got := s.Samples()
	if len(got) != int(SampleWindow/time.Second) {
		t.Fatalf("%d samples", len(got))
	}
	if !got[0].At.Equal(t0.Add(31*time.Second)) || !got[len(got)-1].At.Equal(t0.Add(time.Duration(n)*time.Second)) {
		t.Errorf("window %v … %v", got[0].At, got[len(got)-1].At)
	}
	for i := 1; i < len(got); i++ {
		if !got[i].At.After(got[i-1].At) {
			t.Fatalf("out of order at %d", i)
		}
	}
}

func TestDescribeCron(t *testing.T) {
	t.Parallel()
	for expr, want := range map[string]string{
		"0 9 * * *":         "at 09:00, every day",
		"0 9 * * 1-5":       "at 09:00, on Monday–Friday",
		"*/15 8-18 * * 1-5": "every 15 minutes, at hour 8–18, on Monday–Friday",
		"30 0 3 * * *":      "at 03:00:30, every day",
		"0 0 1 1 *":         "at 00:00, on day of the month 1, in January",
		"* * * * *":         "every minute",
		"@every 10s":        "every 10s",
		"@hourly":           "once an hour, at minute 0",
	} {
		if got := describeCron(expr); got != want {
			t.Errorf("%q: %q, want %q", expr, got, want)
		}
	}
}

func TestSafeBack(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"/ui/dead?topic=a":      "/ui/dead?topic=a",
		"https://evil.example/": "/ui/",
		"//evil.example/ui/":    "/ui/",
		"/v1/tasks":             "/ui/",
		"":                      "/ui/",
	} {
		if got := safeBack(in, "/ui/"); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

// TestViewerCan: the console offers what the API would allow: roles by
// route, and for a token limited to topics only its tasks and topics.
func TestViewerCan(t *testing.T) {
	t.Parallel()
	admin := &viewer{tok: &api.Token{Name: "a", Role: api.RoleAdmin}}
	read := &viewer{tok: &api.Token{Name: "r", Role: api.RoleRead}}
	orders := &viewer{tok: &api.Token{Name: "o", Role: api.RoleAdmin, Topics: "orders.*"}}
	open := &viewer{}
	for _, tc := range []struct {
		v            *viewer
		method, path string
		want         bool
	}{
		{open, "POST", "/v1/topics/x:pause", true},
		{admin, "GET", "/v1/cluster", true},
		{admin, "POST", "/v1/topics/x:pause", true},
		{read, "GET", "/v1/cluster", false},
		{read, "GET", "/v1/topics", true},
		{read, "POST", "/v1/topics/x:pause", false},
		{read, "DELETE", "/v1/tasks/x", false},
		{orders, "GET", "/v1/cluster", false},
		{orders, "GET", "/v1/topics", false},
		{orders, "POST", "/v1/schedules/s:trigger", false},
		{orders, "POST", "/v1/topics/orders.eu:pause", true},
		{orders, "POST", "/v1/topics/billing:pause", false},
		{orders, "DELETE", "/v1/tasks/x", true},
	} {
		if got := tc.v.Can(tc.method, tc.path); got != tc.want {
			t.Errorf("%+v %s %s: %v", tc.v.tok, tc.method, tc.path, got)
		}
	}
}

// TestLastFires: the newest fire times up to ScheduledUntil, none before
// the schedule was created.
func TestLastFires(t *testing.T) {
	t.Parallel()
	created := time.Date(2030, 1, 10, 12, 0, 0, 0, time.UTC)
	s := apiv1.Schedule{Cron: "0 3 * * *", TimeZone: "UTC", CreatedAt: created, ScheduledUntil: created.Add(50 * time.Hour)}
	got := lastFires(s, 3)
	want := []time.Time{time.Date(2030, 1, 12, 3, 0, 0, 0, time.UTC), time.Date(2030, 1, 11, 3, 0, 0, 0, time.UTC)}
	if len(got) != 2 || !got[0].Equal(want[0]) || !got[1].Equal(want[1]) {
		t.Fatalf("%v, want %v", got, want)
	}
	s.Cron = "* * * * * *"
	if got := lastFires(s, 3); len(got) != 3 || !got[0].Equal(s.ScheduledUntil) {
		t.Fatalf("every second: %v", got)
	}
}
