package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/apiv1"
)

// billJob is the bill job of seed 000 over dbs, as the config declares it.
func billJob(name, engine string, dsns []string, tables int, target string) ontime.JobConfig {
	return ontime.JobConfig{
		Name: name, Cron: "@every 1s", Misfire: "fire_once", Overlap: "skip",
		Source: ontime.JobSourceConfig{Driver: engine, Databases: dsns, Table: "bill_{table}", Tables: tables, Segments: 1,
			Key: "id", Columns: []string{"id", "x", "y", "z"}, Where: map[string]any{"status": 1}, Page: 100},
		Process:   ontime.JobProcessConfig{Target: target, Batch: 25, Concurrency: 4},
		OnSuccess: ontime.JobOnSuccessConfig{Set: map[string]any{"status": 2}},
	}
}

// getJSON decodes GET url into v (when 200) and returns the status.
func getJSON(t *testing.T, url string, v any) int {
	t.Helper()
	return callJSON(t, http.MethodGet, url, v)
}

// postJSON decodes an empty POST to url into v (when 200) and returns the status.
func postJSON(t *testing.T, url string, v any) int {
	t.Helper()
	return callJSON(t, http.MethodPost, url, v)
}

func callJSON(t *testing.T, method, url string, v any) int {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK && v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s %s: %v: %s", method, url, err, b)
		}
	}
	return resp.StatusCode
}

// TestJobSQLEveryEngine: one node, the bill job over 2 databases × 3
// tables of each engine: every row reaches status 2 and is delivered
// exactly once (no kill: no duplicate); runs and the index check show in
// the API; the job's routes answer errors as the API does.
func TestJobSQLEveryEngine(t *testing.T) {
	for _, engine := range []string{"sqlite", "mysql", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			const tables, rows = 3, 700
			dbs := []*billDB{newBillDB(t, engine, tables, rows), newBillDB(t, engine, tables, rows)}
			rcv := newJobReceiver(t)
			base, _ := startJobNode(t, func(cfg *ontime.Config) {
				cfg.Jobs = []ontime.JobConfig{billJob("bill-settle", engine, []string{dbs[0].dsn, dbs[1].dsn}, tables, rcv.srv.URL)}
			})
			total := 2 * tables * rows
			rcv.waitRows(t, 60*time.Second, total)
			waitFor(t, 30*time.Second, "every row set to status 2", func() bool {
				return dbs[0].count(t, tables, 2)+dbs[1].count(t, tables, 2) == total
			})
			if n, dups := rcv.delivered(); n != total || dups != 0 {
				t.Fatalf("delivered %d rows (%d duplicates), want %d once each", n, dups, total)
			}
			var v apiv1.JobView
			if code := getJSON(t, base+"/v1/jobs/bill-settle", &v); code != 200 {
				t.Fatalf("GET job: %d", code)
			}
			if v.Kind != "sql" || v.Items != 2*tables || v.Index == nil || !v.Index.OK || v.Index.Plan == "" {
				t.Fatalf("job view: %+v index %+v", v, v.Index)
			}
			// A run records a page after its rows are set, so the last
			// page's count may trail the rows by a moment.
			var processed int64
			waitFor(t, 30*time.Second, "runs to record every row processed", func() bool {
				var runs apiv1.JobRunList
				getJSON(t, base+"/v1/jobs/bill-settle/runs?limit=1000", &runs)
				processed = 0
				for _, r := range runs.Runs {
					processed += r.Processed
					if r.Status != "done" && r.Status != "running" {
						t.Errorf("run %+v", r)
					}
				}
				return processed == int64(total)
			})
			if processed != int64(total) {
				t.Fatalf("runs record %d rows processed, want %d", processed, total)
			}
			var list apiv1.JobList
			getJSON(t, base+"/v1/jobs", &list)
			if len(list.Jobs) != 1 || list.Jobs[0].Name != "bill-settle" {
				t.Fatalf("job list: %+v", list)
			}
			for url, want := range map[string]int{
				base + "/v1/jobs/nope":                        404,
				base + "/v1/jobs/nope/runs":                   404,
				base + "/v1/jobs/bill-settle/runs?limit=0":    400,
				base + "/v1/jobs/bill-settle/runs?item=9.9.9": 400,
				base + "/v1/jobs/bill-settle/runs?bad=1":      400,
				base + "/v1/jobs/bill-settle?x=1":             400,
			} {
				if code := getJSON(t, url, nil); code != want {
					t.Errorf("GET %s: %d, want %d", url, code, want)
				}
			}
			if code := postJSON(t, base+"/v1/jobs/bill-settle:explode", nil); code != 404 {
				t.Errorf(":explode answered %d", code)
			}
		})
	}
}

// TestJobPauseTriggerResume: a paused job runs nothing, even on :trigger;
// resumed, :trigger runs every item at once (the cron here is hourly).
func TestJobPauseTriggerResume(t *testing.T) {
	t.Parallel()
	const tables, rows = 2, 300
	db := newBillDB(t, "sqlite", tables, rows)
	rcv := newJobReceiver(t)
	base, _ := startJobNode(t, func(cfg *ontime.Config) {
		j := billJob("hourly", "sqlite", []string{db.dsn}, tables, rcv.srv.URL)
		j.Cron = "0 0 * * * *"
		cfg.Jobs = []ontime.JobConfig{j}
	})
	var v apiv1.JobView
	if code := postJSON(t, base+"/v1/jobs/hourly:pause", &v); code != 200 || !v.Paused {
		t.Fatalf(":pause: %d %+v", code, v)
	}
	if code := postJSON(t, base+"/v1/jobs/hourly:trigger", &v); code != 200 {
		t.Fatalf(":trigger: %d", code)
	}
	time.Sleep(2 * time.Second) // a paused job must not run: nothing to wait for
	if n, _ := rcv.delivered(); n != 0 {
		t.Fatalf("a paused job delivered %d rows", n)
	}
	if code := postJSON(t, base+"/v1/jobs/hourly:resume", &v); code != 200 || v.Paused {
		t.Fatalf(":resume: %d %+v", code, v)
	}
	postJSON(t, base+"/v1/jobs/hourly:trigger", &v)
	rcv.waitRows(t, 30*time.Second, tables*rows)
	var runs apiv1.JobRunList
	getJSON(t, base+"/v1/jobs/hourly/runs", &runs)
	for _, r := range runs.Runs {
		if r.Trigger != "manual" {
			t.Errorf("run %+v: want trigger manual", r)
		}
	}
}

// TestJobHeadOfLineIsolation (seed 003): the destination fails 10 % of
// the rows; with retry_column/next_column the other 90 % all finish in the
// first run of each item, the failed ones are pushed back, retried, and
// left after max_attempts and reported in the runs.
func TestJobHeadOfLineIsolation(t *testing.T) {
	for _, engine := range []string{"mysql", "postgres", "sqlite"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			const tables, rows = 2, 500
			db := newBillDB(t, engine, tables, rows)
			rcv := newJobReceiver(t)
			rcv.fail = func(item string, id int64) bool { return id%10 == 0 }
			base, _ := startJobNode(t, func(cfg *ontime.Config) {
				j := billJob("hol", engine, []string{db.dsn}, tables, rcv.srv.URL)
				j.Cron = "0 0 * * * *" // runs only on :trigger
				j.Source.Page = 50     // ten pages per table
				j.Source.RetryColumn, j.Source.NextColumn = "retry_count", "next_select_time"
				j.Source.MaxAttempts, j.Source.Backoff = 3, ontime.Duration(200*time.Millisecond)
				cfg.Jobs = []ontime.JobConfig{j}
			})
			postJSON(t, base+"/v1/jobs/hol:trigger", nil)
			good := tables * rows * 9 / 10
			var runs apiv1.JobRunList
			waitFor(t, 30*time.Second, "the first run of each item", func() bool {
				getJSON(t, base+"/v1/jobs/hol/runs", &runs)
				done := 0
				for _, r := range runs.Runs {
					if r.Status == "done" {
						done++
					}
				}
				return done == tables
			})
			// The first run alone: every good row done, every bad one pushed back.
			if got := db.count(t, tables, 2); got != good {
				t.Fatalf("after the first run %d rows have status 2, want %d", got, good)
			}
			for _, r := range runs.Runs {
				if r.Processed != rows*9/10 || r.Failed != rows/10 {
					t.Fatalf("first run %+v: want %d processed, %d failed", r, rows*9/10, rows/10)
				}
			}
			var pushed int
			q := "SELECT COUNT(*) FROM bill_0 WHERE status = 1 AND retry_count = 1 AND next_select_time IS NOT NULL"
			if err := db.db.QueryRow(q).Scan(&pushed); err != nil || pushed != rows/10 {
				t.Fatalf("%s: %d, %v", q, pushed, err)
			}
			// A run right away takes nothing: the failed rows wait their backoff.
			postJSON(t, base+"/v1/jobs/hol:trigger", nil)
			// Until every bad row was tried max_attempts times: then left.
			waitFor(t, 60*time.Second, "every failed row left after max_attempts", func() bool {
				postJSON(t, base+"/v1/jobs/hol:trigger", nil)
				time.Sleep(300 * time.Millisecond)
				var n int
				_ = db.db.QueryRow("SELECT COUNT(*) FROM bill_0 WHERE retry_count >= 3").Scan(&n)
				var m int
				_ = db.db.QueryRow("SELECT COUNT(*) FROM bill_1 WHERE retry_count >= 3").Scan(&m)
				return n+m == tables*rows/10
			})
			waitFor(t, 30*time.Second, "the runs report the rows left", func() bool {
				getJSON(t, base+"/v1/jobs/hol/runs?limit=1000", &runs)
				var left int64
				for _, r := range runs.Runs {
					left += r.Left
				}
				return left == int64(tables*rows/10)
			})
			if got := db.count(t, tables, 2); got != good {
				t.Fatalf("%d rows have status 2, want %d: a failed row was marked done", got, good)
			}
		})
	}
}

// outboxMsg is a row of seed 003's local message table.
type outboxMsg struct {
	ID    int64
	Topic string
}

// TestJobGoDataflowSQLite: seed 003's outbox relay as a Go dataflow job
// over SQLite: 4 items, each taking the rows with id mod 4 = its item
// (ElasticJob's sharding context), streaming until nothing is left.
func TestJobGoDataflowSQLite(t *testing.T) {
	t.Parallel()
	path := t.TempDir() + "/app.db"
	app := sqlOpen(t, "sqlite", path)
	if _, err := app.Exec(`CREATE TABLE msg_send_record (id INTEGER PRIMARY KEY, topic TEXT NOT NULL, send_status INT NOT NULL DEFAULT 0)`); err != nil {
		t.Fatal(err)
	}
	const n = 2000
	for lo := 1; lo <= n; lo += 500 {
		var sb strings.Builder
		sb.WriteString("INSERT INTO msg_send_record (id, topic) VALUES ")
		for id := lo; id < lo+500; id++ {
			if id > lo {
				sb.WriteString(",")
			}
			fmt.Fprintf(&sb, "(%d, 'user_register_topic')", id)
		}
		if _, err := app.Exec(sb.String()); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	sent := map[int64]int{}
	params := map[string]bool{}
	flow := ontime.Dataflow[outboxMsg]{
		Fetch: func(ctx context.Context, s ontime.Shard) ([]outboxMsg, error) {
			rows, err := app.QueryContext(ctx, `SELECT id, topic FROM msg_send_record WHERE send_status = 0 AND id % ? = ? ORDER BY id LIMIT 100`, s.Total, s.Item)
			if err != nil {
				return nil, err
			}
			defer rows.Close()
			var out []outboxMsg
			for rows.Next() {
				var m outboxMsg
				if err := rows.Scan(&m.ID, &m.Topic); err != nil {
					return nil, err
				}
				out = append(out, m)
			}
			return out, rows.Err()
		},
		Process: func(ctx context.Context, s ontime.Shard, data []outboxMsg) error {
			mu.Lock()
			params[s.Param] = true
			for _, m := range data {
				sent[m.ID]++
			}
			mu.Unlock()
			for _, m := range data {
				if _, err := app.ExecContext(ctx, `UPDATE msg_send_record SET send_status = 1 WHERE id = ?`, m.ID); err != nil {
					return err
				}
			}
			return nil
		},
		Streaming: true,
	}
	cfg := ontime.DefaultConfig()
	cfg.DataDir = t.TempDir()
	ctx := context.Background()
	node, err := ontime.NewNode(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := node.RegisterJob(ontime.Job{Name: "outbox", Cron: "@every 1s", Items: 4, ItemParams: []string{"0=a", "1=b", "2=c", "3=d"}, Run: flow.Run}); err != nil {
		t.Fatal(err)
	}
	if err := node.RegisterJob(ontime.Job{Name: "outbox", Cron: "@every 1s", Run: flow.Run}); err == nil {
		t.Fatal("a second job named outbox was registered")
	}
	if err := node.RegisterJob(ontime.Job{Name: "bad", Cron: "every second", Run: flow.Run}); err == nil {
		t.Fatal("a bad cron was accepted")
	}
	if err := node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = node.Stop(context.Background()) })
	if err := node.RegisterJob(ontime.Job{Name: "late", Cron: "@every 1s", Run: flow.Run}); err == nil {
		t.Fatal("a job registered after Start")
	}
	waitFor(t, 60*time.Second, "every message sent and marked", func() bool {
		var left int
		if err := app.QueryRow(`SELECT COUNT(*) FROM msg_send_record WHERE send_status = 0`).Scan(&left); err != nil {
			t.Fatal(err)
		}
		return left == 0
	})
	mu.Lock()
	if len(sent) != n {
		t.Errorf("%d messages sent, want %d", len(sent), n)
	}
	for id, c := range sent {
		if c != 1 {
			t.Errorf("message %d sent %d times", id, c)
		}
	}
	if len(params) != 4 {
		t.Errorf("item params seen: %v", params)
	}
	mu.Unlock()
}

// TestJobIndexCheckWarns: without an index on (status, id) the job's view
// says so (and the node logs a WARN); the job still runs.
func TestJobIndexCheckWarns(t *testing.T) {
	for _, engine := range []string{"sqlite", "mysql", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			db := newBillDB(t, engine, 1, 10)
			drop := "DROP INDEX bill_0_status_id"
			if engine == "mysql" {
				drop += " ON bill_0"
			}
			if _, err := db.db.Exec(drop); err != nil {
				t.Fatal(err)
			}
			rcv := newJobReceiver(t)
			base, _ := startJobNode(t, func(cfg *ontime.Config) {
				cfg.Jobs = []ontime.JobConfig{billJob("noindex", engine, []string{db.dsn}, 1, rcv.srv.URL)}
			})
			var v apiv1.JobView
			getJSON(t, base+"/v1/jobs/noindex", &v)
			if v.Index == nil || v.Index.OK || !strings.Contains(v.Index.Warning, "(status, id)") || v.Index.Plan == "" {
				t.Fatalf("index check: %+v", v.Index)
			}
			rcv.waitRows(t, 30*time.Second, 10)
		})
	}
}

// TestJobMisfire: a node runs a Go job every second, stops, and the next
// node starts on the same store after fire times went by with no node up:
// fire_once runs each item once for them (trigger misfire), skip does not.
func TestJobMisfire(t *testing.T) {
	for _, policy := range []string{"fire_once", "skip"} {
		t.Run(policy, func(t *testing.T) {
			t.Parallel()
			dataDir := t.TempDir()
			var mu sync.Mutex
			ran := map[int]int{}
			job := ontime.Job{Name: "tick", Cron: "@every 3s", Misfire: policy, Items: 3, Run: func(ctx context.Context, s ontime.Shard) error {
				mu.Lock()
				ran[s.Item]++
				mu.Unlock()
				return nil
			}}
			start := func() (*ontime.Node, string) {
				cfg := ontime.DefaultConfig()
				cfg.DataDir = dataDir
				cfg.Store.Tables, cfg.Store.Segments = 2, 1
				n, err := ontime.NewNode(context.Background(), cfg)
				if err != nil {
					t.Fatal(err)
				}
				if err := n.RegisterJob(job); err != nil {
					t.Fatal(err)
				}
				if err := n.Start(context.Background()); err != nil {
					t.Fatal(err)
				}
				srv := httptest.NewServer(n.HTTPHandler())
				t.Cleanup(srv.Close)
				return n, srv.URL
			}
			n1, _ := start()
			waitFor(t, 30*time.Second, "every item ran", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(ran) == 3
			})
			if err := n1.Stop(context.Background()); err != nil {
				t.Fatal(err)
			}
			// Two fire times with no node up. The period is long against a look
			// at an acquired item: a cron trigger that comes while the restarted
			// node looks takes the misfire run's place (one run either way).
			time.Sleep(6500 * time.Millisecond)
			restarted := time.Now()
			n2, base := start()
			t.Cleanup(func() { _ = n2.Stop(context.Background()) })
			// Wait until every item has run on its cron after the restart:
			// a misfire run, if the policy makes one, starts before that.
			var perItem map[string]int
			waitFor(t, 60*time.Second, "every item ran on its cron after the restart", func() bool {
				var runs apiv1.JobRunList
				getJSON(t, base+"/v1/jobs/tick/runs?limit=1000", &runs)
				perItem = map[string]int{}
				cron := map[string]bool{}
				for _, r := range runs.Runs {
					if !r.StartedAt.After(restarted) {
						continue
					}
					if r.Trigger == "misfire" {
						perItem[r.Item]++
					} else {
						cron[r.Item] = true
					}
				}
				return len(cron) == 3
			})
			want := 1
			if policy == "skip" {
				want = 0
			}
			for _, it := range []string{"0", "1", "2"} {
				if perItem[it] != want {
					t.Errorf("item %s: %d misfire runs, want %d (%v)", it, perItem[it], want, perItem)
				}
			}
		})
	}
}

// TestJobTriggerRightAfterStart: a :trigger that arrives while the node is
// still looking at the items it just took (more items than it runs at
// once) runs every item: the looks do not swallow it.
func TestJobTriggerRightAfterStart(t *testing.T) {
	t.Parallel()
	const tables, rows = 40, 20
	db := newBillDB(t, "sqlite", tables, rows)
	rcv := newJobReceiver(t)
	base, _ := startJobNode(t, func(cfg *ontime.Config) {
		j := billJob("many", "sqlite", []string{db.dsn}, tables, rcv.srv.URL)
		j.Cron = "0 0 0 1 1 *"
		j.Process.Concurrency = 1
		cfg.Jobs = []ontime.JobConfig{j}
	})
	postJSON(t, base+"/v1/jobs/many:trigger", nil)
	// 800 rows one at a time (concurrency 1): a minute under -race on a
	// loaded machine was not always enough.
	rcv.waitRows(t, 3*time.Minute, tables*rows)
}
