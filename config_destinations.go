package ontime

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/ontimehq/ontime/internal/deliver"
	"github.com/ontimehq/ontime/internal/deliver/webhook"
	"github.com/ontimehq/ontime/internal/task"
)

// DestinationConfig is one webhook destination's own delivery settings:
// destinations: {"https://host[:port]": {concurrency, timeout, batch, rate}}.
// Zero fields keep the delivery section's value.
type DestinationConfig struct {
	// Concurrency is the calls in flight to the destination at most;
	// default delivery.concurrency. Its connection pool holds as many.
	Concurrency int `yaml:"concurrency"`
	// Timeout is the time one call may take; default delivery.timeout.
	Timeout Duration `yaml:"timeout"`
	// Batch is the most tasks one call carries: above 1 every call is
	// {"tasks": [body, …]} (docs/topics.md, "Batch delivery"); default 1, one task
	// per call.
	Batch int `yaml:"batch"`
	// Rate is the calls per second made at most (a batch is one call),
	// a token bucket holding a tenth of a second of calls; 0: no limit.
	Rate float64 `yaml:"rate"`
}

// Bounds of a destination's settings.
const (
	MaxDestinationBatch       = 1000 // tasks per call: what one POST /v1/tasks:batch carries
	MaxDestinationConcurrency = 10000
	MaxDestinationRate        = 1e6
)

// validateDestinations checks destinations; errors name the key as
// destinations."https://host".field. Two keys naming one destination
// (HTTPS://Host:443 and https://host) are an error too.
func validateDestinations(dests map[string]DestinationConfig) error {
	keys := make([]string, 0, len(dests))
	for k := range dests {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	seen := map[string]string{}
	for _, k := range keys {
		name := fmt.Sprintf("destinations.%q", k)
		norm, err := deliver.ParseDestination(strings.TrimSpace(k))
		if err != nil {
			return fmt.Errorf("%s: the key %w", name, err)
		}
		if prev, dup := seen[norm]; dup {
			return fmt.Errorf("%s: names the same destination as %q (%s)", name, prev, norm)
		}
		seen[norm] = k
		d := dests[k]
		switch {
		case d.Concurrency < 0 || d.Concurrency > MaxDestinationConcurrency:
			return fmt.Errorf("%s.concurrency: %d is out of range 1..%d (0: delivery.concurrency)", name, d.Concurrency, MaxDestinationConcurrency)
		case d.Batch < 0 || d.Batch > MaxDestinationBatch:
			return fmt.Errorf("%s.batch: %d is out of range 1..%d (0: 1, one task per call)", name, d.Batch, MaxDestinationBatch)
		case math.IsNaN(d.Rate) || d.Rate < 0 || d.Rate > MaxDestinationRate:
			return fmt.Errorf("%s.rate: %v is out of range 0..%v calls per second (0: no limit)", name, d.Rate, MaxDestinationRate)
		}
		if t := time.Duration(d.Timeout); t != 0 && (t < 10*time.Millisecond || t > time.Hour) {
			return fmt.Errorf("%s.timeout: %s is out of range 10ms..1h (0: delivery.timeout)", name, t)
		}
	}
	return nil
}

// destinations resolves the destinations section against the delivery
// defaults, keyed by lane key (deliver.Destination's form). Validated
// config only.
func (c *Config) destinations() map[string]webhook.Destination {
	out := make(map[string]webhook.Destination, len(c.Destinations))
	for k, d := range c.Destinations {
		norm, err := deliver.ParseDestination(strings.TrimSpace(k))
		if err != nil {
			continue // Validate refused it already
		}
		w := webhook.Destination{Concurrency: d.Concurrency, Timeout: time.Duration(d.Timeout), Batch: max(d.Batch, 1), Rate: d.Rate}
		if w.Concurrency == 0 {
			w.Concurrency = c.Delivery.Concurrency
		}
		if w.Timeout == 0 {
			w.Timeout = time.Duration(c.Delivery.Timeout)
		}
		out[norm] = w
	}
	return out
}

// deliveryTimeout is the longest a call may take on any destination: the
// running lease of a task covers it.
func (c *Config) deliveryTimeout() time.Duration {
	t := time.Duration(c.Delivery.Timeout)
	for _, d := range c.Destinations {
		t = max(t, time.Duration(d.Timeout))
	}
	return t
}

// laneConfig gives each lane its settings: broker lanes (mq://…) their own
// in-flight limit, delivery.broker_concurrency; the destinations section's
// webhook lanes theirs. A batch destination's lane holds concurrency ×
// batch deliveries in flight: concurrency calls of batch tasks each (the
// batch is the webhook sink's BatchSize). Any other webhook lane has the
// delivery section's limit.
func laneConfig(brokerConcurrency int, dests map[string]webhook.Destination) func(dest string) deliver.LaneConfig {
	return func(dest string) deliver.LaneConfig {
		if strings.HasPrefix(dest, task.MQScheme) {
			return deliver.LaneConfig{Limit: brokerConcurrency}
		}
		d, ok := dests[dest]
		if !ok {
			return deliver.LaneConfig{}
		}
		return deliver.LaneConfig{Limit: d.Concurrency * d.Batch, Rate: d.Rate}
	}
}
