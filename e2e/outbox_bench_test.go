package e2e

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/internal/testdb"
	"github.com/ontimehq/ontime/outbox"
)

// Benchmarks of the transactional outbox (issue 28's Performance section;
// figures and commands in BENCHMARKS.md):
//
//	go test ./e2e -run '^$' -bench 'BenchmarkOutbox' -benchtime=2s
//
// BenchmarkOutboxTxCost: one user's transaction — BEGIN, INSERT the user
// row, (outbox.Put), COMMIT — with and without the Put; ns/op of each, the
// ratio is put/plain.
func BenchmarkOutboxTxCost(b *testing.B) {
	for _, engine := range []string{"mysql", "postgres"} {
		b.Run(engine, func(b *testing.B) {
			app := newOutboxApp(b, engine)
			ph := "?"
			if engine == "postgres" {
				ph = "$1"
			}
			ctx := context.Background()
			for _, withPut := range []bool{false, true} {
				name := "plain"
				if withPut {
					name = "put"
				}
				b.Run(name, func(b *testing.B) {
					for i := range b.N {
						tx, err := app.db.BeginTx(ctx, nil)
						if err != nil {
							b.Fatal(err)
						}
						acct := fmt.Sprintf("acct-%d", i)
						if _, err := tx.ExecContext(ctx, "INSERT INTO users (account_no) VALUES ("+ph+")", acct); err != nil {
							b.Fatal(err)
						}
						if withPut {
							if err := outbox.Put(ctx, tx, app.tb, outbox.Message{Topic: "user.registered", Key: acct,
								Payload: json.RawMessage(`{"account_no":"` + acct + `"}`), Target: "https://coupons.example/grant"}); err != nil {
								b.Fatal(err)
							}
						}
						if err := tx.Commit(); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}

// BenchmarkOutboxRelay: messages/s relayed from 16 outbox tables into the
// node's task store (same engine), tasks due in an hour (so the figure is
// the relay's, not the deliveries'); against a raw loop in the same run:
// INSERT INTO sink SELECT … LIMIT batch + DELETE of those ids, table after
// table — the least any relay must do. Keyless messages (each finished as
// soon as its task exists). Size: ONTIME_OUTBOX_BENCH_ROWS per table
// (default 2,000).
func BenchmarkOutboxRelay(b *testing.B) {
	for _, engine := range []string{"mysql", "postgres"} {
		b.Run(engine, func(b *testing.B) { benchOutboxRelay(b, engine) })
	}
}

const benchTables = 16

func fillOutboxes(b *testing.B, db *sql.DB, d outbox.Dialect, rows int) {
	ctx := context.Background()
	for t := range benchTables {
		tb := outbox.Table{Name: fmt.Sprintf("outbox_%d", t), Dialect: d}
		for done := 0; done < rows; done += outbox.MaxBatch {
			n := min(outbox.MaxBatch, rows-done)
			msgs := make([]outbox.Message, n)
			for i := range msgs {
				// Keyless: a keyed message stays in flight until its task
				// ends (an hour here) and holds back its key's next one.
				msgs[i] = outbox.Message{Topic: "user.registered",
					Payload: json.RawMessage(`{"coupon":"WELCOME10"}`), Target: "https://coupons.example/grant", Delay: time.Hour}
			}
			if err := outbox.PutMany(ctx, db, tb, msgs...); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func benchOutboxRelay(b *testing.B, engine string) {
	rows := envInt("ONTIME_OUTBOX_BENCH_ROWS", 2000)
	total := benchTables * rows
	dsn := testdb.DSNs(b, engine, 1)[0]
	db := sqlOpen(b, engine, dsn)
	d := outbox.Dialect(engine)
	for t := range benchTables {
		ddl, err := outbox.DDL(d, fmt.Sprintf("outbox_%d", t))
		if err != nil {
			b.Fatal(err)
		}
		for _, s := range ddl {
			if _, err := db.Exec(s); err != nil {
				b.Fatal(err)
			}
		}
	}
	sinkDDL := `CREATE TABLE sink (id BIGINT NOT NULL, topic VARCHAR(64) NOT NULL, msg_key VARCHAR(128) NOT NULL, payload BLOB NOT NULL, target VARCHAR(2048) NOT NULL, due_at BIGINT NOT NULL)`
	if engine == "postgres" {
		sinkDDL = `CREATE TABLE sink (id BIGINT NOT NULL, topic VARCHAR(64) NOT NULL, msg_key VARCHAR(128) NOT NULL, payload BYTEA NOT NULL, target VARCHAR(2048) NOT NULL, due_at BIGINT NOT NULL)`
	}
	if _, err := db.Exec(sinkDDL); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var relayRate, rawRate float64
	for range b.N {
		// The raw loop.
		fillOutboxes(b, db, d, rows)
		start := time.Now()
		for t := range benchTables {
			q := outbox.Quote(fmt.Sprintf("outbox_%d", t), d)
			for {
				var maxID sql.NullInt64
				if err := db.QueryRowContext(ctx, fmt.Sprintf(`SELECT MAX(id) FROM (SELECT id FROM %s ORDER BY id LIMIT 500) s`, q)).Scan(&maxID); err != nil {
					b.Fatal(err)
				}
				if !maxID.Valid {
					break
				}
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := tx.ExecContext(ctx, fmt.Sprintf(`INSERT INTO sink SELECT id, topic, msg_key, payload, target, due_at FROM %s WHERE id <= %d`, q, maxID.Int64)); err != nil {
					b.Fatal(err)
				}
				if _, err := tx.ExecContext(ctx, fmt.Sprintf(`DELETE FROM %s WHERE id <= %d`, q, maxID.Int64)); err != nil {
					b.Fatal(err)
				}
				if err := tx.Commit(); err != nil {
					b.Fatal(err)
				}
			}
		}
		rawRate = float64(total) / time.Since(start).Seconds()

		// The relay.
		fillOutboxes(b, db, d, rows)
		cfg := ontime.DefaultConfig()
		cfg.DataDir = b.TempDir()
		cfg.Store.Driver = engine
		cfg.Store.Databases = testdb.DSNs(b, engine, 1)
		cfg.Outboxes = []ontime.OutboxConfig{{Name: "bench", Driver: engine, Databases: []string{dsn}, Table: "outbox_{table}",
			Tables: benchTables, Batch: 1000}}
		start = time.Now()
		node, err := ontime.NewNode(ctx, cfg)
		if err != nil {
			b.Fatal(err)
		}
		if err := node.Start(ctx); err != nil {
			b.Fatal(err)
		}
		for {
			left := 0
			for t := range benchTables {
				var n int
				if err := db.QueryRow(fmt.Sprintf("SELECT COUNT(*) FROM outbox_%d WHERE status = 0", t)).Scan(&n); err != nil {
					b.Fatal(err)
				}
				left += n
			}
			if left == 0 {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		relayRate = float64(total) / time.Since(start).Seconds()
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_ = node.Stop(sctx)
		cancel()
		for t := range benchTables {
			if _, err := db.Exec(fmt.Sprintf("DELETE FROM outbox_%d", t)); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(relayRate, "relayed/s")
	b.ReportMetric(rawRate, "raw/s")
	b.ReportMetric(relayRate/rawRate, "relay/raw")
}

// BenchmarkOutboxLatency: commit → delivery at ONTIME_OUTBOX_BENCH_RATE
// messages/s (default 1,000) for ONTIME_OUTBOX_BENCH_SECONDS (default 5):
// a writer per message (16 at once at most) commits its message (keys
// spread over 1,000), the receiver notes the arrival; p50 and p99 over first
// deliveries. PostgreSQL wakes the relay by NOTIFY, MariaDB by polls
// alone (idle_poll 100ms, faster while busy). Also the relay's idle cost:
// passes/s over the 2 s after the load, when nothing is written.
func BenchmarkOutboxLatency(b *testing.B) {
	for _, engine := range []string{"postgres", "mysql"} {
		b.Run(engine, func(b *testing.B) { benchOutboxLatency(b, engine) })
	}
}

func benchOutboxLatency(b *testing.B, engine string) {
	rate := envInt("ONTIME_OUTBOX_BENCH_RATE", 1000)
	secs := envInt("ONTIME_OUTBOX_BENCH_SECONDS", 5)
	app := newOutboxApp(b, engine)
	// The writers share 16 connections: the servers' connection limits
	// are shared with every other test of the machine.
	app.db.SetMaxOpenConns(16)
	var mu sync.Mutex
	var lat []time.Duration
	seen := map[string]bool{}
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var env struct {
			Key     string `json:"key"`
			Payload struct {
				At int64 `json:"at"`
			} `json:"payload"`
		}
		_ = json.NewDecoder(r.Body).Decode(&env)
		mu.Lock()
		if !seen[env.Key] {
			seen[env.Key] = true
			lat = append(lat, time.Since(time.Unix(0, env.Payload.At)))
		}
		mu.Unlock()
	}))
	defer rcv.Close()
	cfg := ontime.DefaultConfig()
	cfg.DataDir = b.TempDir()
	cfg.Store.Driver = engine
	cfg.Store.Databases = testdb.DSNs(b, engine, 1)
	oc := outboxConfig(engine, app.dsn)
	oc.IdlePoll = ontime.Duration(100 * time.Millisecond)
	oc.Segments = 4
	cfg.Outboxes = []ontime.OutboxConfig{oc}
	node := outboxNode(b, cfg)
	api := httptest.NewServer(node.HTTPHandler())
	defer api.Close()
	ctx := context.Background()
	total := 0
	for range b.N {
		n := rate * secs
		tick := time.NewTicker(time.Second / time.Duration(rate))
		var wg sync.WaitGroup
		sem := make(chan struct{}, 16)
		for i := range n {
			<-tick.C
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				key := fmt.Sprintf("acct-%d", i%1000)
				tx, err := app.db.BeginTx(ctx, nil)
				if err != nil {
					b.Error(err)
					return
				}
				defer tx.Rollback()
				p := fmt.Sprintf(`{"at":%d}`, time.Now().UnixNano())
				if err := outbox.Put(ctx, tx, app.tb, outbox.Message{Topic: "user.registered", Key: key, Payload: json.RawMessage(p), Target: rcv.URL}); err != nil {
					b.Error(err)
					return
				}
				// The payload's time is taken before the commit: the
				// latency includes the commit itself.
				if err := tx.Commit(); err != nil {
					b.Error(err)
				}
			}()
		}
		tick.Stop()
		wg.Wait()
		total += n
		deadline := time.Now().Add(5 * time.Minute)
		for {
			mu.Lock()
			got := len(lat)
			mu.Unlock()
			if got >= total || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	idle0 := counterSum(b, api.URL, "ontime_outbox_passes_total")
	time.Sleep(2 * time.Second)
	idle := (counterSum(b, api.URL, "ontime_outbox_passes_total") - idle0) / 2
	mu.Lock()
	defer mu.Unlock()
	if len(lat) < total {
		b.Fatalf("%d of %d messages delivered", len(lat), total)
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(idle, "idle-passes/s")
}

// counterSum adds every series of a metric (any labels) on the node.
func counterSum(b testing.TB, base, name string) float64 {
	b.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		if f, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64); err == nil {
			sum += f
		}
	}
	return sum
}
