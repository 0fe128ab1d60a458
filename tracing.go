package ontime

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/ontimehq/ontime/internal/buildinfo"
	"github.com/ontimehq/ontime/internal/tracing"
)

// WithTracerProvider traces the node with tp (the embedder's
// OpenTelemetry provider, or a test's over an in-memory exporter) instead
// of one built from the tracing: config; tracing.enabled need not be set.
// The embedder shuts tp down.
func WithTracerProvider(tp trace.TracerProvider) NodeOption {
	return func(o *nodeOptions) { o.tracer = tp }
}

// openTracing builds the node's tracer provider: the embedder's, one over
// OTLP when tracing.enabled, or none (n.tracer stays nil: tracing off,
// every stage's Tracer nil).
func (n *Node) openTracing(ctx context.Context, tp trace.TracerProvider) error {
	if tp != nil {
		n.tracing = tracing.Wrap(tp)
	} else if n.cfg.Tracing.Enabled {
		tc := n.cfg.Tracing
		cfg := tracing.Config{Protocol: tc.Protocol, Insecure: tc.Insecure, SampleRatio: tc.SampleRatio,
			ServiceName: tc.ServiceName, Version: buildVersion(), NodeID: n.cfg.NodeID}
		if tc.Endpoint != "" {
			proto, hostport, err := tc.endpoint()
			if err != nil {
				return fmt.Errorf("tracing.endpoint: %w", err)
			}
			cfg.Endpoint = hostport
			if cfg.Protocol == "" {
				cfg.Protocol = proto
			}
			if isPlainEndpoint(tc.Endpoint) {
				cfg.Insecure = true
			}
		}
		p, err := tracing.New(ctx, cfg)
		if err != nil {
			return err
		}
		n.tracing = p
	}
	n.tracer = n.tracing.Tracer()
	return nil
}

// isPlainEndpoint: an http:// or grpc:// endpoint is dialled without TLS.
func isPlainEndpoint(e string) bool {
	return len(e) > 7 && (e[:7] == "http://" || e[:7] == "grpc://")
}

// closeTracing exports the spans still buffered, within 5 s.
func (n *Node) closeTracing() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return n.tracing.Shutdown(ctx)
}

// buildVersion is the binary's version, for service.version.
func buildVersion() string { return buildinfo.Read().Version }
