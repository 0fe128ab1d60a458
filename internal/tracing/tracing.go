// Package tracing is the node's OpenTelemetry tracing: the tracer provider
// (OTLP over gRPC or HTTP, or one a test or an embedder gives), and the
// W3C traceparent a task keeps from its submit to its deliveries.
//
// One task's trace: the caller's span (its traceparent header, or the Go
// caller's context) → "ontime.submit", whose context is stored with the
// task (store column traceparent) → hours later "ontime.deliver" (one
// attempt, from the release to its outcome: attempt, outcome, and the
// lateness, due time → release, as an attribute) → "ontime.publish" for a broker → the
// receiver's own spans, continued from the traceparent header of the
// webhook call or of the broker message. Claims are spans of their own
// ("ontime.claim"), one per claim of a sharding item, outside the tasks'
// traces (one claim takes many tasks).
//
// Tracing off (the default) is a nil Tracer in every stage's config: the
// stages test for nil and do nothing else, so the hot path neither
// allocates nor formats anything for it.
package tracing

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"
)

// Instrumentation is the tracer's name (the instrumentation scope).
const Instrumentation = "github.com/ontimehq/ontime"

// Config is the tracing: section of the node's config, checked there.
type Config struct {
	Endpoint    string // host:port; "" for OTEL_EXPORTER_OTLP_* or the exporter's default
	Protocol    string // grpc | http/protobuf; "" for OTEL_EXPORTER_OTLP_*PROTOCOL, else grpc
	Insecure    bool   // no TLS to the collector
	SampleRatio float64
	ServiceName string // "" for OTEL_SERVICE_NAME, else "ontime"
	Version     string // service.version
	NodeID      string // service.instance.id
}

// Provider is the node's tracer provider and its shutdown (which flushes
// the spans not yet exported).
type Provider struct {
	tp       trace.TracerProvider
	shutdown func(context.Context) error
}

// New builds the OTLP exporter and the SDK's provider: a batch span
// processor, a sampler that keeps a remote parent's decision and samples
// new traces at SampleRatio (OTEL_TRACES_SAMPLER, when set, wins), and a
// resource from the config and OTEL_RESOURCE_ATTRIBUTES/OTEL_SERVICE_NAME.
// Nothing is dialled here: the exporter connects when it first exports.
func New(ctx context.Context, cfg Config) (*Provider, error) {
	exp, err := exporter(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return NewWithExporter(cfg, sdktrace.NewBatchSpanProcessor(exp))
}

// NewWithExporter builds the provider over a span processor of the
// caller's (tests: a SimpleSpanProcessor over tracetest's in-memory
// exporter; benchmarks: a no-op exporter).
func NewWithExporter(cfg Config, sp sdktrace.SpanProcessor) (*Provider, error) {
	name := cfg.ServiceName
	if name == "" {
		name = "ontime"
	}
	res, err := resource.New(context.Background(),
		resource.WithAttributes(semconv.ServiceName(name), semconv.ServiceVersion(cfg.Version), semconv.ServiceInstanceID(cfg.NodeID)),
		resource.WithFromEnv()) // OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES win
	if err != nil && res == nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res), sdktrace.WithSpanProcessor(sp)}
	if os.Getenv("OTEL_TRACES_SAMPLER") == "" {
		opts = append(opts, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.SampleRatio))))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	return &Provider{tp: tp, shutdown: tp.Shutdown}, nil
}

// Wrap uses a provider the embedder made (ontime.WithTracerProvider);
// its shutdown is the embedder's.
func Wrap(tp trace.TracerProvider) *Provider {
	return &Provider{tp: tp, shutdown: func(context.Context) error { return nil }}
}

// Tracer is the node's tracer; nil for a nil Provider (tracing off).
func (p *Provider) Tracer() trace.Tracer {
	if p == nil {
		return nil
	}
	return p.tp.Tracer(Instrumentation)
}

// Shutdown exports what is buffered and stops the exporter.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil {
		return nil
	}
	return p.shutdown(ctx)
}

// exporter is the OTLP exporter cfg names. Options left out (endpoint,
// TLS, headers, timeout, compression) come from the standard
// OTEL_EXPORTER_OTLP_* variables, which the exporters read themselves.
func exporter(ctx context.Context, cfg Config) (sdktrace.SpanExporter, error) {
	proto := cfg.Protocol
	if proto == "" {
		proto = envFirst("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch proto {
	case "", "grpc":
		var opts []otlptracegrpc.Option
		if cfg.Endpoint != "" {
			opts = append(opts, otlptracegrpc.WithEndpoint(cfg.Endpoint))
		}
		if cfg.Insecure {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		exp, err := otlptracegrpc.New(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("tracing: otlp grpc exporter: %w", err)
		}
		return exp, nil
	case "http/protobuf":
		var opts []otlptracehttp.Option
		if cfg.Endpoint != "" {
			opts = append(opts, otlptracehttp.WithEndpoint(cfg.Endpoint))
		}
		if cfg.Insecure {
			opts = append(opts, otlptracehttp.WithInsecure())
		}
		exp, err := otlptracehttp.New(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("tracing: otlp http exporter: %w", err)
		}
		return exp, nil
	}
	return nil, fmt.Errorf("tracing: protocol %q is not grpc or http/protobuf", proto)
}

func envFirst(names ...string) string {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return ""
}

// Format is the W3C traceparent of sc ("00-<trace>-<span>-<flags>"); ""
// when sc is not valid. One allocation (the string): it runs once per
// delivery attempt.
func Format(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	tid, sid, flags := sc.TraceID(), sc.SpanID(), [1]byte{byte(sc.TraceFlags())}
	var b [55]byte
	copy(b[:], "00-")
	hex.Encode(b[3:35], tid[:])
	b[35] = '-'
	hex.Encode(b[36:52], sid[:])
	b[52] = '-'
	hex.Encode(b[53:55], flags[:])
	return string(b[:])
}

// ErrBadTraceparent: a stored or received traceparent does not parse.
var ErrBadTraceparent = errors.New("not a W3C traceparent")

// Parse reads a traceparent of version 00 (W3C Trace Context: 00-<32
// hex trace ID>-<16 hex span ID>-<2 hex flags>, neither ID all zeros)
// into a remote span context. By hand rather than through the
// propagator: it runs once per delivery, and the propagator's carrier
// and context cost more than the parse.
func Parse(tp string) (trace.SpanContext, error) {
	if len(tp) != 55 || tp[0:3] != "00-" || tp[35] != '-' || tp[52] != '-' {
		return trace.SpanContext{}, ErrBadTraceparent
	}
	var tid trace.TraceID
	var sid trace.SpanID
	var flags [1]byte
	if !unhex(tid[:], tp[3:35]) || !unhex(sid[:], tp[36:52]) || !unhex(flags[:], tp[53:55]) {
		return trace.SpanContext{}, ErrBadTraceparent
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.TraceFlags(flags[0]) & trace.FlagsSampled, Remote: true})
	if !sc.IsValid() {
		return trace.SpanContext{}, ErrBadTraceparent
	}
	return sc, nil
}

// unhex decodes lower-case hex s into dst (len(s) == 2·len(dst)), as
// W3C Trace Context requires.
func unhex(dst []byte, s string) bool {
	for i := range dst {
		hi, ok1 := nibble(s[2*i])
		lo, ok2 := nibble(s[2*i+1])
		if !ok1 || !ok2 {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

func nibble(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// Continue is ctx carrying the remote parent tp, for a span that continues
// the submit's trace; ctx unchanged when tp is "" or does not parse.
func Continue(ctx context.Context, tp string) context.Context {
	if tp == "" {
		return ctx
	}
	sc, err := Parse(tp)
	if err != nil {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

// Header is the header (HTTP) or message header (brokers) that carries
// the trace to the receiver.
const Header = "traceparent"
