package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ontimehq/ontime"
)

// Benchmarks of issue 13's retry path, on the embedded default (SQLite,
// memory tier, 30 s window: scanners look every 5 s when nothing is due).
// They use only the public API, so the same file runs against an older
// build for a before/after:
//
//	go test ./e2e -run '^$' -bench 'RetryGap|ParkedBehindDeadDestination' -benchtime=1x -v

func cpuTime() time.Duration {
	var r syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r)
	return time.Duration(r.Utime.Nano() + r.Stime.Nano())
}

func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil && d > 0 {
		return d
	}
	return def
}

// scrapeCounter reads one counter (summed over its labels) from /metrics.
func scrapeCounter(b *testing.B, h http.Handler, name string) float64 {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	var sum float64
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, name+" ") || strings.HasPrefix(line, name+"{") {
			f := strings.Fields(line)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err != nil {
				b.Fatalf("metric line %q: %v", line, err)
			}
			sum += v
		}
	}
	return sum
}

// BenchmarkRetryGap: 500 webhook tasks due over 5 s; the receiver fails
// attempt 1 and takes attempt 2. With retry_base 200ms (±20 % jitter)
// attempt 2 is due 160–240 ms after attempt 1's failure. Reported: the
// gap between the two arrivals (p50, p99, max), the share within issue
// 13's bound (200 ms + 40 ms jitter + 50 ms), and attempt 2's lateness
// behind its retry time.
func BenchmarkRetryGap(b *testing.B) {
	const n = 500
	for range b.N {
		var mu sync.Mutex
		first := map[string]time.Time{}
		var gaps, late []time.Duration
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			at := time.Now()
			var body struct {
				ID      string    `json:"id"`
				DueAt   time.Time `json:"due_at"`
				Attempt int       `json:"attempt"`
			}
			_ = json.NewDecoder(req.Body).Decode(&body)
			mu.Lock()
			defer mu.Unlock()
			if body.Attempt == 1 {
				first[body.ID] = at
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			if t0, ok := first[body.ID]; ok && body.Attempt == 2 {
				gaps = append(gaps, at.Sub(t0))
				late = append(late, at.Sub(body.DueAt))
			}
		}))
		cfg := ontime.DefaultConfig()
		cfg.DataDir = b.TempDir()
		cfg.Delivery.RetryBase = ontime.Duration(200 * time.Millisecond)
		// Every first attempt fails on purpose: the breaker must not take
		// that for a dead destination (parked tasks are the next benchmark).
		cfg.Delivery.BreakerFailures = 1000000
		node, err := ontime.NewNode(context.Background(), cfg)
		if err != nil {
			b.Fatal(err)
		}
		if err := node.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		start := time.Now().Add(time.Second)
		for i := range n {
			due := start.Add(time.Duration(i) * 10 * time.Millisecond)
			if _, _, err := node.Submit(context.Background(), ontime.TaskSpec{Topic: "bench.retry", DueAt: due, Target: srv.URL}); err != nil {
				b.Fatal(err)
			}
		}
		for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			mu.Lock()
			got := len(gaps)
			mu.Unlock()
			if got == n {
				break
			}
		}
		_ = node.Stop(context.Background())
		srv.Close()
		mu.Lock()
		slices.Sort(gaps)
		slices.Sort(late)
		within := 0
		for _, g := range gaps {
			if g <= 290*time.Millisecond {
				within++
			}
		}
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		b.ReportMetric(float64(len(gaps)), "retried")
		b.ReportMetric(ms(pct(gaps, 0.50)), "gap_p50_ms")
		b.ReportMetric(ms(pct(gaps, 0.99)), "gap_p99_ms")
		b.ReportMetric(ms(pct(gaps, 1)), "gap_max_ms")
		b.ReportMetric(100*float64(within)/float64(max(len(gaps), 1)), "within_290ms_%")
		b.ReportMetric(ms(pct(late, 0.99)), "late2_p99_ms")
		mu.Unlock()
	}
}

// BenchmarkParkedBehindDeadDestination: the CPU a node spends while 10,000
// webhook tasks wait behind a destination that refuses every connection
// (127.0.0.1:9), its breaker open. First the same node's idle CPU over the
// window (nothing due: the baseline), then the tasks are submitted due at
// once, left ONTIME_BENCH_PARK_WARM (default 60 s) to fail and park, and
// the CPU and the delivery starts are measured over ONTIME_BENCH_PARK_WINDOW
// (default 2 min: long enough to hold several returns of the parked tasks).
// CPU is getrusage of the whole process per wall second.
func BenchmarkParkedBehindDeadDestination(b *testing.B) {
	const n = 10000
	warm := envDuration("ONTIME_BENCH_PARK_WARM", 60*time.Second)
	window := envDuration("ONTIME_BENCH_PARK_WINDOW", 2*time.Minute)
	for range b.N {
		cfg := ontime.DefaultConfig()
		cfg.DataDir = b.TempDir()
		ctx := context.Background()
		node, err := ontime.NewNode(ctx, cfg)
		if err != nil {
			b.Fatal(err)
		}
		if err := node.Start(ctx); err != nil {
			b.Fatal(err)
		}
		h := node.HTTPHandler()
		measure := func(profile string) (cpuPct, startsPerSec float64) {
			s0, c0, t0 := scrapeCounter(b, h, "ontime_deliveries_started_total"), cpuTime(), time.Now()
			if profile != "" { // ONTIME_BENCH_PARK_PROFILE: a CPU profile of the parked window
				f, err := os.Create(profile)
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					b.Fatal(err)
				}
				defer pprof.StopCPUProfile()
			}
			time.Sleep(window)
			s1, c1, wall := scrapeCounter(b, h, "ontime_deliveries_started_total"), cpuTime(), time.Since(t0)
			return 100 * (c1 - c0).Seconds() / wall.Seconds(), (s1 - s0) / wall.Seconds()
		}
		time.Sleep(2 * time.Second) // past the start
		idle, _ := measure("")
		for i := 0; i < n; i += 1000 {
			specs := make([]ontime.TaskSpec, 1000)
			for j := range specs {
				specs[j] = ontime.TaskSpec{Topic: "bench.parked", Target: "http://127.0.0.1:9/hook", MaxAttempts: 1000}
			}
			if _, err := node.SubmitBatch(ctx, specs); err != nil {
				b.Fatal(err)
			}
		}
		time.Sleep(warm)
		parked, starts := measure(os.Getenv("ONTIME_BENCH_PARK_PROFILE"))
		_ = node.Stop(ctx)
		b.ReportMetric(idle, "idle_cpu_%")
		b.ReportMetric(parked, "parked_cpu_%")
		b.ReportMetric(starts, "starts/s")
		b.ReportMetric(float64(n), "tasks")
	}
}
