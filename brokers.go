package ontime

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/ontimehq/ontime/internal/deliver/broker"
	"github.com/ontimehq/ontime/internal/deliver/broker/amqp"
	"github.com/ontimehq/ontime/internal/deliver/broker/mqtt"
	"github.com/ontimehq/ontime/internal/deliver/broker/natsjs"
	"github.com/ontimehq/ontime/internal/deliver/broker/redisstream"
)

// newBrokers builds a publisher per configured broker (none connects
// before the node starts) and the sink of mq:// targets over them.
func newBrokers(brokers map[string]string, timeout time.Duration, log *slog.Logger) (*broker.Set, error) {
	pubs := make(map[string]broker.Publisher, len(brokers))
	for name, raw := range brokers {
		raw = strings.TrimSpace(raw)
		scheme, _, _ := strings.Cut(raw, "://")
		var p broker.Publisher
		var err error
		switch strings.ToLower(scheme) {
		case "amqp", "amqps":
			p, err = amqp.New(amqp.Config{Name: name, URL: raw, Logger: log})
		case "nats":
			p, err = natsjs.New(natsjs.Config{Name: name, URL: raw, Logger: log})
		case "redis", "rediss":
			p, err = redisstream.New(redisstream.Config{Name: name, URL: raw, Timeout: timeout, Logger: log})
		case "mqtt", "mqtts":
			p, err = mqtt.New(mqtt.Config{Name: name, URL: raw, Logger: log})
		default:
			err = fmt.Errorf("scheme %q is not one of amqp, amqps, nats, redis, rediss, mqtt, mqtts", scheme)
		}
		if err != nil {
			return nil, fmt.Errorf("brokers.%s: %s", name, redactURLError(err, raw))
		}
		pubs[name] = p
	}
	return broker.NewSet(pubs, timeout)
}
