package ontime_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/internal/testdb"
)

// BenchmarkBulkCancel (issue 29): a bulk cancel of ONTIME_BULK_ROWS
// pending tasks (default 100,000; 1,000,000 for the figure) on a
// node of each engine, while a live workload of 500 tasks/s, each due 1 s
// after its submit, is delivered to a Go handler. It reports the cancel's
// rows/s and the live tasks' lateness p99 idle (10 s before) and during
// the cancel, and their ratio (the goal: ≤ 2).
//
//	ONTIME_BULK_ROWS=1000000 go test -run '^$' -bench BulkCancel -benchtime 1x -timeout 60m .
//
// ONTIME_BULK_PAGE and ONTIME_BULK_PAUSE set operations.page_size and
// operations.page_pause.
func BenchmarkBulkCancel(b *testing.B) {
	rows := 100000
	if v := os.Getenv("ONTIME_BULK_ROWS"); v != "" {
		var err error
		if rows, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	for _, engine := range testdb.Engines {
		b.Run(engine, func(b *testing.B) {
			for range b.N {
				benchBulkCancel(b, engine, rows)
			}
		})
	}
}

// lateness collects the live tasks' lateness.
type lateness struct {
	mu  sync.Mutex
	on  bool
	got []time.Duration
}

func (l *lateness) add(d time.Duration) {
	l.mu.Lock()
	if l.on {
		l.got = append(l.got, d)
	}
	l.mu.Unlock()
}

// window records from now until the returned function, which answers the
// p99 and the count.
func (l *lateness) window() func() (time.Duration, int) {
	l.mu.Lock()
	l.on, l.got = true, nil
	l.mu.Unlock()
	return func() (time.Duration, int) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.on = false
		if len(l.got) == 0 {
			return 0, 0
		}
		slices.Sort(l.got)
		return l.got[len(l.got)*99/100], len(l.got)
	}
}

func benchBulkCancel(b *testing.B, engine string, rows int) {
	b.StopTimer()
	ctx := context.Background()
	cfg := ontime.DefaultConfig()
	cfg.DataDir = b.TempDir()
	cfg.Store.Driver = engine
	cfg.Store.Databases = testdb.DSNs(b, engine, 1)
	cfg.LogLevel = "error"
	if v := os.Getenv("ONTIME_BULK_PAGE"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			b.Fatal(err)
		}
		cfg.Operations.PageSize = n
	}
	if v := os.Getenv("ONTIME_BULK_PAUSE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatal(err)
		}
		cfg.Operations.PagePause = ontime.Duration(d)
	}
	var late lateness
	node, err := ontime.NewNode(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := node.Handle("live", func(ctx context.Context, d *ontime.Delivery) error {
		late.add(time.Since(d.DueAt))
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	if err := node.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer node.Stop(context.Background())
	srv := httptest.NewServer(node.HTTPHandler())
	defer srv.Close()

	// The rows to cancel: pending, due in two hours (out of the hot tier).
	start := time.Now()
	specs := make([]ontime.TaskSpec, 0, 1000)
	for i := 0; i < rows; i += len(specs) {
		specs = specs[:0]
		for j := i; j < min(i+1000, rows); j++ {
			specs = append(specs, ontime.TaskSpec{Topic: "bulk.old", Delay: 2 * time.Hour, Target: "http://127.0.0.1:1/h"})
		}
		if _, err := node.SubmitBatch(ctx, specs); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("%s: %d rows submitted in %s", engine, rows, time.Since(start).Round(time.Millisecond))

	// The live workload: 500 tasks/s, each due 1 s after its submit.
	liveCtx, stopLive := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(20 * time.Millisecond) // 10 tasks a tick
		defer tick.Stop()
		for {
			select {
			case <-liveCtx.Done():
				return
			case <-tick.C:
			}
			batch := make([]ontime.TaskSpec, 10)
			for i := range batch {
				batch[i] = ontime.TaskSpec{Topic: "live", Delay: time.Second}
			}
			if _, err := node.SubmitBatch(liveCtx, batch); err != nil && liveCtx.Err() == nil {
				b.Error(err)
				return
			}
		}
	}()
	defer func() { stopLive(); wg.Wait() }()
	time.Sleep(3 * time.Second) // warm up
	idle := late.window()
	time.Sleep(10 * time.Second)
	idleP99, idleN := idle()

	during := late.window()
	b.StartTimer()
	start = time.Now()
	resp, err := http.Post(srv.URL+"/v1/operations", "application/json", strings.NewReader(`{"action":"cancel","filter":{"topic":"bulk.old"}}`))
	if err != nil {
		b.Fatal(err)
	}
	var op apiv1.Operation
	if err := json.NewDecoder(resp.Body).Decode(&op); err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	for op.Status != "done" && op.Status != "failed" {
		time.Sleep(20 * time.Millisecond)
		resp, err := http.Get(srv.URL + "/v1/operations/" + op.ID)
		if err != nil {
			b.Fatal(err)
		}
		if err := json.NewDecoder(resp.Body).Decode(&op); err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
	}
	took := time.Since(start)
	b.StopTimer()
	time.Sleep(time.Second + 500*time.Millisecond) // the tasks due during the cancel are delivered
	duringP99, duringN := during()
	if op.Status != "done" || op.Changed != int64(rows) {
		b.Fatalf("operation: %+v", op)
	}
	b.ReportMetric(float64(rows)/took.Seconds(), "rows/s")
	b.ReportMetric(float64(idleP99.Microseconds())/1000, "idle-p99-ms")
	b.ReportMetric(float64(duringP99.Microseconds())/1000, "during-p99-ms")
	if idleP99 > 0 {
		b.ReportMetric(float64(duringP99)/float64(idleP99), "p99-ratio")
	}
	b.Logf("%s: cancelled %d rows in %s (%.0f rows/s); live lateness p99 idle %s (%d tasks), during %s (%d tasks)",
		engine, rows, took.Round(time.Millisecond), float64(rows)/took.Seconds(), idleP99, idleN, duringP99, duringN)
}
