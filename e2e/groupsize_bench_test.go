package e2e

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontimehq/ontime/client"
)

// BenchmarkHTTPSubmitGroups: single submits over HTTP (as
// BenchmarkHTTPSubmit) from 1 and 16 clients, reporting beside submits/s
// how many submits each group commit wrote on average (subs/group, from
// the node's ontime_submit_group_submits histogram), which decides the
// commits paid per submit, and the process's CPU time (the node and its
// clients) per submit, which other load on the machine changes least.
//
//	go test ./e2e -run '^$' -bench HTTPSubmitGroups -benchtime=20000x
func BenchmarkHTTPSubmitGroups(b *testing.B) {
	engine := os.Getenv("ONTIME_BENCH_ENGINE")
	if engine == "" {
		engine = "sqlite"
	}
	for _, c := range []int{1, 16} {
		b.Run("clients="+strconv.Itoa(c), func(b *testing.B) {
			cl, base := groupBenchServer(b, engine)
			payload := json.RawMessage(`{"order":12345,"note":"a small payload"}`)
			before := scrape(b, base)
			var next atomic.Int64
			b.ResetTimer()
			cpu0 := cpuTime()
			start := time.Now()
			var wg sync.WaitGroup
			for range c {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						if _, _, err := cl.Submit(context.Background(), client.TaskRequest{Topic: "bench", Delay: "1h", Payload: payload}); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			elapsed, cpu := time.Since(start), cpuTime()-cpu0
			b.StopTimer()
			after := scrape(b, base)
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "submits/s")
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu_us/submit")
			if n := after["ontime_submit_group_submits_count"] - before["ontime_submit_group_submits_count"]; n > 0 {
				b.ReportMetric((after["ontime_submit_group_submits_sum"]-before["ontime_submit_group_submits_sum"])/n, "subs/group")
			}
		})
	}
}

// groupBenchServer starts a node on engine behind a loopback http.Server
// and returns a client of it and its base URL.
func groupBenchServer(b *testing.B, engine string) (*client.Client, string) {
	b.Helper()
	node := benchNodeOn(b, engine)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: node.HTTPHandler(), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Close(); <-done })
	base := "http://" + ln.Addr().String()
	cl, err := client.New(base)
	if err != nil {
		b.Fatal(err)
	}
	return cl, base
}
