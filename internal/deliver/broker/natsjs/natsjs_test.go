package natsjs_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ontimehq/ontime/internal/deliver/broker"
	"github.com/ontimehq/ontime/internal/deliver/broker/brokertest"
	"github.com/ontimehq/ontime/internal/deliver/broker/natsjs"
	"github.com/ontimehq/ontime/internal/testdb"
)

// TestContract runs the publisher contract against the shared NATS
// server, each test on a stream of its own; the refusal is a subject no
// stream captures.
func TestContract(t *testing.T) {
	url := testdb.NATSURL()
	brokertest.Run(t, brokertest.Harness{
		Kind:      natsjs.Kind(),
		URL:       url,
		MessageID: true,
		Destination: func(t *testing.T, r *brokertest.Receiver) string {
			js, name := stream(t, url)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			cons, err := js.OrderedConsumer(ctx, name, jetstream.OrderedConsumerConfig{})
			if err != nil {
				t.Fatal(err)
			}
			cc, err := cons.Consume(func(m jetstream.Msg) {
				h := map[string]string{}
				for k, v := range m.Headers() {
					h[k] = v[0]
				}
				r.Add(brokertest.Received{ID: m.Headers().Get(nats.MsgIdHdr), Body: m.Data(), Headers: h})
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(cc.Stop)
			return name + ".due"
		},
		Refused: func(t *testing.T) []brokertest.Refusal {
			return []brokertest.Refusal{{Address: testdb.Unique("ontime_t_") + ".nowhere", Reason: "no JetStream stream captures"}}
		},
	})
}

// TestDuplicateIDDroppedByStream: a message published again with the same
// ID (a republish after a lost PubAck) is acknowledged and stored once,
// by the stream's duplicate window.
func TestDuplicateIDDroppedByStream(t *testing.T) {
	t.Parallel()
	url := testdb.NATSURL()
	js, name := stream(t, url)
	p, err := natsjs.New(broker.Options{Name: "t", URL: url})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	m := &broker.Message{ID: "task-1", Body: []byte("1"), Headers: [5]broker.Header{
		{Name: broker.HeaderTaskID, Value: "task-1"}, {Name: broker.HeaderAttempt, Value: "1"},
		{Name: broker.HeaderTopic, Value: "t"}, {Name: broker.HeaderKey, Value: "k"}, {Name: broker.HeaderDueAt, Value: "2030-01-01T00:00:00Z"}}}
	for i := range 2 {
		if err := p.Publish(ctx, name+".due", m); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	s, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil || info.State.Msgs != 1 {
		t.Fatalf("stream holds %d messages (%v); want 1", info.State.Msgs, err)
	}
}

// stream makes a stream capturing "NAME.>" with a duplicate window,
// deleted when t ends.
func stream(t *testing.T, url string) (jetstream.JetStream, string) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatalf("NATS at %s is required: %v", url, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	name := testdb.Unique("ontime_t_")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"},
		Storage: jetstream.MemoryStorage, Duplicates: time.Minute}); err != nil {
		t.Fatalf("create stream: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = js.DeleteStream(ctx, name)
	})
	return js, name
}
