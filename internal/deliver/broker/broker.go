// Package broker delivers tasks whose target is mq://NAME/ADDRESS to the
// message broker the config names NAME: RabbitMQ (package amqp), NATS
// JetStream (natsjs), Redis Streams (redisstream) or MQTT 5 (mqtt).
//
// Each broker is one Publisher: one connection (a small pool for Redis)
// shared by every lane of that broker, kept up by the publisher's own
// goroutine with backoff. The dispatcher gives each ADDRESS its own lane
// (deliver.Destination), so lanes of one broker run their publishes
// concurrently over that connection: many publishes in flight, each waiting
// for the broker's own acknowledgement — a publisher confirm, a PubAck, the
// XADD reply, a PUBACK — never for "written to a socket".
//
// Set is the deliver.Sink of every mq:// target. It gives an attempt
// delivery.timeout and republishes, within it, a message whose connection
// was lost before the broker acknowledged it (ErrConnLost): at least once,
// never lost; receivers drop duplicates by the ontime-task-id header.
//
// Each publisher package describes itself with a Kind (its URL schemes,
// the check of such a URL, its constructor) and embeds Base (lifecycle,
// Link, logger). The composition root lists the kinds in one Registry,
// which config validation and node wiring both read; brokertest is the
// contract every kind passes against its real server. A new kind is a
// package and one line in that list.
package broker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/ontimehq/ontime/internal/deliver"
	"github.com/ontimehq/ontime/internal/startstop"
	"github.com/ontimehq/ontime/internal/task"
	"github.com/ontimehq/ontime/internal/tracing"
)

// ErrConnLost: the connection went away before the broker acknowledged a
// publish. The message may or may not have reached the broker; Set
// publishes it again on the next connection.
var ErrConnLost = errors.New("connection to the broker lost before it acknowledged")

// BackPressureWait is how long a broker's refusal for load holds its lane
// and defers its task (deliver.RetryAfter): brokers say that they refuse
// — RabbitMQ's nack of a queue full under x-overflow reject-publish,
// JetStream's "maximum messages/bytes exceeded" of a stream with discard
// new, Redis's OOM past maxmemory, MQTT 5's PUBACK 0x97 quota exceeded —
// not for how long.
const BackPressureWait = 5 * time.Second

// BackPressure marks err, a broker's refusal for load, as asking for a
// wait of BackPressureWait: the task is retried then, and the lane of its
// address makes no publish meanwhile.
func BackPressure(err error) error { return deliver.RetryAfter(err, BackPressureWait) }

// Publisher publishes to one broker. Its Start returns at once and keeps a
// connection up until Stop; Publish waits for a connection (within ctx),
// publishes and waits for the broker's acknowledgement.
type Publisher interface {
	startstop.Service
	// Kind names the broker's kind in errors: "amqp", "nats", "redis", "mqtt".
	Kind() string
	// CheckAddress judges an ADDRESS for this kind of broker.
	CheckAddress(address string) error
	// Publish sends m to address and returns once the broker acknowledged
	// it (nil), refused it (an error with the broker's reason), or the
	// connection was lost first (an error wrapping ErrConnLost).
	Publish(ctx context.Context, address string, m *Message) error
}

// BatchPublisher is a Publisher that publishes several messages to one
// address at once: written back to back, then every acknowledgement
// awaited. errs[i] is Publish's answer for ms[i].
type BatchPublisher interface {
	Publisher
	PublishBatch(ctx context.Context, address string, ms []*Message) []error
}

// Message is what a publisher sends: the task's payload as the body and its
// metadata as headers (AMQP headers, NATS headers, stream fields, MQTT 5
// user properties).
type Message struct {
	ID      string // the task ID; NATS's Nats-Msg-Id
	Body    []byte
	Headers [5]Header
	// Traceparent, when not "", is sent as one more header (HeaderTraceparent).
	Traceparent string
}

// Header is one name and value of Message.Headers.
type Header struct{ Name, Value string }

// Header names, as DESIGN.md lists them.
const (
	HeaderTaskID  = "ontime-task-id"
	HeaderAttempt = "ontime-attempt"
	HeaderTopic   = "ontime-topic"
	HeaderKey     = "ontime-key"
	HeaderDueAt   = "ontime-due-at"
	// HeaderTraceparent carries the W3C trace context when tracing is on.
	HeaderTraceparent = "traceparent"
)

// MessageOf builds the message of a delivery.
func MessageOf(d deliver.Delivery) *Message {
	body := d.Payload
	if len(body) == 0 {
		body = []byte("null")
	}
	return &Message{ID: d.ID, Body: body, Headers: [5]Header{
		{HeaderTaskID, d.ID},
		{HeaderAttempt, strconv.Itoa(d.Attempt)},
		{HeaderTopic, d.Topic},
		{HeaderKey, d.Key},
		{HeaderDueAt, d.DueAt.UTC().Format(time.RFC3339Nano)},
	}, Traceparent: d.Traceparent}
}

// Set is the sink of mq:// targets: the configured brokers by name.
type Set struct {
	pubs    map[string]Publisher
	timeout time.Duration
	tracer  trace.Tracer // nil: tracing off
}

// Trace makes a producer span ("ontime.publish") of each traced delivery,
// child of its deliver span, and sends the span's traceparent in the
// message's headers. Call before the first delivery.
func (s *Set) Trace(t trace.Tracer) { s.tracer = t }

// NewSet builds the set; timeout bounds one attempt (delivery.timeout):
// waiting for a connection, publishing again after a lost one, and the
// broker's acknowledgement.
func NewSet(pubs map[string]Publisher, timeout time.Duration) (*Set, error) {
	if timeout <= 0 {
		return nil, errors.New("broker: timeout must be positive")
	}
	for name := range pubs {
		if err := task.ValidateBrokerName(name); err != nil {
			return nil, fmt.Errorf("brokers.%s: name %w", name, err)
		}
	}
	return &Set{pubs: pubs, timeout: timeout}, nil
}

// Services returns the publishers, to be started before the dispatcher
// and stopped after it (the dispatcher's drain waits for their confirms).
func (s *Set) Services() []startstop.Service {
	out := make([]startstop.Service, 0, len(s.pubs))
	for _, p := range s.pubs {
		out = append(out, p)
	}
	return out
}

// Len is the number of brokers.
func (s *Set) Len() int { return len(s.pubs) }

// CheckTarget implements task.BrokerTargets: NAME must be configured and
// ADDRESS well formed for its kind.
func (s *Set) CheckTarget(name, address string) error {
	p, ok := s.pubs[name]
	if !ok {
		return fmt.Errorf("names broker %q, which is not configured (brokers: %s)", name, s.names())
	}
	if err := p.CheckAddress(address); err != nil {
		return fmt.Errorf("bad %s address %q for broker %q: %w", p.Kind(), address, name, err)
	}
	return nil
}

func (s *Set) names() string {
	if len(s.pubs) == 0 {
		return "none"
	}
	out := ""
	for name := range s.pubs {
		if out != "" {
			out += ", "
		}
		out += name
	}
	return out
}

// Deliver publishes d to the broker and address of its target. A publish
// whose connection was lost before the acknowledgement is sent again, on
// the next connection, until the attempt's timeout.
func (s *Set) Deliver(ctx context.Context, d deliver.Delivery) error {
	name, address, isMQ, err := task.SplitMQTarget(d.Target)
	if err != nil || !isMQ {
		return deliver.Permanent(fmt.Errorf("target %q is not mq://BROKER/ADDRESS", d.Target))
	}
	m := MessageOf(d)
	if s.tracer != nil && d.Traceparent != "" {
		span := s.publishSpan(ctx, name, address, d, m)
		err := s.publish(ctx, name, address, m)
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
		return err
	}
	return s.publish(ctx, name, address, m)
}

// publishSpan starts the "ontime.publish" span of d, child of its
// deliver span, and puts the span's traceparent in m.
func (s *Set) publishSpan(ctx context.Context, name, address string, d deliver.Delivery, m *Message) trace.Span {
	_, span := s.tracer.Start(tracing.Continue(ctx, d.Traceparent), "ontime.publish", trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attribute.String("messaging.system", s.kind(name)), attribute.String("messaging.destination.name", address),
			attribute.String("ontime.broker", name), attribute.String("messaging.message.id", d.ID)))
	m.Traceparent = tracing.Format(span.SpanContext())
	return span
}

// publishSpans is publishSpan for each traced delivery of a batch (nil
// for the others).
func (s *Set) publishSpans(ctx context.Context, name, address string, ds []deliver.Delivery, msgs []*Message) []trace.Span {
	spans := make([]trace.Span, len(ds))
	for i := range ds {
		if ds[i].Traceparent != "" {
			spans[i] = s.publishSpan(ctx, name, address, ds[i], msgs[i])
		}
	}
	return spans
}

// kind is the kind of broker name ("" when not configured).
func (s *Set) kind(name string) string {
	if p, ok := s.pubs[name]; ok {
		return p.Kind()
	}
	return ""
}

// Publish sends m to an mq://NAME/ADDRESS target and waits for the
// broker's acknowledgement, publishing again on the next connection when
// one was lost first, until the attempt's timeout. Scan jobs send their
// batches through it.
func (s *Set) Publish(ctx context.Context, target string, m *Message) error {
	name, address, isMQ, err := task.SplitMQTarget(target)
	if err != nil || !isMQ {
		return fmt.Errorf("target %q is not mq://BROKER/ADDRESS", target)
	}
	if err := s.CheckTarget(name, address); err != nil {
		return fmt.Errorf("target %q %w", target, err)
	}
	return s.publish(ctx, name, address, m)
}

func (s *Set) publish(ctx context.Context, name, address string, m *Message) error {
	p, ok := s.pubs[name]
	if !ok {
		// Not permanent: a node with the broker configured may take it.
		return fmt.Errorf("broker %q is not configured on this node", name)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	for try := 0; ; try++ {
		err := p.Publish(ctx, address, m)
		if err == nil {
			return nil
		}
		if !errors.Is(err, ErrConnLost) {
			return fmt.Errorf("%s broker %q: %w", p.Kind(), name, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s broker %q: no acknowledgement within %s: %w", p.Kind(), name, s.timeout, err)
		case <-time.After(Backoff(try, 10*time.Millisecond, 500*time.Millisecond)):
		}
	}
}

// DeliverBatch implements deliver.BatchSink: the deliveries of one lane
// (one target) are published together; those whose connection was lost
// before the acknowledgement are published again, together, until the
// attempt's timeout.
// BatchSize is deliver.MaxBatch: publishes are pipelined on one
// connection, so a lane's worker writes that many and waits once.
func (s *Set) BatchSize(string) int { return deliver.MaxBatch }

func (s *Set) DeliverBatch(ctx context.Context, ds []deliver.Delivery) []error {
	errs := make([]error, len(ds))
	for i := range ds {
		if ds[i].Target != ds[0].Target { // not one lane: one at a time
			for j := range ds {
				errs[j] = s.Deliver(ctx, ds[j])
			}
			return errs
		}
	}
	name, address, isMQ, err := task.SplitMQTarget(ds[0].Target)
	p, ok := s.pubs[name]
	switch {
	case err != nil || !isMQ:
		err = deliver.Permanent(fmt.Errorf("target %q is not mq://BROKER/ADDRESS", ds[0].Target))
	case !ok:
		err = fmt.Errorf("broker %q is not configured on this node", name)
	}
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	todo := make([]int, len(ds))
	msgs := make([]*Message, len(ds))
	for i := range ds {
		todo[i], msgs[i] = i, MessageOf(ds[i])
	}
	if s.tracer != nil {
		spans := s.publishSpans(ctx, name, address, ds, msgs)
		defer func() {
			for i, span := range spans {
				if span == nil {
					continue
				}
				if errs[i] != nil {
					span.RecordError(errs[i])
					span.SetStatus(codes.Error, errs[i].Error())
				}
				span.End()
			}
		}()
	}
	for try := 0; ; try++ {
		batch := make([]*Message, len(todo))
		for k, i := range todo {
			batch[k] = msgs[i]
		}
		res := publishAll(ctx, p, address, batch)
		var again []int
		for k, i := range todo {
			switch {
			case res[k] == nil:
				errs[i] = nil
			case errors.Is(res[k], ErrConnLost):
				errs[i] = res[k]
				again = append(again, i)
			default:
				errs[i] = fmt.Errorf("%s broker %q: %w", p.Kind(), name, res[k])
			}
		}
		if len(again) == 0 {
			return errs
		}
		select {
		case <-ctx.Done():
			for _, i := range again {
				errs[i] = fmt.Errorf("%s broker %q: no acknowledgement within %s: %w", p.Kind(), name, s.timeout, errs[i])
			}
			return errs
		case <-time.After(Backoff(try, 10*time.Millisecond, 500*time.Millisecond)):
		}
		todo = again
	}
}

// publishAll publishes ms with p's batch publish, or one goroutine per
// message for a publisher without one (MQTT: the client pipelines
// concurrent publishes up to the broker's Receive Maximum).
func publishAll(ctx context.Context, p Publisher, address string, ms []*Message) []error {
	if bp, ok := p.(BatchPublisher); ok {
		return bp.PublishBatch(ctx, address, ms)
	}
	errs := make([]error, len(ms))
	if len(ms) == 1 {
		errs[0] = p.Publish(ctx, address, ms[0])
		return errs
	}
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = p.Publish(ctx, address, m)
		}()
	}
	wg.Wait()
	return errs
}
