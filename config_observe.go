package ontime

// The observability keys of the config: tracing (OpenTelemetry, OTLP) and
// the audit log. Metrics have their own keys (metrics:).

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
)

// TracingConfig turns on OpenTelemetry tracing (tracing.go): spans of
// submit, claim, fire, deliver and broker publish, exported over OTLP, and
// the W3C traceparent kept with each task and sent with its delivery. Off
// by default: a node without it has a no-op tracer and pays nothing.
type TracingConfig struct {
	Enabled bool `yaml:"enabled"`
	// Endpoint is the OTLP collector: "host:port" or a URL
	// (http://host:4318 for OTLP/HTTP, grpc://host:4317 or host:4317 for
	// OTLP/gRPC). Empty: the standard OTEL_EXPORTER_OTLP_TRACES_ENDPOINT /
	// OTEL_EXPORTER_OTLP_ENDPOINT, else the exporter's default
	// (localhost:4317, gRPC).
	Endpoint string `yaml:"endpoint"`
	// Protocol is "grpc" (default) or "http/protobuf"; empty: from the
	// endpoint's scheme or OTEL_EXPORTER_OTLP_PROTOCOL.
	Protocol string `yaml:"protocol"`
	// Insecure dials the collector without TLS (http://, or a bare
	// host:port with grpc, are plain text already).
	Insecure bool `yaml:"insecure"`
	// SampleRatio is the share of new traces recorded (0..1); a trace a
	// submitter started keeps its parent's decision. Default 1.
	SampleRatio float64 `yaml:"sample_ratio"`
	// ServiceName is the resource's service.name; default "ontime"
	// (OTEL_SERVICE_NAME overrides).
	ServiceName string `yaml:"service_name"`
}

// AuditConfig configures the audit log (internal/api/audit.go): one line
// per state change made through the API, with the actor.
type AuditConfig struct {
	// File, when set, receives the audit lines as JSON lines, in a file
	// of their own (appended, created 0600); empty: they go to the node's
	// log like any other line.
	File string `yaml:"file"`
	// Submits audits POST /v1/tasks and POST /v1/tasks:batch too; off by
	// default, as they are the data plane (thousands a second).
	Submits bool `yaml:"submits"`
}

// DefaultSampleRatio is tracing.sample_ratio's default.
const DefaultSampleRatio = 1.0

func (t TracingConfig) validate() error {
	if t.SampleRatio < 0 || t.SampleRatio > 1 {
		return fmt.Errorf("tracing.sample_ratio: %g is out of range 0..1", t.SampleRatio)
	}
	switch t.Protocol {
	case "", "grpc", "http/protobuf":
	default:
		return fmt.Errorf("tracing.protocol: %q is not one of grpc, http/protobuf", t.Protocol)
	}
	if t.Endpoint != "" {
		if _, _, err := t.endpoint(); err != nil {
			return fmt.Errorf("tracing.endpoint: %w", err)
		}
	}
	if len(t.ServiceName) > 255 {
		return fmt.Errorf("tracing.service_name: %d bytes; at most 255", len(t.ServiceName))
	}
	return nil
}

// endpoint splits tracing.endpoint into the protocol it implies ("" when
// it implies none) and host:port.
func (t TracingConfig) endpoint() (proto, hostport string, err error) {
	e := t.Endpoint
	if !strings.Contains(e, "://") {
		if strings.ContainsAny(e, "/ ") || !strings.Contains(e, ":") {
			return "", "", fmt.Errorf("%q is not host:port or a URL", e)
		}
		return "", e, nil
	}
	u, err := url.Parse(e)
	if err != nil || u.Host == "" {
		return "", "", fmt.Errorf("%q is not host:port or a URL", e)
	}
	switch u.Scheme {
	case "http", "https":
		if u.Path != "" && u.Path != "/" {
			return "", "", fmt.Errorf("%q: give the collector's base URL (the exporter adds /v1/traces)", e)
		}
		return "http/protobuf", u.Host, nil
	case "grpc":
		return "grpc", u.Host, nil
	}
	return "", "", fmt.Errorf("%q: scheme %q is not http, https or grpc", e, u.Scheme)
}

func (a AuditConfig) validate() error {
	if a.File == "" {
		return nil
	}
	// The file is opened (and its directory's existence checked) when
	// the node is built; here only what no file system would take.
	if strings.ContainsRune(a.File, 0) || strings.HasSuffix(a.File, "/") || filepath.Base(a.File) == "." {
		return fmt.Errorf("audit.file: %q is not a file name", a.File)
	}
	return nil
}
