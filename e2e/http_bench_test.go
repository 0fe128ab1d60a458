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

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/client"
)

// BenchmarkHTTPSubmit measures submits over the HTTP API as users make
// them: a node (SQLite by default; ONTIME_BENCH_ENGINE=postgres for
// PostgreSQL) serving its handler on a loopback socket through an
// http.Server set up as `ontime serve` sets it up, and the Go client with
// keep-alive connections. Tasks are due in an hour, so delivery does not
// compete. Reports submits/s, CPU per submit and submits per group
// commit; b.N is the number of tasks.
//
//	go test ./e2e -run '^$' -bench HTTPSubmit -benchtime=5000x -cpuprofile cpu.out
func BenchmarkHTTPSubmit(b *testing.B) {
	engine := os.Getenv("ONTIME_BENCH_ENGINE")
	if engine == "" {
		engine = "sqlite"
	}
	type run struct {
		name    string
		clients int
		keyed   bool
		opts    []client.Option
	}
	// Concurrent Submits of one client share batch calls unless
	// coalescing is off (client/coalesce.go): each count runs both ways.
	off := client.WithCoalesce(client.Coalesce{Off: true})
	var runs []run
	for _, c := range []int{1, 4, 16} {
		runs = append(runs, run{"clients=" + strconv.Itoa(c), c, false, nil},
			run{"clients=" + strconv.Itoa(c) + "/coalesce=off", c, false, []client.Option{off}})
	}
	// Every task with a business key of its own, as users submit them.
	runs = append(runs, run{"keyed/clients=16", 16, true, nil}, run{"keyed/clients=16/coalesce=off", 16, true, []client.Option{off}},
		run{"keyed/clients=16/calls=2", 16, true, []client.Option{client.WithCoalesce(client.Coalesce{Calls: 2})}})
	for _, c := range []int{1, 16} {
		runs = append(runs, run{"h2c/clients=" + strconv.Itoa(c), c, false, []client.Option{client.WithHTTP2Cleartext()}})
	}
	for _, r := range runs {
		c := r.clients
		b.Run(r.name, func(b *testing.B) {
			cl, conns, base := benchHTTPServer(b, engine, r.opts...)
			payload := json.RawMessage(`{"order":12345,"note":"a small payload"}`)
			var next atomic.Int64
			before := scrape(b, base)
			calls0 := conns.calls.Load()
			b.ResetTimer()
			cpu0 := cpuTime()
			start := time.Now()
			var wg sync.WaitGroup
			for range c {
				wg.Go(func() {
					for {
						n := next.Add(1)
						if n > int64(b.N) {
							return
						}
						req := client.TaskRequest{Topic: "bench", Delay: "1h", Payload: payload}
						if r.keyed {
							req.Key = "order-" + strconv.FormatInt(n, 10)
						}
						_, _, err := cl.Submit(context.Background(), req)
						if err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			elapsed, cpu := time.Since(start), cpuTime()-cpu0
			b.StopTimer()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "submits/s")
			b.ReportMetric(float64(conns.Load()), "conns")
			// Tasks per HTTP call: 1 without coalescing.
			b.ReportMetric(float64(b.N)/float64(conns.calls.Load()-calls0), "tasks/call")
			// CPU of the process (node and clients) per submit: what other
			// load on the machine changes least. Submits per group commit
			// decide the commits paid per submit.
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu_us/submit")
			after := scrape(b, base)
			if n := after["ontime_submit_group_submits_count"] - before["ontime_submit_group_submits_count"]; n > 0 {
				b.ReportMetric((after["ontime_submit_group_submits_sum"]-before["ontime_submit_group_submits_sum"])/n, "subs/group")
			}
		})
	}
	b.Run("batch=1000", func(b *testing.B) {
		cl, conns, _ := benchHTTPServer(b, engine)
		batch := make([]client.TaskRequest, 1000)
		for i := range batch {
			batch[i] = client.TaskRequest{Topic: "bench", Delay: "1h", Payload: json.RawMessage(`{"order":` + strconv.Itoa(i) + `}`)}
		}
		b.ResetTimer()
		start := time.Now()
		n := 0
		for n < b.N {
			items, err := cl.SubmitBatch(context.Background(), batch)
			if err != nil {
				b.Fatal(err)
			}
			for _, it := range items {
				if it.Error != nil {
					b.Fatal(it.Error.Message)
				}
			}
			n += len(batch)
		}
		b.ReportMetric(float64(n)/time.Since(start).Seconds(), "submits/s")
		b.ReportMetric(float64(conns.Load()), "conns")
	})
}

// conns counts the connections a bench server accepted, and the calls it
// answered.
type conns struct {
	atomic.Int64
	calls atomic.Int64
}

// countCalls counts the calls h serves.
func countCalls(h http.Handler, n *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h.ServeHTTP(w, r)
	})
}

// benchHTTPServer starts a node on engine behind a loopback http.Server and
// returns a client of it, the count of connections the server accepted
// (and of calls it answered) and its base URL.
func benchHTTPServer(b *testing.B, engine string, opts ...client.Option) (*client.Client, *conns, string) {
	b.Helper()
	node := benchNodeOn(b, engine)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	cfg := ontime.DefaultConfig().HTTP
	conns := new(conns)
	var protocols http.Protocols // as newHTTPServer in cmd/ontime: HTTP/1.1 and h2c
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{
		Protocols:         &protocols,
		Handler:           countCalls(node.HTTPHandler(), &conns.calls),
		ReadHeaderTimeout: time.Duration(cfg.ReadHeaderTimeout),
		ReadTimeout:       time.Duration(cfg.ReadTimeout),
		WriteTimeout:      time.Duration(cfg.WriteTimeout),
		IdleTimeout:       time.Duration(cfg.IdleTimeout),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				conns.Add(1)
			}
		},
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Close(); <-done })
	base := "http://" + ln.Addr().String()
	cl, err := client.New(base, opts...)
	if err != nil {
		b.Fatal(err)
	}
	return cl, conns, base
}
