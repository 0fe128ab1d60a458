package amqp_test

import (
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/ontimehq/ontime/internal/deliver/broker/amqp"
	"github.com/ontimehq/ontime/internal/deliver/broker/brokertest"
	"github.com/ontimehq/ontime/internal/testdb"
)

// TestContract runs the publisher contract against the shared RabbitMQ,
// each test on an exchange and queue of its own. Its refusals are a
// return (an exchange with no queue bound for the key) and an exchange
// that does not exist, which must fail its own publish only, not the
// channel the others use.
func TestContract(t *testing.T) {
	url := testdb.AMQPURL()
	brokertest.Run(t, brokertest.Harness{
		Kind:      amqp.Kind(),
		URL:       url,
		MessageID: true,
		Destination: func(t *testing.T, r *brokertest.Receiver) string {
			name := testdb.Unique("ontime_t_")
			ch := channel(t, url)
			declare(t, ch, name)
			if _, err := ch.QueueDeclare(name, false, false, false, false, nil); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _, _ = ch.QueueDelete(name, false, false, false) })
			if err := ch.QueueBind(name, "due", name, false, nil); err != nil {
				t.Fatal(err)
			}
			deliveries, err := ch.Consume(name, "", true, false, false, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			go func() {
				for d := range deliveries {
					h := map[string]string{}
					for k, v := range d.Headers {
						if s, ok := v.(string); ok {
							h[k] = s
						}
					}
					r.Add(brokertest.Received{ID: d.MessageId, Body: d.Body, Headers: h})
				}
			}()
			return name + "/due"
		},
		Refused: func(t *testing.T) []brokertest.Refusal {
			name := testdb.Unique("ontime_t_")
			declare(t, channel(t, url), name)
			return []brokertest.Refusal{
				{Address: name + "/nobody.listens", Reason: "NO_ROUTE"},
				{Address: testdb.Unique("ontime_t_") + "/x", Reason: "does not exist"},
			}
		},
	})
}

// channel opens a channel on a connection of its own, closed when t ends.
func channel(t *testing.T, url string) *amqp091.Channel {
	t.Helper()
	conn, err := amqp091.Dial(url)
	if err != nil {
		t.Fatalf("RabbitMQ at %s is required: %v", url, err)
	}
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// declare makes a direct exchange, deleted when t ends.
func declare(t *testing.T, ch *amqp091.Channel, name string) {
	t.Helper()
	if err := ch.ExchangeDeclare(name, amqp091.ExchangeDirect, false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ch.ExchangeDelete(name, false, false) })
}
