package ontime_test

import (
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
		for _, v := range []int{0, tc.max + 1} {
			c := ontime.DefaultConfig()
			tc.set(&c, v)
			c.Store.Databases = []string{"x.db"}
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.wantKey) {
				t.Errorf("%s = %d: %v, want an error naming %s", tc.key, v, err, tc.wantKey)
			}
		}
	}
	if d := ontime.DefaultConfig(); d.Store.Tables != ontime.DefaultTables || int(d.Hot.Slots) != ontime.DefaultSlots ||
		d.Delivery.MaxAttempts != ontime.DefaultMaxAttempts || d.Delivery.Concurrency != ontime.DefaultConcurrency {
		t.Fatalf("DefaultConfig disagrees with the exported defaults: %+v", d)
	}
}
