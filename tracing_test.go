package ontime_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/ontimehq/ontime"
)

// tracedNode runs a node traced into an in-memory exporter, with cfg's
// changes, and returns its API's URL and the exporter.
func tracedNode(t *testing.T, change func(*ontime.Config)) (string, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sdktrace.NewSimpleSpanProcessor(exp)))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	cfg := ontime.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Store.Tables = 2
	if change != nil {
		change(&cfg)
	}
	ctx := context.Background()
	node, err := ontime.NewNode(ctx, cfg, ontime.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	if err := node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(node.HTTPHandler())
	t.Cleanup(func() {
		srv.Close()
		_ = node.Stop(context.Background())
	})
	return srv.URL, exp
}

// The caller's trace: a traceparent a traced client would send.
const (
	callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan  = "00f067aa0ba902b7"
)

func submitTraced(t *testing.T, base, body string) {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/v1/tasks", strings.NewReader(body))
	req.Header.Set("traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("submit: %d", resp.StatusCode)
	}
}

// waitSpans returns the ended spans once every name is among them.
func waitSpans(t *testing.T, exp *tracetest.InMemoryExporter, names ...string) map[string]tracetest.SpanStub {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := map[string]tracetest.SpanStub{}
		for _, s := range exp.GetSpans() {
			got[s.Name] = s
		}
		all := true
		for _, n := range names {
			if _, ok := got[n]; !ok {
				all = false
			}
		}
		if all {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("spans %v: only %v ended", names, keys(got))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func keys(m map[string]tracetest.SpanStub) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func attr(s tracetest.SpanStub, key string) attribute.Value {
	for _, a := range s.Attributes {
		if string(a.Key) == key {
			return a.Value
		}
	}
	return attribute.Value{}
}

// checkChain: request span ← caller; submit ← request; deliver ←
// submit, all in the caller's trace; no fire span (the lateness is the
// deliver span's attribute).
func checkChain(t *testing.T, spans map[string]tracetest.SpanStub) {
	t.Helper()
	req, sub, del := spans["POST /v1/tasks"], spans["ontime.submit"], spans["ontime.deliver"]
	if _, ok := spans["ontime.fire"]; ok {
		t.Errorf("a fire span was made: one span per attempt, ontime.deliver")
	}
	for _, s := range []tracetest.SpanStub{req, sub, del} {
		if s.SpanContext.TraceID().String() != callerTrace {
			t.Errorf("span %s in trace %s, want the caller's %s", s.Name, s.SpanContext.TraceID(), callerTrace)
		}
	}
	for _, link := range []struct {
		child  tracetest.SpanStub
		parent string
	}{
		{req, callerSpan}, {sub, req.SpanContext.SpanID().String()},
		{del, sub.SpanContext.SpanID().String()},
	} {
		if got := link.child.Parent.SpanID().String(); got != link.parent {
			t.Errorf("span %s has parent %s, want %s", link.child.Name, got, link.parent)
		}
	}
	if attr(del, "ontime.attempt").AsInt64() != 1 || attr(del, "ontime.outcome").AsString() != "done" {
		t.Errorf("deliver span attributes %v", del.Attributes)
	}
	if attr(del, "ontime.lateness_seconds").Type() != attribute.FLOAT64 {
		t.Errorf("deliver span has no lateness: %v", del.Attributes)
	}
}

// TestTracingWebhook: a submit's trace, from the caller's traceparent, is
// kept with the task and continued at its delivery; the webhook call's
// traceparent names the deliver span, in the caller's trace.
func TestTracingWebhook(t *testing.T) {
	t.Parallel()
	got := make(chan string, 1)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case got <- r.Header.Get("traceparent"):
		default:
		}
	}))
	defer recv.Close()
	base, exp := tracedNode(t, nil)
	submitTraced(t, base, `{"topic":"t","delay":"300ms","target":"`+recv.URL+`/hook"}`)
	var tp string
	select {
	case tp = <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("the webhook was not called")
	}
	spans := waitSpans(t, exp, "POST /v1/tasks", "ontime.submit", "ontime.deliver")
	checkChain(t, spans)
	del := spans["ontime.deliver"]
	want := fmt.Sprintf("00-%s-%s-01", callerTrace, del.SpanContext.SpanID())
	if tp != want {
		t.Fatalf("webhook traceparent %q, want %q (the deliver span)", tp, want)
	}
}

// TestTracingOffSendsNothing: without tracing, a traceparent sent with the
// submit is neither kept nor sent on.
func TestTracingOffSendsNothing(t *testing.T) {
	t.Parallel()
	got := make(chan []string, 1)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case got <- r.Header.Values("traceparent"):
		default:
		}
	}))
	defer recv.Close()
	cfg := ontime.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Store.Tables = 2
	ctx := context.Background()
	node, err := ontime.NewNode(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(node.HTTPHandler())
	defer func() {
		srv.Close()
		_ = node.Stop(context.Background())
	}()
	submitTraced(t, srv.URL, `{"topic":"t","target":"`+recv.URL+`/hook"}`)
	select {
	case v := <-got:
		if len(v) != 0 {
			t.Fatalf("tracing off, the webhook got traceparent %v", v)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the webhook was not called")
	}
}

// TestTracingAMQP: a task delivered to RabbitMQ carries the trace in the
// message's headers: the publish span's, child of the deliver span, in
// the caller's trace.
func TestTracingAMQP(t *testing.T) {
	t.Parallel()
	conn, err := amqp.Dial("amqp://guest:guest@127.0.0.1:5672/")
	if err != nil {
		t.Fatalf("RabbitMQ at 127.0.0.1:5672: %v", err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := ch.Consume(q.Name, "", true, true, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	base, exp := tracedNode(t, func(c *ontime.Config) {
		c.Brokers = map[string]string{"rabbit": "amqp://guest:guest@127.0.0.1:5672/"}
	})
	submitTraced(t, base, `{"topic":"t","target":"mq://rabbit//`+q.Name+`"}`)
	var m amqp.Delivery
	select {
	case m = <-msgs:
	case <-time.After(30 * time.Second):
		t.Fatal("no message reached the queue")
	}
	spans := waitSpans(t, exp, "POST /v1/tasks", "ontime.submit", "ontime.deliver", "ontime.publish")
	checkChain(t, spans)
	pub := spans["ontime.publish"]
	if pub.Parent.SpanID() != spans["ontime.deliver"].SpanContext.SpanID() {
		t.Errorf("publish span's parent %s, want the deliver span", pub.Parent.SpanID())
	}
	want := fmt.Sprintf("00-%s-%s-01", callerTrace, pub.SpanContext.SpanID())
	if got, _ := m.Headers["traceparent"].(string); got != want {
		t.Fatalf("message traceparent %q, want %q (the publish span)", got, want)
	}
}
