package e2e

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/ontimehq/ontime"
)

// discardExporter is a no-op OTLP stand-in: spans are made, batched and
// handed over as with a collector, then dropped.
type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }

// BenchmarkTracingCPU: the process's CPU per task submitted and delivered
// by webhook (cpu_us/task; the receiver shares the process), with tracing
// off and with tracing on into a no-op exporter (the SDK's batch
// processor, every span sampled): the cost of the spans of submit, fire,
// deliver and the traceparent kept and sent. Run with -count to
// interleave the two:
//
//	go test ./e2e -run '^$' -bench TracingCPU -benchtime=3x -count=3
func BenchmarkTracingCPU(b *testing.B) {
	const n = 10000
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on-noop"
		}
		b.Run(name, func(b *testing.B) {
			var total time.Duration
			for range b.N {
				rec := &latencyRecorder{seen: map[string]bool{}}
				srv := httptest.NewServer(rec.handler())
				opts := benchOptions()
				var tp *sdktrace.TracerProvider
				if on {
					tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(discardExporter{}), sdktrace.WithSampler(sdktrace.AlwaysSample()))
					opts = append(opts, ontime.WithTracerProvider(tp))
				}
				node := runBenchNode(b, benchConfig(b, "sqlite"), opts...)
				ctx := context.Background()
				cpu0 := cpuTime()
				due := time.Now().Add(3 * time.Second) // within the window: straight to the hot tier
				specs := make([]ontime.TaskSpec, 0, 100)
				for i := range n {
					specs = append(specs, ontime.TaskSpec{Topic: "bench.trace", DueAt: due, Target: srv.URL})
					if len(specs) == cap(specs) || i == n-1 {
						if _, err := node.SubmitBatch(ctx, specs); err != nil {
							b.Fatal(err)
						}
						specs = specs[:0]
					}
				}
				for rec.count() < n && time.Now().Before(due.Add(60*time.Second)) {
					time.Sleep(20 * time.Millisecond)
				}
				cpu := cpuTime() - cpu0
				if got := rec.count(); got < n {
					b.Fatalf("%d of %d delivered", got, n)
				}
				total += cpu
				srv.Close()
				_ = node.Stop(ctx)
				if tp != nil {
					_ = tp.Shutdown(ctx)
				}
			}
			b.ReportMetric(float64(total.Microseconds())/float64(n*b.N), "cpu_us/task")
		})
	}
}
