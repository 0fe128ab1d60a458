package scan_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ontimehq/ontime/internal/hot"
	"github.com/ontimehq/ontime/internal/metrics"
	"github.com/ontimehq/ontime/internal/scan"
	"github.com/ontimehq/ontime/internal/store"
)

// TestItemsScannedGauge: ontime_items_scanned follows the items the node
// scans (SetItems before and after Start) and drops to 0 when it stops, so
// an operator (and the chaos suite) can tell when a handover is done.
func TestItemsScannedGauge(t *testing.T) {
	f := setup(t, time.Hour)
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	sc, err := scan.New(scan.Config{Store: f.st, Tier: f.tier, Planner: hot.NewPlanner(20*time.Millisecond, 0),
		NodeID: node, Window: window, LeaseTTL: time.Minute, Idle: time.Hour, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sc.Stop)
	items := f.st.Items()
	sc.SetItems(items)
	if v := gauge(t, reg, "ontime_items_scanned"); v != 0 {
		t.Fatalf("before Start: %v items scanned; want 0", v)
	}
	if err := sc.Start(f.ctx); err != nil {
		t.Fatal(err)
	}
	if v := gauge(t, reg, "ontime_items_scanned"); v != float64(len(items)) {
		t.Fatalf("after Start: %v items scanned; want %d", v, len(items))
	}
	sc.SetItems([]store.Item{items[0]})
	if v := gauge(t, reg, "ontime_items_scanned"); v != 1 {
		t.Fatalf("after SetItems of one item: %v items scanned; want 1", v)
	}
	sc.Stop()
	<-sc.Stopped()
	if v := gauge(t, reg, "ontime_items_scanned"); v != 0 {
		t.Fatalf("after Stop: %v items scanned; want 0", v)
	}
}

// gauge reads one gauge of reg.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("%s not registered", name)
	return 0
}
