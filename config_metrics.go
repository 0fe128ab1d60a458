package ontime

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ontimehq/ontime/internal/deliver"
	"github.com/ontimehq/ontime/internal/metrics"
)

// MetricsConfig configures the Prometheus series of /metrics.
type MetricsConfig struct {
	// MaxTopics is how many topics get a topic label value of their own
	// (the first a node sees); the others fold into topic="_other", so
	// submitters choosing topic names cannot grow the series without end.
	// Default 200.
	MaxTopics int `yaml:"max_topics"`
}

// Bounds of metrics.max_topics: each topic costs about 30 series.
const (
	DefaultMetricsMaxTopics = metrics.DefaultMaxTopics
	MaxMetricsMaxTopics     = 10000
)

func (m MetricsConfig) validate() error {
	if m.MaxTopics < 1 || m.MaxTopics > MaxMetricsMaxTopics {
		return fmt.Errorf("metrics.max_topics: %d is out of range 1..%d", m.MaxTopics, MaxMetricsMaxTopics)
	}
	return nil
}

// metricsOptions sizes the labelled series: the topic bound, and the
// destinations and brokers the config names, the only dest label values
// besides handler and _other. Validated config only.
func (c *Config) metricsOptions() metrics.Options {
	o := metrics.Options{MaxTopics: c.Metrics.MaxTopics}
	for k := range c.Destinations {
		if norm, err := deliver.ParseDestination(strings.TrimSpace(k)); err == nil {
			o.Webhooks = append(o.Webhooks, norm)
		}
	}
	for name := range c.Brokers {
		o.Brokers = append(o.Brokers, name)
	}
	slices.Sort(o.Webhooks)
	slices.Sort(o.Brokers)
	return o
}
