package main

import (
	"database/sql"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite" // the users' table of the test

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/internal/api/apitest"
)

// TestCLIJobs: list, get, trigger, runs, pause, resume against a node
// running a SQL job over a SQLite table; errors exit as documented.
func TestCLIJobs(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "app.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, s := range []string{
		`CREATE TABLE bill_0 (id INTEGER PRIMARY KEY, status INT NOT NULL, x TEXT NOT NULL)`,
		`CREATE INDEX bill_0_status_id ON bill_0 (status, id)`,
		`INSERT INTO bill_0 (id, status, x) VALUES (1, 1, 'a'), (2, 1, 'b'), (3, 1, 'c')`,
	} {
		if _, err := db.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer hook.Close()
	c := cli{t: t, server: apitest.Start(t, func(cfg *ontime.Config) {
		cfg.Jobs = []ontime.JobConfig{{Name: "bill", Cron: "0 0 0 1 1 *",
			Source: ontime.JobSourceConfig{Driver: "sqlite", Databases: []string{path}, Table: "bill_{table}", Tables: 1,
				Key: "id", Columns: []string{"id", "x"}, Where: map[string]any{"status": 1}},
			Process:   ontime.JobProcessConfig{Target: hook.URL},
			OnSuccess: ontime.JobOnSuccessConfig{Set: map[string]any{"status": 2}}}}
	})}
	code, out, _ := c.run("jobs", "list")
	if code != 0 || !strings.Contains(out, "bill") || !strings.Contains(out, "ok (bill_0_status_id)") {
		t.Fatalf("jobs list: %d %q", code, out)
	}
	code, out, _ = c.run("jobs", "get", "bill")
	if code != 0 || !strings.Contains(out, "0.0.0") || !strings.Contains(out, "target "+hook.URL) {
		t.Fatalf("jobs get: %d %q", code, out)
	}
	if code, out, _ = c.run("jobs", "trigger", "bill"); code != 0 || !strings.Contains(out, "bill triggered") {
		t.Fatalf("jobs trigger: %d %q", code, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		if err := db.QueryRow(`SELECT COUNT(*) FROM bill_0 WHERE status = 2`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d rows processed after jobs trigger", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var runs struct {
		Runs []struct {
			Trigger   string `json:"trigger"`
			Processed int    `json:"rows_processed"`
		} `json:"runs"`
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		code, out, _ = c.run("jobs", "runs", "bill", "--item", "0.0.0", "--json")
		if err := json.Unmarshal([]byte(out), &runs); code != 0 || err != nil {
			t.Fatalf("jobs runs --json: %d %v %q", code, err, out)
		}
		if len(runs.Runs) == 1 && runs.Runs[0].Processed == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("runs: %q", out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if runs.Runs[0].Trigger != "manual" {
		t.Fatalf("run trigger %q", runs.Runs[0].Trigger)
	}
	if code, out, _ = c.run("jobs", "runs", "bill"); code != 0 || !strings.Contains(out, "PROCESSED") || !strings.Contains(out, "manual") {
		t.Fatalf("jobs runs: %d %q", code, out)
	}
	if code, out, _ = c.run("jobs", "pause", "bill"); code != 0 || !strings.Contains(out, "paused true") {
		t.Fatalf("jobs pause: %d %q", code, out)
	}
	if code, out, _ = c.run("jobs", "resume", "bill"); code != 0 || !strings.Contains(out, "paused false") {
		t.Fatalf("jobs resume: %d %q", code, out)
	}
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"jobs", "get", "nope"}, exitNotFound},
		{[]string{"jobs", "trigger", "nope"}, exitNotFound},
		{[]string{"jobs", "get"}, exitUsage},
		{[]string{"jobs", "runs", "bill", "--limit", "5000"}, exitUsage},
		{[]string{"jobs", "runs", "bill", "--item", "7.7.7"}, exitError},
	} {
		code, _, errs := c.run(tc.args...)
		if code != tc.code {
			t.Errorf("%v: exit %d, want %d (%s)", tc.args, code, tc.code, errs)
		}
		oneLine(t, errs)
	}
}

// TestCLIJobBroken: a job whose on_success.set names a column the table
// lacks is listed BROKEN, and get prints the database's message.
func TestCLIJobBroken(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "app.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE bill_0 (id INTEGER PRIMARY KEY, status INT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	c := cli{t: t, server: apitest.Start(t, func(cfg *ontime.Config) {
		cfg.Jobs = []ontime.JobConfig{{Name: "typo", Cron: "0 0 0 1 1 *",
			Source: ontime.JobSourceConfig{Driver: "sqlite", Databases: []string{path}, Table: "bill_{table}", Tables: 1,
				Key: "id", Columns: []string{"id"}, Where: map[string]any{"status": 1}},
			Process:   ontime.JobProcessConfig{Target: "http://127.0.0.1:9/"},
			OnSuccess: ontime.JobOnSuccessConfig{Set: map[string]any{"stauts": 2}}}}
	})}
	code, out, _ := c.run("jobs", "list")
	if code != 0 || !strings.Contains(out, "BROKEN") {
		t.Fatalf("jobs list: %d %q", code, out)
	}
	code, out, _ = c.run("jobs", "get", "typo")
	if code != 0 || !strings.Contains(out, "BROKEN since") || !strings.Contains(out, "stauts") {
		t.Fatalf("jobs get: %d %q", code, out)
	}
}
