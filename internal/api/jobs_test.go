package api_test

import (
	"database/sql"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite" // the users' database of the test

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/internal/api/apitest"
)

// TestJobViewBrokenAndIndexDDL: the job routes through the OpenAPI checker
// with a SQL job whose on_success.set names a column its table lacks
// (state broken, the database's error, ontime_job_broken 1) beside a
// sound one without the index its fetch needs (state ok, the index's DDL).
func TestJobViewBrokenAndIndexDDL(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "users.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE bill (id INTEGER NOT NULL PRIMARY KEY, status INT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	job := func(name string, set map[string]any) ontime.JobConfig {
		return ontime.JobConfig{Name: name, Cron: "0 0 0 1 1 *",
			Source: ontime.JobSourceConfig{Driver: "sqlite", Databases: []string{path}, Table: "bill", Key: "id",
				Columns: []string{"id"}, Where: map[string]any{"status": 1}},
			Process:   ontime.JobProcessConfig{Target: "http://127.0.0.1:9/"},
			OnSuccess: ontime.JobOnSuccessConfig{Set: set}}
	}
	base := apitest.Start(t, func(c *ontime.Config) {
		c.Jobs = []ontime.JobConfig{job("typo", map[string]any{"stauts": 2}), job("noindex", map[string]any{"status": 2})}
	})

	code, m := call(t, "GET", base+"/v1/jobs/typo", "")
	if code != 200 || m["state"] != "broken" || !strings.Contains(m["error"].(string), "no such column: stauts") || m["broken_since"] == nil {
		t.Fatalf("GET the broken job: %d %v", code, m)
	}
	code, m = call(t, "GET", base+"/v1/jobs/noindex", "")
	ix, _ := m["index"].(map[string]any)
	if code != 200 || m["state"] != "ok" || m["error"] != nil || ix["ok"] != false || ix["ddl"] != "CREATE INDEX `bill_status_id` ON `bill` (`status`, `id`)" {
		t.Fatalf("GET the job without its index: %d %v", code, m)
	}
	if code, m := call(t, "GET", base+"/v1/jobs", ""); code != 200 || len(m["jobs"].([]any)) != 2 {
		t.Fatalf("list: %d %v", code, m)
	}
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{`ontime_job_broken{job="typo"} 1`, `ontime_job_broken{job="noindex"} 0`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
