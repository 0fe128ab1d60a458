package natsjs_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ontimehq/ontime/internal/deliver"
	"github.com/ontimehq/ontime/internal/deliver/broker"
	"github.com/ontimehq/ontime/internal/deliver/broker/natsjs"
	"github.com/ontimehq/ontime/internal/testdb"
)

// A stream that is full and discards new messages refuses a publish with
// back-pressure: a wait the lane and the task honour
// (deliver.RetryAfterOf), not an ordinary failure.
func TestFullStreamIsBackPressure(t *testing.T) {
	t.Parallel()
	url := testdb.NATSURL()
	js, name := stream(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	cfg.MaxMsgs, cfg.Discard = 1, jetstream.DiscardNew
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	p, err := natsjs.New(broker.Options{Name: "t", URL: url})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	msg := func(id string) *broker.Message {
		return &broker.Message{ID: id, Body: []byte("1"), Headers: [5]broker.Header{
			{Name: broker.HeaderTaskID, Value: id}, {Name: broker.HeaderAttempt, Value: "1"},
			{Name: broker.HeaderTopic, Value: "t"}, {Name: broker.HeaderKey, Value: "k"}, {Name: broker.HeaderDueAt, Value: "2030-01-01T00:00:00Z"}}}
	}
	if err := p.Publish(ctx, name+".due", msg("a")); err != nil {
		t.Fatal(err)
	}
	err = p.Publish(ctx, name+".due", msg("b"))
	if d, ok := deliver.RetryAfterOf(err); !ok || d != broker.BackPressureWait {
		t.Fatalf("publish to a full stream: %v (wait %s %v); want back-pressure", err, d, ok)
	}
}
