package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/ontimehq/ontime/internal/metrics"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

type fakeCounter struct {
	calls  atomic.Int32
	err    error
	counts []store.TopicCount
}

func (f *fakeCounter) CountTopics(context.Context) ([]store.TopicCount, error) {
	f.calls.Add(1)
	if f.err != nil {
		return nil, f.err
	}
	return f.counts, nil
}

type fakeHot int

func (f fakeHot) Len(context.Context) (int, error) { return int(f), nil }

type fakeLanes map[string]metrics.LaneLevel

func (f fakeLanes) Levels() map[string]metrics.LaneLevel { return f }

// series gathers reg and returns each series of name keyed by its labels
// ("k=v,k=v", "" without labels): a gauge's or counter's value, a
// histogram's count.
func series(t *testing.T, reg prometheus.Gatherer, name string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			out[labelKey(m)] = value(m)
		}
	}
	return out
}

func labelKey(m *dto.Metric) string {
	k := ""
	for i, l := range m.GetLabel() {
		if i > 0 {
			k += ","
		}
		k += l.GetName() + "=" + l.GetValue()
	}
	return k
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Histogram != nil:
		return float64(m.GetHistogram().GetSampleCount())
	}
	return 0
}

func startGauges(t *testing.T, cfg metrics.GaugesConfig) *prometheus.Registry {
	t.Helper()
	g := metrics.NewGauges(cfg)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(g)
	if err := g.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Stop)
	return reg
}

// The first scrape of a leader has every series: every status of the
// table at 0 or more, per topic too, the lanes folded into their bounded
// labels with every configured destination present.
func TestGaugesLeaderFirstScrape(t *testing.T) {
	t.Parallel()
	due := time.Now().Add(-90 * time.Second)
	tasks := &fakeCounter{counts: []store.TopicCount{
		{Topic: "mail", Status: task.StatusPending, N: 3, MinDue: due},
		{Topic: "mail", Status: task.StatusDone, N: 1},
		{Topic: "sms", Status: task.StatusDead, N: 2},
	}}
	m := metrics.NewWith(nil, metrics.Options{Webhooks: []string{"https://a.example"}, Brokers: []string{"rabbit"}})
	reg := startGauges(t, metrics.GaugesConfig{Tasks: tasks, Hot: fakeHot(7), Topics: m.Topics, Dests: m.Dests, Window: 30 * time.Second,
		Lanes: fakeLanes{
			"https://a.example":         {Queued: 2, InFlight: 1, Breaker: "closed"},
			"https://chosen-1.example":  {InFlight: 4, Breaker: "open"},
			"https://chosen-2.example":  {InFlight: 1, Breaker: "half-open"},
			"mq://rabbit/jobs":          {InFlight: 5, Breaker: "closed"},
			"handler:mail":              {InFlight: 6, Breaker: "closed"},
			"http://chosen-3.example:8": {Breaker: "closed"},
		},
		ItemLags: func(context.Context) ([]float64, error) { return []float64{0, 2, 40}, nil }})
	got := series(t, reg, "ontime_tasks")
	if len(got) != 6 {
		t.Fatalf("ontime_tasks on the first scrape: %v, want all 6 statuses", got)
	}
	for st, want := range map[string]float64{"pending": 3, "claimed": 0, "running": 0, "done": 1, "dead": 2, "cancelled": 0} {
		if got["status="+st] != want {
			t.Errorf("ontime_tasks{status=%q} = %v, want %v", st, got["status="+st], want)
		}
	}
	topic := series(t, reg, "ontime_topic_tasks")
	if len(topic) != 12 || topic["status=pending,topic=mail"] != 3 || topic["status=dead,topic=sms"] != 2 || topic["status=pending,topic=sms"] != 0 {
		t.Errorf("ontime_topic_tasks: %v, want 6 statuses × 2 topics", topic)
	}
	over := series(t, reg, "ontime_topic_oldest_overdue_seconds")
	if over["topic=mail"] < 90 || over["topic=sms"] != 0 {
		t.Errorf("oldest overdue: %v, want mail ≥ 90, sms 0", over)
	}
	if got := series(t, reg, "ontime_scan_lag_max_seconds"); got[""] != 40 {
		t.Errorf("scan lag max: %v, want 40", got)
	}
	if got := series(t, reg, "ontime_scan_lag_seconds"); got[""] != 3 {
		t.Errorf("scan lag histogram count: %v, want 3 items", got)
	}
	if got := series(t, reg, "ontime_cluster_leader"); got[""] != 1 {
		t.Errorf("leader: %v, want 1 (a node alone leads)", got)
	}
	if got := series(t, reg, "ontime_hot_entries"); got[""] != 7 {
		t.Errorf("hot entries: %v, want 7", got)
	}
	if got := series(t, reg, "ontime_hot_window_seconds"); got[""] != 30 {
		t.Errorf("window: %v, want 30", got)
	}
	in := series(t, reg, "ontime_delivery_in_flight")
	want := map[string]float64{"dest=https://a.example": 1, "dest=_other": 5, "dest=mq://rabbit": 5, "dest=handler": 6}
	if len(in) != len(want) {
		t.Errorf("in flight: %v, want exactly %v (hosts chosen by submitters fold into _other)", in, want)
	}
	for k, v := range want {
		if in[k] != v {
			t.Errorf("in flight %s = %v, want %v", k, in[k], v)
		}
	}
	if open := series(t, reg, "ontime_delivery_breaker_open"); open["dest=_other"] != 2 || open["dest=https://a.example"] != 0 {
		t.Errorf("breaker open: %v, want _other 2 (open and half-open), a 0", open)
	}
	bi := series(t, reg, "ontime_build_info")
	if len(bi) != 1 {
		t.Errorf("build info: %v", bi)
	}
	for k, v := range bi {
		if v != 1 || !containsAll(k, "version=", "revision=", "go=go") {
			t.Errorf("build info %s = %v", k, v)
		}
	}
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// A node that is not the leader reports its own view of the cluster but
// none of the cluster-wide series, and never counts the tables.
func TestGaugesFollowerReportsNoTable(t *testing.T) {
	t.Parallel()
	tasks := &fakeCounter{counts: []store.TopicCount{{Topic: "a", Status: task.StatusDone, N: 20}}}
	lags := atomic.Int32{}
	reg := startGauges(t, metrics.GaugesConfig{Tasks: tasks, Hot: fakeHot(0), Lanes: fakeLanes{},
		Cluster: func(context.Context) (metrics.ClusterState, error) {
			return metrics.ClusterState{Leader: false, Term: 4, Live: 3}, nil
		},
		ItemLags: func(context.Context) ([]float64, error) { lags.Add(1); return []float64{1}, nil }})
	for _, name := range []string{"ontime_tasks", "ontime_topic_tasks", "ontime_topic_oldest_overdue_seconds", "ontime_scan_lag_max_seconds", "ontime_scan_lag_seconds"} {
		if got := series(t, reg, name); len(got) != 0 {
			t.Errorf("%s on a follower: %v, want none", name, got)
		}
	}
	if got := series(t, reg, "ontime_cluster_leader"); got[""] != 0 {
		t.Errorf("leader: %v, want 0", got)
	}
	if got := series(t, reg, "ontime_cluster_term"); got[""] != 4 {
		t.Errorf("term: %v, want 4", got)
	}
	if got := series(t, reg, "ontime_cluster_nodes_live"); got[""] != 3 {
		t.Errorf("nodes live: %v, want 3", got)
	}
	if tasks.calls.Load() != 0 || lags.Load() != 0 {
		t.Errorf("a follower read the tables: %d counts, %d lag reads", tasks.calls.Load(), lags.Load())
	}
}

// A failed count reports no task series rather than a wrong one.
func TestGaugesCountFails(t *testing.T) {
	t.Parallel()
	tasks := &fakeCounter{err: errors.New("store down")}
	reg := startGauges(t, metrics.GaugesConfig{Tasks: tasks, Hot: fakeHot(0), Lanes: fakeLanes{}})
	if got := series(t, reg, "ontime_tasks"); len(got) != 0 || tasks.calls.Load() == 0 {
		t.Errorf("tasks after a failed count: %v (%d counts), want none", got, tasks.calls.Load())
	}
	if got := series(t, reg, "ontime_cluster_leader"); got[""] != 1 {
		t.Errorf("leader: %v, want 1", got)
	}
}

// The leader's table gauges fold the topics past max_topics into _other,
// adding up their counts.
func TestGaugesFoldTopics(t *testing.T) {
	t.Parallel()
	var counts []store.TopicCount
	for i := range 10 {
		counts = append(counts, store.TopicCount{Topic: fmt.Sprintf("t%02d", i), Status: task.StatusPending, N: 1})
	}
	reg := startGauges(t, metrics.GaugesConfig{Tasks: &fakeCounter{counts: counts}, Hot: fakeHot(0), Lanes: fakeLanes{},
		Topics: metrics.NewTopics(nil, 4)})
	got := series(t, reg, "ontime_topic_tasks")
	if len(got) != 5*6 {
		t.Fatalf("topic tasks: %d series, want 5 labels × 6 statuses: %v", len(got), got)
	}
	if got["status=pending,topic=_other"] != 6 {
		t.Errorf("_other pending = %v, want 6", got["status=pending,topic=_other"])
	}
}

// 10,000 topics make at most max_topics + 1 label values in every
// per-topic series; the events of the folded topics all count.
func TestTopicLabelCardinality(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	m := metrics.NewWith(reg, metrics.Options{})
	for i := range 10000 {
		ts := m.Topics.For(fmt.Sprintf("topic-%05d", i))
		ts.Submitted.Inc()
		ts.Done.Inc()
		ts.Lateness.Observe(0.01)
		ts.Duration.Observe(0.01)
		ts.Unhandled.Inc()
	}
	limit := metrics.DefaultMaxTopics + 1
	for name, perTopic := range map[string]int{"ontime_topic_submitted_total": 1, "ontime_topic_deliveries_total": 4,
		"ontime_topic_lateness_seconds": 1, "ontime_topic_delivery_duration_seconds": 1, "ontime_tasks_unhandled_total": 1} {
		got := series(t, reg, name)
		if len(got) != limit*perTopic {
			t.Errorf("%s: %d series, want %d", name, len(got), limit*perTopic)
		}
	}
	sub := series(t, reg, "ontime_topic_submitted_total")
	if sub["topic=_other"] != 10000-metrics.DefaultMaxTopics || sub["topic=topic-00000"] != 1 {
		t.Errorf("submitted: _other %v, first topic %v", sub["topic=_other"], sub["topic=topic-00000"])
	}
	if m.Topics.Label("topic-00199") != "topic-00199" || m.Topics.Label("topic-00200") != metrics.Other || m.Topics.Label("new") != metrics.Other {
		t.Error("the first 200 topics keep their label, later ones fold")
	}
}

// Failures count per bounded destination label and class.
func TestDestFailures(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	m := metrics.NewWith(reg, metrics.Options{Webhooks: []string{"https://a.example"}})
	before := series(t, reg, "ontime_delivery_failures_total")
	if len(before) != 3*6 || before["class=timeout,dest=https://a.example"] != 0 {
		t.Errorf("failures before any: %v, want every class of a, handler and _other at 0", before)
	}
	m.Dests.Failed("https://a.example", context.DeadlineExceeded)
	m.Dests.Failed("https://evil.example", statusErr(503))
	m.Dests.Failed("https://evil2.example", statusErr(404))
	got := series(t, reg, "ontime_delivery_failures_total")
	if got["class=timeout,dest=https://a.example"] != 1 || got["class=5xx,dest=_other"] != 1 || got["class=4xx,dest=_other"] != 1 {
		t.Errorf("failures: %v", got)
	}
	for k := range got {
		if containsAll(k, "evil") {
			t.Errorf("a submitter's host became a label: %s", k)
		}
	}
}

type statusErr int

func (e statusErr) Error() string   { return fmt.Sprintf("HTTP %d", int(e)) }
func (e statusErr) HTTPStatus() int { return int(e) }

type deniedErr struct{}

func (deniedErr) Error() string      { return "denied" }
func (deniedErr) PolicyDenied() bool { return true }

func TestClassify(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("post: %w", statusErr(500)), metrics.Fail5xx},
		{statusErr(429), metrics.Fail4xx},
		{fmt.Errorf("x: %w", deniedErr{}), metrics.FailPolicy},
		{fmt.Errorf("webhook timed out: %w", context.DeadlineExceeded), metrics.FailTimeout},
		{errors.New("reset"), metrics.FailOther},
		{refused(t), metrics.FailRefused},
	} {
		if got := metrics.Classify(c.err); got != c.want {
			t.Errorf("Classify(%v) = %s, want %s", c.err, got, c.want)
		}
	}
}

// refused is the error of a real connection to a closed port.
func refused(t *testing.T) error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	c, err := net.Dial("tcp", addr)
	if err == nil {
		c.Close()
		t.Fatal("dialled a closed port")
	}
	return err
}
