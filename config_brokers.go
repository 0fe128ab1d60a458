package ontime

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/ontimehq/ontime/internal/deliver/broker/amqp"
	"github.com/ontimehq/ontime/internal/deliver/broker/mqtt"
	"github.com/ontimehq/ontime/internal/deliver/broker/natsjs"
	"github.com/ontimehq/ontime/internal/deliver/broker/redisstream"
	"github.com/ontimehq/ontime/internal/task"
)

// brokerKinds maps a broker URL's scheme to the check of its URL.
var brokerKinds = map[string]func(string) error{
	"amqp": amqp.CheckURL, "amqps": amqp.CheckURL,
	"nats":  natsjs.CheckURL,
	"redis": redisstream.CheckURL, "rediss": redisstream.CheckURL,
	"mqtt": mqtt.CheckURL, "mqtts": mqtt.CheckURL,
}

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
	names := make([]string, 0, len(brokers))
	for name := range brokers {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if err := task.ValidateBrokerName(name); err != nil {
			return fmt.Errorf("brokers.%s: the name %w", name, err)
		}
		raw := strings.TrimSpace(brokers[name])
		scheme, _, ok := strings.Cut(raw, "://")
		if !ok {
			return fmt.Errorf("brokers.%s: not a URL; want amqp://, amqps://, nats://, redis://, rediss://, mqtt:// or mqtts://", name)
		}
		check := brokerKinds[strings.ToLower(scheme)]
		if check == nil {
			return fmt.Errorf("brokers.%s: scheme %q is not one of amqp, amqps, nats, redis, rediss, mqtt, mqtts", name, scheme)
		}
		if err := check(raw); err != nil {
			return fmt.Errorf("brokers.%s: %s", name, redactURLError(err, raw))
		}
	}
	return nil
}

// redactURLError keeps a URL's password out of an error message, even when
// the URL does not parse (the parser's message quotes it).
func redactURLError(err error, raw string) string {
	msg := err.Error()
	_, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return msg
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	at := strings.LastIndexByte(rest, '@')
	if at < 0 {
		return msg
	}
	if _, pw, ok := strings.Cut(rest[:at], ":"); ok && pw != "" {
		msg = strings.ReplaceAll(msg, pw, "xxxxx")
		if dec, err := url.PathUnescape(pw); err == nil && dec != pw {
			msg = strings.ReplaceAll(msg, dec, "xxxxx")
		}
	}
	return msg
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
