package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/internal/testdb"
)

// Benchmarks of the whole pipeline on the embedded default (SQLite, memory
// tier), webhook receiver on loopback. Each runs its workload once per b.N
// iteration; run with -benchtime=1x:
//
//	go test ./e2e -run '^$' -bench . -benchtime=1x
//
// They report lateness (delivery − due) percentiles, early deliveries and
// drain rates as metrics; they assert nothing about time.

type latencyRecorder struct {
	mu    sync.Mutex
	late  []time.Duration
	early int
	seen  map[string]bool
	dups  int
	last  time.Time
}

func (r *latencyRecorder) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.record(req.Header.Get("Ontime-Task-Id"), parseDue(req))
	})
}

// record notes one delivery of task id, due at due.
func (r *latencyRecorder) record(id string, due time.Time) {
	now := time.Now()
	{
		r.mu.Lock()
		if r.seen[id] {
			r.dups++
		}
		r.seen[id] = true
		d := now.Sub(due)
		if d < 0 {
			r.early++
		}
		r.late = append(r.late, d)
		if now.After(r.last) {
			r.last = now
		}
		r.mu.Unlock()
	}
}

// batchHandler records the tasks of batch calls ({"tasks": [...]}).
func (r *latencyRecorder) batchHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var body struct {
			Tasks []struct {
				ID    string    `json:"id"`
				DueAt time.Time `json:"due_at"`
			} `json:"tasks"`
		}
		_ = decodeJSON(req, &body)
		for _, t := range body.Tasks {
			r.record(t.ID, t.DueAt)
		}
	})
}

func parseDue(req *http.Request) time.Time {
	var body struct {
		DueAt time.Time `json:"due_at"`
	}
	_ = decodeJSON(req, &body)
	return body.DueAt
}

func (r *latencyRecorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen)
}

func pct(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p * float64(len(sorted)-1))
	return sorted[i]
}

func benchNode(b *testing.B) *ontime.Node { return benchNodeOn(b, "sqlite") }

// benchNodeOn starts a node on a fresh database of engine.
func benchNodeOn(b *testing.B, engine string) *ontime.Node {
	return runBenchNode(b, benchConfig(b, engine), benchOptions()...)
}

// benchConfig is the config of benchNodeOn.
func benchConfig(b *testing.B, engine string) ontime.Config {
	cfg := ontime.DefaultConfig()
	cfg.DataDir = b.TempDir()
	if engine != "sqlite" {
		cfg.Store.Driver = engine
		cfg.Store.Databases = testdb.DSNs(b, engine, 1)
	}
	cfg.Delivery.Concurrency = 64
	if v, err := strconv.Atoi(os.Getenv("ONTIME_BENCH_HOT_MAX_ENTRIES")); err == nil && v > 0 {
		cfg.Hot.MaxEntries = v
	}
	return cfg
}

// benchOptions are the node options of the benchmarks.
func benchOptions() []ontime.NodeOption {
	var opts []ontime.NodeOption
	if lvl := os.Getenv("ONTIME_BENCH_LOG"); lvl != "" { // e.g. warn: the node's log on stderr
		opts = append(opts, ontime.WithLogger(ontime.NewLogger(os.Stderr, lvl)))
	}
	return opts
}

// runBenchNode starts an in-process node on cfg, stopped at the
// benchmark's end.
func runBenchNode(b *testing.B, cfg ontime.Config, opts ...ontime.NodeOption) *ontime.Node {
	b.Helper()
	ctx := context.Background()
	node, err := ontime.NewNode(ctx, cfg, opts...)
	if err != nil {
		b.Fatal(err)
	}
	// The benchmarks submit tasks without a target to these topics, which
	// a node accepts only while a live node has a Go handler for them.
	for _, topic := range benchHandledTopics {
		if err := node.Handle(topic, func(context.Context, *ontime.Delivery) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
	if err := node.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = node.Stop(context.Background()) })
	return node
}

// benchHandledTopics are the topics of the benchmarks' tasks without a
// target, due far ahead: their handler never runs.
var benchHandledTopics = []string{"bench", "bench.idle", "bench.submit", "bench.key"}

// BenchmarkSteady fires rate tasks/s due evenly for a few seconds.
func BenchmarkSteady1000PerSecond(b *testing.B) { benchSteady(b, 1000, 5*time.Second) }

func benchSteady(b *testing.B, rate int, span time.Duration) {
	for range b.N {
		rec := &latencyRecorder{seen: map[string]bool{}}
		srv := httptest.NewServer(rec.handler())
		node := benchNode(b)
		n := submitSteady(b, node, srv.URL, rate, span)
		waitSteady(b, rec, n, span, 30*time.Second)
		srv.Close()
		report(b, rec, n)
	}
}

// submitSteady submits, in the background, rate tasks/s to target due
// evenly over span from two seconds from now, each a second before it is
// due as a real producer would; it returns how many.
func submitSteady(b *testing.B, node *ontime.Node, target string, rate int, span time.Duration) int {
	ctx := context.Background()
	n := int(span.Seconds() * float64(rate))
	start := time.Now().Add(2 * time.Second)
	step := time.Second / time.Duration(rate)
	go func() {
		for i := range n {
			due := start.Add(time.Duration(i) * step)
			if wait := time.Until(due.Add(-time.Second)); wait > 0 {
				time.Sleep(wait)
			}
			if _, _, err := node.Submit(ctx, ontime.TaskSpec{Topic: "bench.steady", DueAt: due, Target: target}); err != nil {
				b.Error(err)
				return
			}
		}
	}()
	return n
}

// waitSteady waits until rec saw n tasks, or grace past the span of a
// submitSteady started now.
func waitSteady(b *testing.B, rec *latencyRecorder, n int, span, grace time.Duration) {
	deadline := time.Now().Add(2*time.Second + span + grace)
	for rec.count() < n && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
}

// BenchmarkBurst50000: 50,000 tasks due at the same instant, by webhook.
func BenchmarkBurst50000(b *testing.B) { benchBurst(b, true, 0) }

// BenchmarkBurst50000WebhookBatch100: the same to a destination configured
// with batch: 100 ({"tasks": [...]} calls of up to 100 tasks).
func BenchmarkBurst50000WebhookBatch100(b *testing.B) { benchBurst(b, true, 100) }

// BenchmarkBurst50000GoHandler: the same with a Go handler in-process.
func BenchmarkBurst50000GoHandler(b *testing.B) { benchBurst(b, false, 0) }

func benchBurst(b *testing.B, webhook bool, batch int) {
	const n = 50000
	for range b.N {
		rec := &latencyRecorder{seen: map[string]bool{}}
		h := rec.handler()
		if batch > 1 {
			h = rec.batchHandler()
		}
		srv := httptest.NewServer(h)
		var node *ontime.Node
		if batch > 1 {
			cfg := benchConfig(b, "sqlite")
			cfg.Destinations = map[string]ontime.DestinationConfig{srv.URL: {Batch: batch}}
			node = runBenchNode(b, cfg, benchOptions()...)
		} else {
			node = benchNode(b)
		}
		target := srv.URL
		if !webhook {
			target = ""
			node.Handle("bench.burst", func(ctx context.Context, d *ontime.Delivery) error {
				rec.record(d.ID, d.DueAt)
				return nil
			})
		}
		ctx := context.Background()
		start := time.Now()
		due := start.Add(40 * time.Second) // beyond the window: stored, then preheated by the scanner
		// Submitted in batches: this measures delivery, and one at a time
		// a loaded machine may still be submitting when the burst is due.
		specs := make([]ontime.TaskSpec, 0, 1000)
		for i := 0; i < n; i++ {
			specs = append(specs, ontime.TaskSpec{Topic: "bench.burst", DueAt: due, Target: target})
			if len(specs) == cap(specs) || i == n-1 {
				if _, err := node.SubmitBatch(ctx, specs); err != nil {
					b.Fatal(err)
				}
				specs = specs[:0]
			}
		}
		b.ReportMetric(time.Since(start).Seconds(), "submit_s") // above 40: the drain includes submitting
		for rec.count() < n && time.Now().Before(due.Add(60*time.Second)) {
			time.Sleep(50 * time.Millisecond)
		}
		srv.Close()
		report(b, rec, n)
		rec.mu.Lock()
		drain := rec.last.Sub(due)
		rec.mu.Unlock()
		b.ReportMetric(float64(n)/drain.Seconds(), "drain_tasks/s")
	}
}

func report(b *testing.B, rec *latencyRecorder, n int) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	slices.Sort(rec.late)
	b.ReportMetric(float64(pct(rec.late, 0.50).Microseconds())/1000, "p50_ms")
	b.ReportMetric(float64(pct(rec.late, 0.99).Microseconds())/1000, "p99_ms")
	b.ReportMetric(float64(pct(rec.late, 1).Microseconds())/1000, "max_ms")
	b.ReportMetric(float64(rec.early), "early")
	b.ReportMetric(float64(n-len(rec.seen)), "lost")
	b.ReportMetric(float64(rec.dups), "dups")
}

// BenchmarkIdleCPU measures the CPU a node spends per second of wall time
// while it holds many far-future tasks and nothing is due. Rows:
// ONTIME_BENCH_IDLE_ROWS (default 200,000).
func BenchmarkIdleCPU(b *testing.B) {
	rows := 200000
	if v, err := strconv.Atoi(os.Getenv("ONTIME_BENCH_IDLE_ROWS")); err == nil && v > 0 {
		rows = v
	}
	node := benchNode(b)
	ctx := context.Background()
	due := time.Now().Add(24 * time.Hour)
	for i := 0; i < rows; i += 1000 {
		specs := make([]ontime.TaskSpec, min(1000, rows-i))
		for j := range specs {
			specs[j] = ontime.TaskSpec{Topic: "bench.idle", DueAt: due.Add(time.Duration(i+j) * time.Millisecond)}
		}
		if _, err := node.SubmitBatch(ctx, specs); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		var r0, r1 syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
		t0 := time.Now()
		time.Sleep(10 * time.Second)
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
		cpu := time.Duration(r1.Utime.Nano()+r1.Stime.Nano()-r0.Utime.Nano()-r0.Stime.Nano()) * time.Nanosecond
		b.ReportMetric(100*cpu.Seconds()/time.Since(t0).Seconds(), "cpu_%")
		b.ReportMetric(float64(rows), "rows")
	}
}

// BenchmarkSubmit: the enqueue side on each engine, tasks due in an hour
// (nothing fires): one Submit per op, and SubmitBatch of 1,000.
func BenchmarkSubmit(b *testing.B) {
	due := time.Now().Add(time.Hour)
	payload := []byte(`{"id":"bench-000000","due":"2026-11-23T10:00:00.25Z"}`)
	for _, engine := range testdb.Engines {
		b.Run(engine+"/one", func(b *testing.B) {
			node := benchNodeOn(b, engine)
			ctx := context.Background()
			for b.Loop() {
				if _, _, err := node.Submit(ctx, ontime.TaskSpec{Topic: "bench.submit", DueAt: due, Payload: payload}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
		})
		b.Run(engine+"/batch1000", func(b *testing.B) {
			node := benchNodeOn(b, engine)
			ctx := context.Background()
			specs := make([]ontime.TaskSpec, 1000)
			for i := range specs {
				specs[i] = ontime.TaskSpec{Topic: "bench.submit", DueAt: due, Payload: payload}
			}
			for b.Loop() {
				if _, err := node.SubmitBatch(ctx, specs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(1000*b.N)/b.Elapsed().Seconds(), "tasks/s")
		})
	}
}
