package e2e

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ontimehq/ontime"
)

// BenchmarkCPUPerTask: process CPU per task submitted (batches of 100) and
// delivered by webhook, burst shape (n due at one instant 3 s ahead) and
// steady shape (200/s singles due 1 s ahead for 10 s). Built to compare
// two checkouts: copy this file into an older one, build both test
// binaries (go test -c) and run them alternately, in random order:
//
//	go test ./e2e -run '^$' -bench 'CPUPerTask/burst' -benchtime 1x
func BenchmarkCPUPerTask(b *testing.B) {
	for _, shape := range []string{"burst", "steady"} {
		b.Run(shape, func(b *testing.B) {
			var total time.Duration
			var tasks int
			for range b.N {
				rec := &latencyRecorder{seen: map[string]bool{}}
				srv := httptest.NewServer(rec.handler())
				node := runBenchNode(b, benchConfig(b, "sqlite"), benchOptions()...)
				ctx := context.Background()
				cpu0 := cpuTime()
				n := 0
				var last time.Time
				if shape == "burst" {
					n = 10000
					due := time.Now().Add(3 * time.Second)
					last = due
					specs := make([]ontime.TaskSpec, 0, 100)
					for i := range n {
						specs = append(specs, ontime.TaskSpec{Topic: "bench.ab", Key: fmt.Sprintf("k%d", i), DueAt: due, Target: srv.URL})
						if len(specs) == cap(specs) || i == n-1 {
							if _, err := node.SubmitBatch(ctx, specs); err != nil {
								b.Fatal(err)
							}
							specs = specs[:0]
						}
					}
				} else {
					n = 2000
					start := time.Now()
					for i := range n {
						at := start.Add(time.Duration(i) * 5 * time.Millisecond)
						time.Sleep(time.Until(at))
						last = time.Now().Add(time.Second)
						if _, _, err := node.Submit(ctx, ontime.TaskSpec{Topic: "bench.ab", Key: fmt.Sprintf("k%d", i), DueAt: last, Target: srv.URL}); err != nil {
							b.Fatal(err)
						}
					}
				}
				for rec.count() < n && time.Now().Before(last.Add(60*time.Second)) {
					time.Sleep(20 * time.Millisecond)
				}
				cpu := cpuTime() - cpu0
				if got := rec.count(); got < n {
					b.Fatalf("%d of %d delivered", got, n)
				}
				total += cpu
				tasks += n
				srv.Close()
				_ = node.Stop(ctx)
			}
			b.ReportMetric(float64(total.Microseconds())/float64(tasks), "cpu_us/task")
		})
	}
}
