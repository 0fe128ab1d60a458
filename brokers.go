package ontime

import (
	"log/slog"
	"time"

	"github.com/ontimehq/ontime/internal/deliver/broker"
	"github.com/ontimehq/ontime/internal/deliver/broker/amqp"
	"github.com/ontimehq/ontime/internal/deliver/broker/mqtt"
	"github.com/ontimehq/ontime/internal/deliver/broker/natsjs"
	"github.com/ontimehq/ontime/internal/deliver/broker/redisstream"
)

// brokerKinds is every kind of broker a node publishes to, by URL scheme:
// config validation and node wiring both read it. A new kind is a package
// under internal/deliver/broker (passing brokertest) and a line here.
func brokerKinds() *broker.Registry {
	return broker.NewRegistry(
		amqp.Kind(),        // amqp://, amqps://: RabbitMQ
		natsjs.Kind(),      // nats://: NATS JetStream
		redisstream.Kind(), // redis://, rediss://: Redis Streams
		mqtt.Kind(),        // mqtt://, mqtts://: MQTT 5
	)
}

// newBrokers builds a publisher per configured broker (none connects
// before the node starts) and the sink of mq:// targets over them.
func newBrokers(brokers map[string]string, timeout time.Duration, log *slog.Logger) (*broker.Set, error) {
	return brokerKinds().NewSet(brokers, timeout, log)
}
