package ontime

import (
	"fmt"
	"strings"
)

// DefaultBrokerConcurrency is delivery.broker_concurrency's default:
// publishes in flight per broker address. A publish waits for the broker's
// acknowledgement, so a lane's rate is its in-flight count over the
// acknowledgement's round trip: 64 in flight held NATS JetStream to
// 11,500/s on this machine where its own client reached 73,000/s.
const DefaultBrokerConcurrency = 1000

// validateBrokers checks brokers: {NAME: URL}. Errors name brokers.NAME and
// never repeat the URL, which may hold a password.
func validateBrokers(brokers map[string]string, concurrency int) error {
	if concurrency < 1 || concurrency > 100000 {
		return fmt.Errorf("delivery.broker_concurrency: %d is out of range 1..100000", concurrency)
	}
	return brokerKinds().Check(brokers)
}

// applyBrokerEnv sets brokers from ONTIME_BROKERS_<NAME>=URL, so a URL with
// credentials can stay out of the config file. NAME is taken as written
// after the prefix (ONTIME_BROKERS_rabbit names broker "rabbit").
func applyBrokerEnv(c *Config, environ []string) {
	for _, kv := range environ {
		name, val, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		if b, ok := strings.CutPrefix(name, "ONTIME_BROKERS_"); ok && b != "" {
			if c.Brokers == nil {
				c.Brokers = map[string]string{}
			}
			c.Brokers[b] = val
		}
	}
}
