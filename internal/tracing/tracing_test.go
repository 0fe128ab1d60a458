package tracing

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func TestFormatParse(t *testing.T) {
	t.Parallel()
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	sc, err := Parse(tp)
	if err != nil || !sc.IsRemote() || !sc.IsSampled() {
		t.Fatalf("parse: %v %+v", err, sc)
	}
	if got := Format(sc); got != tp {
		t.Fatalf("format %q, want %q", got, tp)
	}
	for _, bad := range []string{"", "00-0000", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", "zz-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
	if Format(trace.SpanContext{}) != "" {
		t.Fatal("an invalid context formats")
	}
	if ctx := Continue(context.Background(), "garbage"); trace.SpanContextFromContext(ctx).IsValid() {
		t.Fatal("Continue took a bad traceparent")
	}
}

// TestProvider: the sampler keeps a remote parent's decision; a span under
// a stored traceparent is in its trace with it as parent; a nil Provider
// is tracing off.
func TestProvider(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	p, err := NewWithExporter(Config{SampleRatio: 0, NodeID: "n1"}, sdktrace.NewSimpleSpanProcessor(exp))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown(context.Background())
	tr := p.Tracer()
	_, s := tr.Start(context.Background(), "new root")
	s.End()
	_, s = tr.Start(Continue(context.Background(), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"), "child")
	s.End()
	spans := exp.GetSpans()
	if len(spans) != 1 || spans[0].Name != "child" || spans[0].Parent.SpanID().String() != "00f067aa0ba902b7" ||
		spans[0].SpanContext.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("spans %+v", spans)
	}
	var off *Provider
	if off.Tracer() != nil || off.Shutdown(context.Background()) != nil {
		t.Fatal("a nil provider traces")
	}
}

// TestNewOTLP: both exporters build from the config without dialling.
func TestNewOTLP(t *testing.T) {
	t.Parallel()
	for _, cfg := range []Config{
		{Endpoint: "127.0.0.1:4317", Insecure: true, SampleRatio: 1},
		{Endpoint: "127.0.0.1:4318", Protocol: "http/protobuf", Insecure: true, SampleRatio: 1},
	} {
		p, err := New(context.Background(), cfg)
		if err != nil {
			t.Fatalf("%+v: %v", cfg, err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // nothing to flush; do not wait for a collector
		_ = p.Shutdown(ctx)
	}
	if _, err := New(context.Background(), Config{Protocol: "thrift"}); err == nil {
		t.Fatal("protocol thrift accepted")
	}
}

// TestParseAsPropagator: Parse agrees with the W3C propagator on
// well-formed and malformed values.
func TestParseAsPropagator(t *testing.T) {
	t.Parallel()
	for _, tp := range []string{
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
	} {
		want := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": tp}))
		got, err := Parse(tp)
		if (err == nil) != want.IsValid() || (err == nil && !got.Equal(want)) {
			t.Errorf("Parse(%q) = %v %v; the propagator: %v", tp, got, err, want)
		}
	}
}
