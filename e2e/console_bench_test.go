package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/client"
	"github.com/ontimehq/ontime/internal/router"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/store/sqlstore"
	"github.com/ontimehq/ontime/internal/task"
	"github.com/ontimehq/ontime/internal/testdb"
)

// BenchmarkConsolePages (issue 26, performance): every console page asked
// of an `ontime serve` over ONTIME_BENCH_ROWS task rows (default
// 1,000,000) in 200 topics, on ONTIME_BENCH_ENGINE (sqlite, the default,
// or postgres). It reports each page's p50 and p99 over
// ONTIME_BENCH_REQUESTS sequential requests (default 40), and what one
// open overview costs the node: CPU per live refresh (the htmx poll of
// the page's live block and the charts' series, every 2 s), and the
// node's CPU while one browser polls against while none does (the
// background topic counts run only while asked).
//
//	ONTIME_BENCH_ROWS=10000000 go test ./e2e -run '^$' -bench ConsolePages -benchtime 1x -timeout 2h -v
//	ONTIME_BENCH_ENGINE=postgres ONTIME_BENCH_ROWS=10000000 go test ./e2e -run '^$' -bench ConsolePages -benchtime 1x -timeout 2h -v
//
// ONTIME_BENCH_DSN reuses a database (an SQLite file path, a PostgreSQL
// URL) filled by an earlier run with the same row count, so a change can
// be measured without filling again; without it the database is fresh
// and dropped afterwards.
//
// The fill is quick because it is mostly SQL: 20,000 keyed tasks are
// inserted through the store (its own IDs, hashes, segments and row
// layout), then each task table copies its own rows under other IDs
// (INSERT … SELECT): an ID's first 10 characters are its time, the other
// 16 its shard hash and random bits, so a new time prefix makes a new
// valid ID in the same table and segment. Copies are pending (due over
// the next week, from an hour ahead, so the node delivers nothing during
// the run), done, dead (two error messages) or cancelled.
func BenchmarkConsolePages(b *testing.B) {
	engine := envOr("ONTIME_BENCH_ENGINE", "sqlite")
	rows := envInt("ONTIME_BENCH_ROWS", 1_000_000)
	requests := envInt("ONTIME_BENCH_REQUESTS", 40)
	const tables, segments, topics = 16, 4, 200
	dsn := os.Getenv("ONTIME_BENCH_DSN")
	if dsn == "" {
		dsn = testdb.DSNs(b, engine, 1)[0]
	}
	ctx := context.Background()
	start := time.Now()
	n, sample := fillConsoleBench(b, engine, dsn, tables, segments, topics, rows)
	b.Logf("store: %s, %d task rows in %d topics, %d tables × %d segments (filled or found in %s)", engine, n, topics, tables, segments, time.Since(start).Round(time.Second))

	dir := b.TempDir()
	cfg := filepath.Join(dir, "ontime.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`data_dir: %s
log_level: warn
store:
  driver: %s
  databases: [%q]
  tables: %d
  segments: %d
retention:
  done: 8760h
  cancelled: 8760h
  dead: 8760h
`, filepath.Join(dir, "data"), engine, dsn, tables, segments)), 0o644); err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	p := spawnServe(b, cfg, addr)
	base := "http://" + addr
	c, err := client.New(base)
	if err != nil {
		b.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Minute); c.Health(ctx) != nil; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("ontime serve not ready:\n%s", p.log())
		}
	}
	pid := p.cmd.Process.Pid

	time.Sleep(3 * time.Second)

	// The first answer waits for the first count; then the pages.
	t0 := time.Now()
	hc := &http.Client{Timeout: 5 * time.Minute}
	resp, err := hc.Get(base + "/v1/topics")
	if err != nil {
		b.Fatal(err)
	}
	var tl apiv1.TopicList
	err = json.NewDecoder(resp.Body).Decode(&tl)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("GET /v1/topics: %d %v", resp.StatusCode, err)
	}
	b.Logf("first GET /v1/topics (waits for the first count): %s, %d topics", time.Since(t0).Round(time.Millisecond), len(tl.Topics))
	get := func(path string, hx bool) (time.Duration, string) {
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		if hx {
			req.Header.Set("HX-Request", "true")
			req.Header.Set("HX-Target", "live")
		}
		t0 := time.Now()
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatalf("GET %s: %v", path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		d := time.Since(t0)
		if resp.StatusCode != 200 {
			b.Fatalf("GET %s: %d %.300s", path, resp.StatusCode, body)
		}
		return d, string(body)
	}
	_, tasksPage := get("/ui/tasks", false)
	cursor := ""
	if i := strings.Index(tasksPage, "cursor="); i >= 0 {
		rest := tasksPage[i+len("cursor="):]
		cursor = rest[:strings.IndexAny(rest, `"&`)]
		cursor, _ = url.QueryUnescape(strings.ReplaceAll(cursor, "&amp;", "&"))
	}
	topic := fmt.Sprintf("bench.t%03d", 7)
	day := time.Now().Add(48 * time.Hour).UTC()
	pages := []struct {
		name, path string
		hx         bool
	}{
		{"overview", "/ui/", false},
		{"overview live block (htmx)", "/ui/", true},
		{"overview series (charts)", "/ui/overview/series", false},
		{"coming up 1h", "/ui/upcoming?range=1h", false},
		{"coming up 6h", "/ui/upcoming?range=6h", false},
		{"coming up 24h", "/ui/upcoming?range=24h", false},
		{"coming up 7d", "/ui/upcoming?range=7d", false},
		{"tasks", "/ui/tasks", false},
		{"tasks, next page", "/ui/tasks?cursor=" + url.QueryEscape(cursor), false},
		{"tasks of a topic", "/ui/tasks?topic=" + topic, false},
		{"tasks of a topic, pending", "/ui/tasks?topic=" + topic + "&status=pending", false},
		{"tasks, dead", "/ui/tasks?status=dead", false},
		{"tasks due in an hour's range", "/ui/tasks?due_after=" + day.Format("2006-01-02T15:04") + "&due_before=" + day.Add(time.Hour).Format("2006-01-02T15:04"), false},
		{"tasks of a topic due in a range", "/ui/tasks?topic=" + topic + "&due_after=" + day.Format("2006-01-02T15:04") + "&due_before=" + day.Add(time.Hour).Format("2006-01-02T15:04"), false},
		{"task by key", "/ui/tasks?topic=" + url.QueryEscape(sample.Topic) + "&key=" + url.QueryEscape(sample.Key), false},
		{"task detail", "/ui/tasks/" + sample.ID, false},
		{"dead letters", "/ui/dead", false},
		{"dead letters of a topic", "/ui/dead?topic=" + topic, false},
		{"topics", "/ui/topics", false},
		{"topics live block (htmx)", "/ui/topics", true},
		{"schedules", "/ui/schedules", false},
		{"scan jobs", "/ui/jobs", false},
		{"cluster", "/ui/cluster", false},
	}
	b.ResetTimer()
	for b.Loop() {
		b.Logf("%-34s %10s %10s %10s", "page", "p50", "p99", "max")
		for _, pg := range pages {
			// Coming up counts beside the views: wait for its first count.
			for t0 := time.Now(); ; time.Sleep(time.Second) {
				if _, body := get(pg.path, pg.hx); !strings.Contains(body, `class="muted counting"`) {
					if d := time.Since(t0); d > time.Second {
						b.Logf("%s: first count %s", pg.name, d.Round(time.Second))
					}
					break
				}
				if time.Since(t0) > 10*time.Minute {
					b.Fatalf("%s: never counted", pg.name)
				}
			}
			ds := make([]time.Duration, requests)
			for i := range ds {
				ds[i], _ = get(pg.path, pg.hx)
			}
			slices.Sort(ds)
			p50, p99 := ds[len(ds)/2], ds[min(len(ds)-1, len(ds)*99/100)]
			b.Logf("%-34s %10s %10s %10s", pg.name, msf(p50), msf(p99), msf(ds[len(ds)-1]))
			b.ReportMetric(float64(p99.Microseconds())/1000, "ms-p99/"+strings.NewReplacer(" ", "_", ",", "", "(", "", ")", "").Replace(pg.name))
		}
	}
	b.StopTimer()

	// One open overview: its live refresh (both requests) back to back,
	// node CPU per refresh.
	const refreshes = 100
	perRefresh := cpuOver(b, pid, 0, func() {
		for range refreshes {
			get("/ui/", true)
			get("/ui/overview/series", false)
		}
	})
	// One browser polling every 2 s against nobody: what the node spends,
	// background counts included. The node is not idle without it (the
	// fill's tasks fall due and are delivered, leases renew), and what it
	// does drifts, so 10 s idle and 10 s polled alternate four times.
	var idleCPU, polling cpuUse
	for range 4 {
		i := cpuOver(b, pid, 10*time.Second, nil)
		p := cpuOver(b, pid, 0, func() {
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Second) {
				get("/ui/", true)
				get("/ui/overview/series", false)
			}
		})
		idleCPU.cpu, idleCPU.wall = idleCPU.cpu+i.cpu, idleCPU.wall+i.wall
		polling.cpu, polling.wall = polling.cpu+p.cpu, polling.wall+p.wall
	}
	idleCPU.pct = 100 * idleCPU.cpu.Seconds() / idleCPU.wall.Seconds()
	polling.pct = 100 * polling.cpu.Seconds() / polling.wall.Seconds()
	b.Logf("node CPU: idle %.2f%% of a core; one overview refresh %.2f ms CPU (%.2f%% of a core at one refresh per 2 s); one browser polling the overview %.2f%% of a core (background counts included)",
		idleCPU.pct, perRefresh.cpu.Seconds()*1000/refreshes, perRefresh.cpu.Seconds()*1000/refreshes/2000*100, polling.pct)
	b.ReportMetric(perRefresh.cpu.Seconds()*1000/refreshes, "ms-cpu/refresh")
	b.ReportMetric(polling.pct-idleCPU.pct, "pct-core/browser")
}

func msf(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

type cpuUse struct {
	cpu  time.Duration
	wall time.Duration
	pct  float64 // of one core
}

// cpuOver measures process pid's CPU (user + system, /proc/PID/stat) over
// d, or while work runs when work is given.
func cpuOver(b testing.TB, pid int, d time.Duration, work func()) cpuUse {
	b.Helper()
	c0, t0 := procCPU(b, pid), time.Now()
	if work != nil {
		work()
	} else {
		time.Sleep(d)
	}
	u := cpuUse{cpu: procCPU(b, pid) - c0, wall: time.Since(t0)}
	u.pct = 100 * u.cpu.Seconds() / u.wall.Seconds()
	return u
}

func procCPU(b testing.TB, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the command's closing parenthesis: utime and stime are
	// the 14th and 15th of the line, in clock ticks (100 per second).
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// consoleBenchBase is how many tasks the store inserts itself; the rest
// are copies.
const consoleBenchBase = 20_000

// fillConsoleBench fills the store at dsn to at least rows task rows
// unless it holds some already; it returns how many it holds and a keyed
// task to look up.
func fillConsoleBench(b *testing.B, engine, dsn string, tables, segments, topics, rows int) (int64, *task.Task) {
	b.Helper()
	ctx := context.Background()
	st, err := sqlstore.Open(ctx, sqlstore.Config{Driver: engine, DSNs: []string{dsn}, Tables: tables, Segments: segments})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	driver := map[string]string{"sqlite": "sqlite", "postgres": "pgx"}[engine]
	if driver == "" {
		b.Fatalf("ONTIME_BENCH_ENGINE=%q: sqlite or postgres", engine)
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	count := func() int64 {
		var total int64
		for t := range tables {
			var n int64
			if err := db.QueryRowContext(ctx, fmt.Sprintf(`SELECT COUNT(*) FROM ontime_tasks_%04d`, t)).Scan(&n); err != nil {
				b.Fatal(err)
			}
			total += n
		}
		return total
	}
	sample := func() *task.Task {
		tk, err := st.GetByKey(ctx, "bench.t007", "bench-7")
		if err != nil {
			b.Fatalf("the sample task: %v", err)
		}
		return tk
	}
	if n := count(); n > 0 {
		return n, sample()
	}

	now := time.Now()
	var batch []store.NewTask
	for i := range consoleBenchBase {
		key := fmt.Sprintf("bench-%d", i)
		due := now.Add(time.Hour + time.Duration(i)*time.Second)
		v, err := task.Validate(task.Spec{Topic: fmt.Sprintf("bench.t%03d", i%topics), Key: key, DueAt: &due,
			Payload: []byte(fmt.Sprintf(`{"order":%d,"reason":"unpaid","lines":[{"sku":"A-%d","qty":2}]}`, i, i)), Target: "http://127.0.0.1:1/hook"}, task.Limits{}, now)
		if err != nil {
			b.Fatal(err)
		}
		id, pl := router.NewID(now, router.HashKey(key), true)
		batch = append(batch, store.NewTask{ID: id, ShardHash: pl.ShardHash, Seg: pl.Segment(segments), Validated: v})
		if len(batch) == 500 || i == consoleBenchBase-1 {
			if _, err := st.Insert(ctx, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}

	// The copies' time prefixes, one per copy k, each with its status.
	if _, err := db.ExecContext(ctx, `CREATE TABLE ontime_bench_prefix (k INTEGER NOT NULL PRIMARY KEY, prefix VARCHAR(10) NOT NULL,
		status INTEGER NOT NULL, attempts INTEGER NOT NULL, due0 BIGINT NOT NULL, sign INTEGER NOT NULL, created BIGINT NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	copies := (rows+consoleBenchBase-1)/consoleBenchBase - 1
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	ins := `INSERT INTO ontime_bench_prefix (k, prefix, status, attempts, due0, sign, created) VALUES (?, ?, ?, ?, ?, ?, ?)`
	if engine == "postgres" {
		ins = `INSERT INTO ontime_bench_prefix (k, prefix, status, attempts, due0, sign, created) VALUES ($1, $2, $3, $4, $5, $6, $7)`
	}
	for k := 1; k <= copies; k++ {
		// IDs of copies made earlier than the base, a second apart: each
		// copy sorts before the next-created one, as real IDs do.
		at := now.Add(-time.Duration(copies-k+1) * time.Second)
		id, _ := router.NewID(at, 0, false)
		status, attempts, due0, sign := task.StatusDone, 1, now.Add(-time.Minute), -1
		switch k % 20 {
		case 10, 11, 12, 13, 14, 15, 16:
			status, attempts, due0, sign = task.StatusPending, 0, now.Add(time.Hour), 1
		case 17:
			status, attempts = task.StatusDead, 3
		case 18:
			status, attempts = task.StatusCancelled, 0
		}
		if _, err := tx.ExecContext(ctx, ins, k, id[:10], int(status), attempts, due0.UnixMicro(), sign, at.UnixMicro()); err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	const dueExpr = `p.due0 + p.sign * (((b.shard_hash + p.k * 7919) %% 604800) * 1000000)`
	const chunk = 20
	for k := 1; k <= copies; k += chunk {
		for t := range tables {
			name := fmt.Sprintf("ontime_tasks_%04d", t)
			q := `INSERT INTO ` + name + ` (id, topic, task_key, shard_hash, seg, due_at, first_due_at, payload, target, max_attempts, attempts, status,
				last_error, created_at, updated_at, owner, lease_until, token, traceparent, moved_by)
				SELECT p.prefix || substr(b.id, 11), b.topic, NULL, b.shard_hash, b.seg, ` + dueExpr + `, ` + dueExpr + `, b.payload, b.target, b.max_attempts, p.attempts, p.status,
				CASE WHEN p.status = 4 THEN (CASE WHEN b.seg %% 2 = 0 THEN 'HTTP 503: Service Unavailable' ELSE 'dial tcp 127.0.0.1:1: connect: connection refused' END) ELSE '' END,
				p.created, CASE WHEN p.status = 0 THEN p.created ELSE ` + dueExpr + ` END, NULL, 0, 0, '', 0
				FROM ` + name + ` b CROSS JOIN ontime_bench_prefix p WHERE b.task_key IS NOT NULL AND p.k >= %d AND p.k < %d`
			if _, err := db.ExecContext(ctx, fmt.Sprintf(q, k, k+chunk)); err != nil {
				b.Fatal(err)
			}
		}
		if k%200 == 1 {
			b.Logf("fill: %d of %d copies", k+chunk-1, copies)
		}
	}
	if engine == "postgres" {
		// What autovacuum does to a table this size soon after: without
		// the visibility map no index-only scan is cheap, and the planner
		// walks the primary key instead of the (status, id) index.
		if _, err := db.ExecContext(ctx, `VACUUM ANALYZE`); err != nil {
			b.Fatal(err)
		}
	} else if _, err := db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		b.Fatal(err)
	}
	return count(), sample()
}
