package ontime

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/deliver"
)

func TestDestinationsConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ontime.yaml")
	yaml := "data_dir: " + dir + `
delivery: {concurrency: 8, timeout: 3s}
destinations:
  "HTTPS://Hooks.Example.com:443/": {batch: 100, concurrency: 4, rate: 50}
  "http://127.0.0.1:8080": {timeout: 30s}
`
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	dests := c.destinations()
	hooks, local := dests["https://hooks.example.com"], dests["http://127.0.0.1:8080"]
	if hooks.Batch != 100 || hooks.Concurrency != 4 || hooks.Rate != 50 || hooks.Timeout != 3*time.Second {
		t.Errorf("hooks.example.com: %+v", hooks)
	}
	if local.Batch != 1 || local.Concurrency != 8 || local.Timeout != 30*time.Second {
		t.Errorf("127.0.0.1:8080: %+v", local)
	}
	if c.deliveryTimeout() != 30*time.Second {
		t.Errorf("the running lease covers %s, not the longest timeout", c.deliveryTimeout())
	}
	lanes := laneConfig(1000, dests)
	// Targets name lanes in any spelling: the lane key is normalised.
	for _, target := range []string{"https://HOOKS.example.com/a?b=1", "https://hooks.example.com:443/x"} {
		if got := lanes(deliver.Destination(target)); got != (deliver.LaneConfig{Limit: 400, Rate: 50}) {
			t.Errorf("%s: lane %+v", target, got)
		}
	}
	if got := lanes(deliver.Destination("https://other.example.com/")); got != (deliver.LaneConfig{}) {
		t.Errorf("unconfigured destination: lane %+v; want one task per call", got)
	}
	if got := lanes("mq://rabbit/x"); got.Limit != 1000 {
		t.Errorf("broker lane %+v", got)
	}

	for _, tc := range []struct {
		key  string
		d    DestinationConfig
		want string
	}{
		{"https://h", DestinationConfig{Batch: 1001}, `destinations."https://h".batch: 1001 is out of range 1..1000`},
		{"https://h", DestinationConfig{Batch: -1}, `destinations."https://h".batch: -1`},
		{"https://h", DestinationConfig{Concurrency: -2}, `destinations."https://h".concurrency: -2`},
		{"https://h", DestinationConfig{Concurrency: 10001}, `destinations."https://h".concurrency: 10001`},
		{"https://h", DestinationConfig{Rate: -1}, `destinations."https://h".rate: -1`},
		{"https://h", DestinationConfig{Rate: math.NaN()}, `destinations."https://h".rate: NaN`},
		{"https://h", DestinationConfig{Rate: 2e6}, `destinations."https://h".rate: 2e+06`},
		{"https://h", DestinationConfig{Timeout: Duration(time.Millisecond)}, `destinations."https://h".timeout: 1ms is out of range`},
		{"https://h", DestinationConfig{Timeout: Duration(2 * time.Hour)}, `destinations."https://h".timeout: 2h0m0s`},
		{"ftp://h", DestinationConfig{}, `destinations."ftp://h": the key scheme "ftp" is not http or https`},
		{"https://h/path", DestinationConfig{}, `destinations."https://h/path": the key has more than scheme://host[:port]`},
		{"https://u:p@h", DestinationConfig{}, `destinations."https://u:p@h": the key has more than`},
		{"https://", DestinationConfig{}, `destinations."https://": the key has no host`},
		{"https://h:0", DestinationConfig{}, `destinations."https://h:0": the key port "0"`},
		{"h:80", DestinationConfig{}, `destinations."h:80": the key`},
	} {
		c := DefaultConfig()
		c.Destinations = map[string]DestinationConfig{tc.key: tc.d}
		c.fill()
		if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%q %+v: %v; want it to start %q", tc.key, tc.d, err, tc.want)
		}
	}
	c = DefaultConfig()
	c.Destinations = map[string]DestinationConfig{"https://h": {Batch: 10}, "HTTPS://H:443": {Batch: 20}}
	c.fill()
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "names the same destination") {
		t.Errorf("two keys for one destination: %v", err)
	}
	// An unknown field is named with its path.
	c = DefaultConfig()
	err = ParseConfig([]byte("destinations:\n  \"https://h\": {batchh: 3}\n"), &c)
	if err == nil || !strings.Contains(err.Error(), "batchh: unknown key") {
		t.Errorf("unknown field: %v", err)
	}
}
