package ontime_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ontimehq/ontime"
)

// The config accepts exactly the bounds the store and the tiers accept: each
// bound is checked at its limit and one past it, naming the key.
func TestConfigBoundsAreThePartsBounds(t *testing.T) {
	t.Parallel()
	cases := []struct {
		key     string
		set     func(c *ontime.Config, v int)
		max     int
		wantKey string
	}{
		{"store.tables", func(c *ontime.Config, v int) { c.Store.Tables = v }, ontime.MaxTables, "store.tables"},
		{"store.segments", func(c *ontime.Config, v int) { c.Store.Segments = v }, ontime.MaxSegments, "store.segments"},
		{"hot.slots", func(c *ontime.Config, v int) { c.Hot.Slots = v }, ontime.MaxSlots, "hot.slots"},
		{"metrics.max_topics", func(c *ontime.Config, v int) { c.Metrics.MaxTopics = v }, ontime.MaxMetricsMaxTopics, "metrics.max_topics"},
	}
	for _, tc := range cases {
		for _, v := range []int{1, tc.max} {
			c := ontime.DefaultConfig()
			tc.set(&c, v)
			c.Store.Databases = []string{"x.db"}
			if err := c.Validate(); err != nil {
				t.Errorf("%s = %d: %v, want accepted", tc.key, v, err)
			}
		}
		low := 0
		if tc.key == "store.tables" {
			low = -1 // 0 is unset: what the store records
		}
		for _, v := range []int{low, tc.max + 1} {
			c := ontime.DefaultConfig()
			tc.set(&c, v)
			c.Store.Databases = []string{"x.db"}
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.wantKey) {
				t.Errorf("%s = %d: %v, want an error naming %s", tc.key, v, err, tc.wantKey)
			}
		}
	}
	// store.tables unset (0) is valid on every engine: the store settles it.
	for _, driver := range []string{"sqlite", "mysql", "postgres"} {
		c := ontime.DefaultConfig()
		c.Store.Driver, c.Store.Databases = driver, []string{"x"}
		if err := c.Validate(); err != nil {
			t.Errorf("store.tables unset, %s: %v, want accepted", driver, err)
		}
	}
	// store.max_connections: a pool of one could not run a claim beside a
	// write, so its floor is 2; 0 (a StoreConfig written in Go without it)
	// is the default.
	for v, ok := range map[int]bool{0: true, 1: false, ontime.MinStoreMaxConnections: true, ontime.MaxStoreMaxConnections: true, ontime.MaxStoreMaxConnections + 1: false} {
		c := ontime.DefaultConfig()
		c.Store.MaxConnections = v
		c.Store.Databases = []string{"x.db"}
		err := c.Validate()
		if ok && err != nil {
			t.Errorf("store.max_connections = %d: %v, want accepted", v, err)
		}
		if !ok && (err == nil || !strings.Contains(err.Error(), "store.max_connections")) {
			t.Errorf("store.max_connections = %d: %v, want an error naming store.max_connections", v, err)
		}
	}
	if d := ontime.DefaultConfig(); d.Store.MaxConnections != ontime.DefaultStoreMaxConnections {
		t.Fatalf("store.max_connections defaults to %d, want %d", d.Store.MaxConnections, ontime.DefaultStoreMaxConnections)
	}
	if d := ontime.DefaultConfig(); d.Store.Tables != 0 || int(d.Hot.Slots) != ontime.DefaultSlots ||
		d.Delivery.MaxAttempts != ontime.DefaultMaxAttempts || d.Delivery.Concurrency != ontime.DefaultConcurrency ||
		d.Metrics.MaxTopics != ontime.DefaultMetricsMaxTopics {
		t.Fatalf("DefaultConfig disagrees with the exported defaults: %+v", d)
	}
}

// metrics.max_topics comes from the file and from ONTIME_METRICS_MAX_TOPICS,
// and a bad value's error names the key and its line.
func TestConfigMetricsMaxTopics(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ontime.yaml")
	if err := os.WriteFile(path, []byte("metrics:\n  max_topics: 50\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := ontime.LoadConfig(path, nil)
	if err != nil || c.Metrics.MaxTopics != 50 {
		t.Fatalf("from the file: %v, max_topics %d", err, c.Metrics.MaxTopics)
	}
	c, err = ontime.LoadConfig(path, []string{"ONTIME_METRICS_MAX_TOPICS=7"})
	if err != nil || c.Metrics.MaxTopics != 7 {
		t.Fatalf("from the environment: %v, max_topics %d", err, c.Metrics.MaxTopics)
	}
	if err := os.WriteFile(path, []byte("metrics:\n  max_topics: many\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ontime.LoadConfig(path, nil); err == nil || !strings.Contains(err.Error(), "metrics.max_topics") {
		t.Fatalf("a bad value: %v, want an error naming metrics.max_topics", err)
	}
}
