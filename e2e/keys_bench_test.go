package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/internal/retain"
	"github.com/ontimehq/ontime/internal/store/sqlstore"
	"github.com/ontimehq/ontime/internal/testdb"
)

// Benchmarks of issue 13 (keys, retention). Run with -benchtime=1x:
//
//	ONTIME_BENCH_KEY_ROWS=10000000 go test ./e2e -run '^$' -bench 'ByKey' -benchtime=1x -timeout 60m
//	go test ./e2e -run '^$' -bench 'Cleaner|SteadyWithCleaner' -benchtime=1x
//
// The large tables are filled by SQL inside the database (generate_series,
// a recursive CTE, MariaDB's sequence engine): filler rows are spread
// evenly over the task tables, half pending a year ahead and half done,
// with keys that are never addressed; the keys the benchmark addresses are
// submitted through the node, so they sit where their hash routes them.

// keyNode starts a node on a fresh database of engine (one database, 16
// tables, 4 segments: the defaults); mod adjusts the config.
func keyNode(b *testing.B, engine string, mod func(*ontime.Config)) *ontime.Node {
	cfg := ontime.DefaultConfig()
	cfg.DataDir = b.TempDir()
	cfg.Store.Driver = engine
	if engine != "sqlite" {
		cfg.Store.Databases = testdb.DSNs(b, engine, 1)
	}
	if mod != nil {
		mod(&cfg)
	}
	return runBenchNode(b, cfg)
}

// rawDB opens the node's first database with database/sql.
func rawDB(b *testing.B, cfg ontime.Config) *sql.DB {
	driver, dsn := cfg.Store.Driver, cfg.Store.Databases[0]
	switch driver {
	case "postgres":
		driver = "pgx"
	case "sqlite":
		dsn = "file:" + dsn + "?_pragma=busy_timeout(60000)"
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		b.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	b.Cleanup(func() { db.Close() })
	return db
}

// fill writes rows filler rows into the node's tables: pending a year
// ahead when pendingPct > g%100, else status st ended at ended.
func fill(b *testing.B, node *ontime.Node, rows int, st int, ended time.Time) {
	cfg := node.Config()
	db := rawDB(b, cfg)
	ctx := context.Background()
	per := rows / cfg.Store.Tables
	far := time.Now().Add(365 * 24 * time.Hour).UnixMicro()
	end := ended.UnixMicro()
	t0 := time.Now()
	const chunk = 250000
	for tb := range cfg.Store.Tables {
		t := fmt.Sprintf("ontime_tasks_%04d", tb)
		for lo := 1; lo <= per; lo += chunk {
			hi := min(lo+chunk-1, per)
			// g is unique across tables: table·10^9 + n.
			var q string
			sel := func(g, idExpr, keyExpr string) string {
				return fmt.Sprintf(`SELECT %s, 'bench.fill', %s, 0, %s %% %d, %d, X'6e756c6c', '', 25, 0,
					CASE WHEN %s %% 2 = 0 THEN 0 ELSE %d END, '', %d, %d, NULL, 0, 0`,
					idExpr, keyExpr, g, cfg.Store.Segments, far, g, st, end, end)
			}
			base := tb * 1_000_000_000
			switch cfg.Store.Driver {
			case "postgres":
				q = `INSERT INTO ` + t + ` (id, topic, task_key, shard_hash, seg, due_at, payload, target, max_attempts, attempts, status, last_error, created_at, updated_at, owner, lease_until, token) ` +
					sel("g", "'f' || lpad(g::text, 25, '0')", "'fill-' || g") + fmt.Sprintf(` FROM generate_series(%d, %d) g`, base+lo, base+hi)
				q = stringsReplaceBlob(q, `X'6e756c6c'`, `'\x6e756c6c'::bytea`)
			case "sqlite":
				q = fmt.Sprintf(`INSERT INTO `+t+` (id, topic, task_key, shard_hash, seg, due_at, payload, target, max_attempts, attempts, status, last_error, created_at, updated_at, owner, lease_until, token)
					WITH RECURSIVE c(g) AS (SELECT %d UNION ALL SELECT g + 1 FROM c WHERE g < %d) `, base+lo, base+hi) +
					sel("g", "printf('f%025d', g)", "'fill-' || g") + ` FROM c`
			case "mysql":
				q = `INSERT INTO ` + t + ` (id, topic, task_key, shard_hash, seg, due_at, payload, target, max_attempts, attempts, status, last_error, created_at, updated_at, owner, lease_until, token) ` +
					sel("(seq + "+strconv.Itoa(base)+")", "CONCAT('f', LPAD(seq + "+strconv.Itoa(base)+", 25, '0'))", "CONCAT('fill-', seq + "+strconv.Itoa(base)+")") +
					fmt.Sprintf(` FROM seq_%d_to_%d`, lo, hi)
			}
			if _, err := db.ExecContext(ctx, q); err != nil {
				b.Fatalf("fill %s: %v", t, err)
			}
		}
	}
	analyze := map[string]string{"sqlite": "ANALYZE", "postgres": "ANALYZE", "mysql": ""}[cfg.Store.Driver]
	if analyze != "" {
		if _, err := db.ExecContext(ctx, analyze); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("filled %d rows in %s", per*cfg.Store.Tables, time.Since(t0).Round(time.Second))
}

func stringsReplaceBlob(q, from, to string) string {
	return string(bytes.ReplaceAll([]byte(q), []byte(from), []byte(to)))
}

func benchRows() int {
	if v, err := strconv.Atoi(os.Getenv("ONTIME_BENCH_KEY_ROWS")); err == nil && v > 0 {
		return v
	}
	return 1_000_000
}

// BenchmarkByKey: GET, PATCH and DELETE by key over HTTP (16 clients),
// and GET by ID as the baseline of the same run, on a store holding only
// the 20,000 addressed tasks ("rows=0") and on one that also holds
// ONTIME_BENCH_KEY_ROWS filler rows (default 1,000,000): the by-key routes
// cost what the lookup by primary key costs, whatever the table size.
func BenchmarkByKey(b *testing.B) {
	for _, engine := range testdb.Engines {
		for _, rows := range []int{0, benchRows()} {
			b.Run(fmt.Sprintf("%s/rows=%d", engine, rows), func(b *testing.B) { benchByKey(b, engine, rows) })
		}
	}
}

func benchByKey(b *testing.B, engine string, rows int) {
	{
		{
			for range b.N {
				node := keyNode(b, engine, nil)
				if rows > 0 {
					fill(b, node, rows, 3, time.Now())
				}
				ctx := context.Background()
				const keys = 20000
				due := time.Now().Add(time.Hour)
				ids := make([]string, keys)
				for i := 0; i < keys; i += 1000 {
					specs := make([]ontime.TaskSpec, 1000)
					for j := range specs {
						specs[j] = ontime.TaskSpec{Topic: "bench.key", Key: fmt.Sprintf("order-%d", i+j), DueAt: due, Payload: []byte(`{"v":1}`)}
					}
					res, err := node.SubmitBatch(ctx, specs)
					if err != nil {
						b.Fatal(err)
					}
					for j, r := range res {
						ids[i+j] = r.Task.ID
					}
				}
				srv := httptest.NewServer(node.HTTPHandler())
				b.Cleanup(srv.Close)
				perm := rand.Perm(keys)
				for _, op := range []string{"GETID", "GET", "PATCH", "DELETE"} {
					lat := make([]time.Duration, keys)
					var wg sync.WaitGroup
					const clients = 16
					hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
					t0 := time.Now()
					for c := range clients {
						wg.Add(1)
						go func() {
							defer wg.Done()
							for i := c; i < keys; i += clients {
								k := fmt.Sprintf("order-%d", perm[i])
								var body *bytes.Reader
								if op == "PATCH" {
									body = bytes.NewReader([]byte(`{"delay":"2h","payload":{"v":2}}`))
								} else {
									body = bytes.NewReader(nil)
								}
								u, method := srv.URL+"/v1/topics/bench.key/keys/"+url.PathEscape(k), op
								if op == "GETID" {
									u, method = srv.URL+"/v1/tasks/"+ids[perm[i]], "GET"
								}
								req, _ := http.NewRequest(method, u, body)
								s := time.Now()
								resp, err := hc.Do(req)
								if err != nil {
									b.Error(err)
									return
								}
								resp.Body.Close()
								lat[i] = time.Since(s)
								if resp.StatusCode != 200 {
									b.Errorf("%s %s: HTTP %d", op, k, resp.StatusCode)
									return
								}
							}
						}()
					}
					wg.Wait()
					el := time.Since(t0)
					slices.Sort(lat)
					b.ReportMetric(float64(keys)/el.Seconds(), op+"_req/s")
					b.ReportMetric(float64(pct(lat, 0.99).Microseconds())/1000, op+"_p99_ms")
				}
			}
		}
	}
}

// BenchmarkCleaner: rows deleted per second by a retention pass over
// every item, with ONTIME_BENCH_KEY_ROWS filler rows of which half are
// done and expired (the cleaner's rests between batches included).
func BenchmarkCleaner(b *testing.B) {
	rows := benchRows()
	for _, engine := range []string{"sqlite", "postgres", "mysql"} {
		b.Run(engine, func(b *testing.B) {
			for range b.N {
				// The node's own cleaner keeps the rows (100h): only the
				// pass below deletes them.
				node := keyNode(b, engine, func(cfg *ontime.Config) { cfg.Retention.Done = ontime.Duration(100 * time.Hour) })
				fill(b, node, rows, 3, time.Now().Add(-48*time.Hour))
				cfg := node.Config()
				st, err := sqlstore.Open(context.Background(), sqlstore.Config{Driver: cfg.Store.Driver, DSNs: cfg.Store.Databases,
					Tables: cfg.Store.Tables, Segments: cfg.Store.Segments})
				if err != nil {
					b.Fatal(err)
				}
				c, err := retain.New(retain.Config{Store: st, Items: st.Items, Done: 24 * time.Hour, Cancelled: 24 * time.Hour, Dead: 24 * time.Hour})
				if err != nil {
					b.Fatal(err)
				}
				t0 := time.Now()
				n, err := c.Pass(context.Background())
				el := time.Since(t0)
				st.Close()
				if err != nil {
					b.Fatal(err)
				}
				if n != int64(rows/2) {
					b.Fatalf("deleted %d rows, want %d", n, rows/2)
				}
				b.ReportMetric(float64(n)/el.Seconds(), "deleted/s")
				b.ReportMetric(float64(n), "deleted")
			}
		})
	}
}

// BenchmarkSteadyWithCleaner: 1,000 tasks/s due evenly for 20 s (webhook)
// on SQLite, on a table that starts with ONTIME_BENCH_KEY_ROWS filler rows
// of which half are done two days ago. "cleaning": retention.done 24h, so
// the cleaner deletes that half throughout the run; "idle": retention.done
// 100h, the same rows stay and the cleaner finds nothing. The lateness
// p99 of the two is the cleaner's cost to delivery.
func BenchmarkSteadyWithCleaner(b *testing.B) {
	rows := benchRows()
	for _, mode := range []string{"idle", "cleaning"} {
		b.Run(mode, func(b *testing.B) {
			for range b.N {
				node := keyNode(b, "sqlite", func(cfg *ontime.Config) {
					cfg.Delivery.Concurrency = 64
					cfg.Retention.Cancelled = ontime.Duration(4 * time.Second) // a pass every second
					cfg.Retention.Done = ontime.Duration(100 * time.Hour)
					if mode == "cleaning" {
						cfg.Retention.Done = ontime.Duration(24 * time.Hour)
					}
				})
				fill(b, node, rows, 3, time.Now().Add(-48*time.Hour))
				rec := &latencyRecorder{seen: map[string]bool{}}
				srv := httptest.NewServer(rec.handler())
				const rate, span = 1000, 20 * time.Second
				n := submitSteady(b, node, srv.URL, rate, span)
				waitSteady(b, rec, n, span, 60*time.Second)
				srv.Close()
				report(b, rec, n)
				cfg := node.Config()
				var left int64
				db := rawDB(b, cfg)
				for tb := range cfg.Store.Tables {
					var c int64
					if err := db.QueryRow(fmt.Sprintf(`SELECT COUNT(*) FROM ontime_tasks_%04d WHERE topic = 'bench.fill'`, tb)).Scan(&c); err != nil {
						b.Fatal(err)
					}
					left += c
				}
				b.ReportMetric(float64(int64(rows)-left), "filler_deleted")
			}
		})
	}
}
