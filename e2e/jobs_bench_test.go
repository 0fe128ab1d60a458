package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/apiv1"
)

// BenchmarkJobRows measures rows processed per second, end to end with the
// on_success write, of the bill job of seed 000 on one in-process node
// (webhook receiver on loopback), against two baselines on the same
// tables in the same run:
//
//	naive: the seed's loop — SELECT … WHERE status = 1 LIMIT 200, hand the
//	       page to the receiver, UPDATE … SET status = 2 WHERE id = ? one
//	       row at a time, one thread
//	limit: UPDATE bill_N SET status = 2 WHERE status = 1 LIMIT 1000 in a
//	       tight loop over every table (PostgreSQL: WHERE id IN (SELECT …
//	       LIMIT 1000)), no processing at all: the ceiling
//
// Sizes: ONTIME_JOBS_BENCH_TABLES (10) × ONTIME_JOBS_BENCH_ROWS (10,000)
// rows; the naive loop runs on the first ONTIME_JOBS_BENCH_NAIVE (10,000)
// rows only (it is slow) and its rate is per row like the others'.
//
//	go test ./e2e -run '^$' -bench BenchmarkJobRows -benchtime=1x
func BenchmarkJobRows(b *testing.B) {
	for _, engine := range []string{"mysql", "postgres"} {
		b.Run(engine, func(b *testing.B) { benchJobRows(b, engine) })
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func benchJobRows(b *testing.B, engine string) {
	tables := envInt("ONTIME_JOBS_BENCH_TABLES", 10)
	rows := envInt("ONTIME_JOBS_BENCH_ROWS", 10000)
	naiveRows := min(envInt("ONTIME_JOBS_BENCH_NAIVE", 10000), tables*rows)
	total := tables * rows
	bill := newBillDB(b, engine, tables, rows)
	rcv := newJobReceiver(b)
	ctx := context.Background()
	reset := func() {
		for i := range tables {
			if _, err := bill.db.ExecContext(ctx, fmt.Sprintf("UPDATE bill_%d SET status = 1", i)); err != nil {
				b.Fatal(err)
			}
		}
	}
	for range b.N {
		// The job: one trigger, every item streamed to the end.
		cfg := ontime.DefaultConfig()
		cfg.DataDir = b.TempDir()
		cfg.Store.Tables, cfg.Store.Segments = 2, 1
		j := billJob("bench", engine, []string{bill.dsn}, tables, rcv.srv.URL)
		j.Cron = "0 0 0 1 1 *" // only :trigger
		j.Source.Page = envInt("ONTIME_JOBS_BENCH_PAGE", 1000)
		j.Process.Batch = envInt("ONTIME_JOBS_BENCH_BATCH", 250)
		j.Process.Concurrency = 10
		cfg.Jobs = []ontime.JobConfig{j}
		node, err := ontime.NewNode(ctx, cfg)
		if err != nil {
			b.Fatal(err)
		}
		if err := node.Start(ctx); err != nil {
			b.Fatal(err)
		}
		srv := http.Server{Handler: node.HTTPHandler()}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		addr := ln.Addr().String()
		go func() { _ = srv.Serve(ln) }()
		start := time.Now()
		resp, err := http.Post("http://"+addr+"/v1/jobs/bench:trigger", "application/json", nil)
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("trigger: %v %v", err, resp)
		}
		resp.Body.Close()
		deadline := time.Now().Add(time.Duration(envInt("ONTIME_JOBS_BENCH_TIMEOUT", 600)) * time.Second)
		for bill.count(b, tables, 2) < total {
			if time.Now().After(deadline) {
				var runs apiv1.JobRunList
				if r, err := http.Get("http://" + addr + "/v1/jobs/bench/runs?limit=1000"); err == nil {
					_ = json.NewDecoder(r.Body).Decode(&runs)
					r.Body.Close()
				}
				b.Fatalf("the job did not finish in time: %+v", runs.Runs)
			}
			time.Sleep(100 * time.Millisecond)
		}
		jobSecs := time.Since(start).Seconds()
		var runs apiv1.JobRunList
		if r, err := http.Get("http://" + addr + "/v1/jobs/bench/runs?limit=1000"); err == nil {
			_ = json.NewDecoder(r.Body).Decode(&runs)
			r.Body.Close()
		}
		for _, r := range runs.Runs {
			if r.Status == "failed" {
				b.Logf("a run failed (its item was finished by the next trigger): %+v", r)
			}
		}
		_ = srv.Close()
		_ = node.Stop(ctx)

		reset()
		naiveSecs := naiveLoop(b, bill.db, engine, tables, naiveRows, rcv.srv.URL)
		reset()
		limitSecs := limitLoop(b, bill.db, engine, tables)
		if got := bill.count(b, tables, 2); got != total {
			b.Fatalf("limit loop: %d rows at status 2, want %d", got, total)
		}
		jobRate, naiveRate, limitRate := float64(total)/jobSecs, float64(naiveRows)/naiveSecs, float64(total)/limitSecs
		b.ReportMetric(jobRate, "job_rows/s")
		b.ReportMetric(naiveRate, "naive_rows/s")
		b.ReportMetric(limitRate, "limit_rows/s")
		b.ReportMetric(jobRate/naiveRate, "x_naive")
		b.ReportMetric(jobRate/limitRate, "x_limit")
		b.Logf("%s: %d rows; job %.0f rows/s, naive %.0f rows/s (%d rows), UPDATE LIMIT 1000 %.0f rows/s: %.1f× naive, %.2f× limit",
			engine, total, jobRate, naiveRate, naiveRows, limitRate, jobRate/naiveRate, jobRate/limitRate)
		reset()
	}
}

// naiveLoop is seed 000's scheme 2 as people write it: pages of 200 by
// status, each page posted to the receiver, then one UPDATE per row.
func naiveLoop(b *testing.B, db *sql.DB, engine string, tables, limit int, target string) float64 {
	ctx := context.Background()
	ph := "?"
	if engine == "postgres" {
		ph = "$1"
	}
	start := time.Now()
	done := 0
	for t := 0; t < tables && done < limit; t++ {
		for done < limit {
			rows, err := db.QueryContext(ctx, fmt.Sprintf("SELECT id, x, y, z FROM bill_%d WHERE status = 1 LIMIT 200", t))
			if err != nil {
				b.Fatal(err)
			}
			var page []map[string]any
			var ids []int64
			for rows.Next() {
				var id, y, z int64
				var x string
				if err := rows.Scan(&id, &x, &y, &z); err != nil {
					b.Fatal(err)
				}
				ids = append(ids, id)
				page = append(page, map[string]any{"id": id, "x": x, "y": y, "z": z})
			}
			rows.Close()
			if len(ids) == 0 {
				break
			}
			body, _ := json.Marshal(map[string]any{"job": "naive", "item": fmt.Sprintf("9.%d.0", t), "rows": page})
			resp, err := http.Post(target, "application/json", bytes.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			resp.Body.Close()
			for _, id := range ids {
				if _, err := db.ExecContext(ctx, fmt.Sprintf("UPDATE bill_%d SET status = 2 WHERE id = %s", t, ph), id); err != nil {
					b.Fatal(err)
				}
				done++
				if done == limit {
					break
				}
			}
		}
	}
	return time.Since(start).Seconds()
}

// limitLoop is the ceiling: the database setting rows with nothing else to do.
func limitLoop(b *testing.B, db *sql.DB, engine string, tables int) float64 {
	ctx := context.Background()
	start := time.Now()
	for t := range tables {
		q := fmt.Sprintf("UPDATE bill_%d SET status = 2 WHERE status = 1 LIMIT 1000", t)
		if engine == "postgres" {
			q = fmt.Sprintf("UPDATE bill_%d SET status = 2 WHERE id IN (SELECT id FROM bill_%d WHERE status = 1 LIMIT 1000)", t, t)
		}
		for {
			res, err := db.ExecContext(ctx, q)
			if err != nil {
				b.Fatal(err)
			}
			if n, _ := res.RowsAffected(); n == 0 {
				break
			}
		}
	}
	return time.Since(start).Seconds()
}
