package amqp_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/ontimehq/ontime/internal/deliver/broker"
	"github.com/ontimehq/ontime/internal/deliver/broker/amqp"
	"github.com/ontimehq/ontime/internal/testdb"
)

// TestReturnsMatchTheirPublishes: many publishes in flight at once on one
// channel, half routable and half not: each gets its own outcome (a
// return is matched to its publish, not to a neighbour's confirm), and the
// queue holds exactly the routable ones.
func TestReturnsMatchTheirPublishes(t *testing.T) {
	t.Parallel()
	url := testdb.AMQPURL()
	conn, err := amqp091.Dial(url)
	if err != nil {
		t.Fatalf("RabbitMQ at %s is required: %v", url, err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	name := testdb.Unique("ontime_t_")
	if err := ch.ExchangeDeclare(name, "direct", false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(name, false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(name, "yes", name, false, nil); err != nil {
		t.Fatal(err)
	}
	defer ch.QueueDelete(name, false, false, false)

	p, err := amqp.New(amqp.Config{Name: "t", URL: url})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	const n = 400
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := "yes"
			if i%2 == 1 {
				key = "no"
			}
			m := &broker.Message{ID: fmt.Sprintf("task-%d", i), Body: []byte("1"), Headers: [5]broker.Header{
				{Name: broker.HeaderTaskID, Value: fmt.Sprintf("task-%d", i)}, {Name: broker.HeaderAttempt, Value: "1"}}}
			errs[i] = p.Publish(ctx, name+"/"+key, m)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		switch {
		case i%2 == 0 && err != nil:
			t.Errorf("routable publish %d: %v", i, err)
		case i%2 == 1 && (err == nil || !strings.Contains(err.Error(), "NO_ROUTE")):
			t.Errorf("unroutable publish %d: %v", i, err)
		}
	}
	q, err := ch.QueueDeclarePassive(name, false, true, false, false, nil)
	if err != nil || q.Messages != n/2 {
		t.Errorf("queue holds %d messages (%v); want %d", q.Messages, err, n/2)
	}
	// A missing exchange is an error of its own publish only.
	err = p.Publish(ctx, testdb.Unique("ontime_t_")+"/x", &broker.Message{ID: "m", Body: []byte("1")})
	if err == nil || !strings.Contains(err.Error(), "does not exist") || errors.Is(err, broker.ErrConnLost) {
		t.Errorf("missing exchange: %v", err)
	}
	if err := p.Publish(ctx, name+"/yes", &broker.Message{ID: "after", Body: []byte("1")}); err != nil {
		t.Errorf("publish after a missing exchange: %v", err)
	}
}
