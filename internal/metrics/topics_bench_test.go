package metrics_test

import (
	"fmt"
	"testing"

	"github.com/ontimehq/ontime/internal/metrics"
)

// BenchmarkTopicsFor: the per-task cost of the per-topic series on the
// delivery path — the lookup of a known topic's cached children and two
// histogram observations (lateness, duration) and one counter.
func BenchmarkTopicsFor(b *testing.B) {
	m := metrics.NewTopics(nil, 0)
	topics := make([]string, 50)
	for i := range topics {
		topics[i] = fmt.Sprintf("topic-%d", i)
	}
	i := 0
	for b.Loop() {
		ts := m.For(topics[i%len(topics)])
		ts.Lateness.Observe(0.003)
		ts.Duration.Observe(0.02)
		ts.Done.Inc()
		i++
	}
}
