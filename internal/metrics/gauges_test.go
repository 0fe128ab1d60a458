package metrics_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ontimehq/ontime/internal/metrics"
	"github.com/ontimehq/ontime/internal/task"
)

type fakeCounter struct {
	calls atomic.Int32
	err   error
}

func (f *fakeCounter) Count(context.Context) (map[task.Status]int64, error) {
	f.calls.Add(1)
	return map[task.Status]int64{task.StatusPending: 3, task.StatusDone: 1}, f.err
}

type fakeHot int

func (f fakeHot) Len(context.Context) (int, error) { return int(f), nil }

type fakeLanes map[string]metrics.LaneLevel

func (f fakeLanes) Levels() map[string]metrics.LaneLevel { return f }

// values gathers reg and returns each series of name by its one label's
// value ("" for a series without labels).
func values(t *testing.T, reg *prometheus.Registry, name string) map[string]float64 {
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
			l := ""
			if ls := m.GetLabel(); len(ls) > 0 {
				l = ls[0].GetValue()
			}
			out[l] = m.GetGauge().GetValue()
		}
	}
	return out
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

// A scrape reports the hot tier and the lanes at once; the task counts come
// from the worker the first scrape woke, and later scrapes serve them.
func TestGaugesReportLevels(t *testing.T) {
	t.Parallel()
	tasks := &fakeCounter{}
	reg := startGauges(t, metrics.GaugesConfig{Tasks: tasks, Hot: fakeHot(7), Lanes: fakeLanes{
		"a": {Queued: 2, InFlight: 1, Breaker: "closed"},
		"b": {Breaker: "half-open"},
	}})
	if got := values(t, reg, "ontime_hot_entries"); got[""] != 7 {
		t.Errorf("hot entries: %v, want 7", got)
	}
	if got := values(t, reg, "ontime_delivery_queued"); len(got) != 2 || got["a"] != 2 || got["b"] != 0 {
		t.Errorf("queued: %v", got)
	}
	if got := values(t, reg, "ontime_delivery_in_flight"); len(got) != 2 || got["a"] != 1 {
		t.Errorf("in flight: %v", got)
	}
	if got := values(t, reg, "ontime_delivery_breaker_open"); len(got) != 2 || got["a"] != 0 || got["b"] != 1 {
		t.Errorf("breaker open: %v (half-open counts as open)", got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := values(t, reg, "ontime_tasks")
		if len(got) > 0 {
			if len(got) != 2 || got["pending"] != 3 || got["done"] != 1 {
				t.Fatalf("tasks: %v, want pending 3, done 1", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no task counts after %d count calls", tasks.calls.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A failed count reports no task series rather than a wrong one.
func TestGaugesCountFails(t *testing.T) {
	t.Parallel()
	tasks := &fakeCounter{err: errors.New("store down")}
	reg := startGauges(t, metrics.GaugesConfig{Tasks: tasks, Hot: fakeHot(0), Lanes: fakeLanes{}})
	deadline := time.Now().Add(10 * time.Second)
	for tasks.calls.Load() == 0 {
		values(t, reg, "ontime_tasks") // each scrape asks for a count until one ran
		if time.Now().After(deadline) {
			t.Fatal("the worker never counted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := values(t, reg, "ontime_tasks"); len(got) != 0 {
		t.Errorf("tasks after a failed count: %v, want none", got)
	}
}
