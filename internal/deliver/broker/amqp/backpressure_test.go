package amqp_test

import (
	"context"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/ontimehq/ontime/internal/deliver"
	"github.com/ontimehq/ontime/internal/deliver/broker"
	"github.com/ontimehq/ontime/internal/deliver/broker/amqp"
	"github.com/ontimehq/ontime/internal/testdb"
)

// A queue that is full and rejects publishes (x-overflow: reject-publish)
// makes RabbitMQ nack: back-pressure, a wait the lane and the task honour
// (deliver.RetryAfterOf), not an ordinary failure.
func TestFullQueueIsBackPressure(t *testing.T) {
	t.Parallel()
	url := testdb.AMQPURL()
	name := testdb.Unique("ontime_t_")
	ch := channel(t, url)
	declare(t, ch, name)
	if _, err := ch.QueueDeclare(name, false, false, false, false, amqp091.Table{"x-max-length": int32(1), "x-overflow": "reject-publish"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = ch.QueueDelete(name, false, false, false) })
	if err := ch.QueueBind(name, "due", name, false, nil); err != nil {
		t.Fatal(err)
	}
	p, err := amqp.New(broker.Options{Name: "t", URL: url})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	msg := func(id string) *broker.Message {
		return &broker.Message{ID: id, Body: []byte("1"), Headers: [5]broker.Header{
			{Name: broker.HeaderTaskID, Value: id}, {Name: broker.HeaderAttempt, Value: "1"},
			{Name: broker.HeaderTopic, Value: "t"}, {Name: broker.HeaderKey, Value: "k"}, {Name: broker.HeaderDueAt, Value: "2030-01-01T00:00:00Z"}}}
	}
	if err := p.Publish(ctx, name+"/due", msg("a")); err != nil {
		t.Fatal(err)
	}
	err = p.Publish(ctx, name+"/due", msg("b"))
	if d, ok := deliver.RetryAfterOf(err); !ok || d != broker.BackPressureWait {
		t.Fatalf("publish to a full queue: %v (wait %s %v); want back-pressure", err, d, ok)
	}
}
