package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/internal/api/apitest"
	"github.com/ontimehq/ontime/outbox"
)

func TestOutboxDDL(t *testing.T) {
	code, out, errs := runCLI("outbox", "ddl", "--driver", "mysql", "--table", "outbox_3")
	if code != 0 || !strings.Contains(out, "CREATE TABLE IF NOT EXISTS `outbox_3`") || !strings.Contains(out, "`outbox_3_key` (msg_key, status, id)") {
		t.Fatalf("exit %d: %s %s", code, out, errs)
	}
	code, out, _ = runCLI("outbox", "ddl", "--driver", "postgres", "--table", "app.outbox")
	if code != 0 || !strings.Contains(out, `"app"."outbox"`) || strings.Count(out, ";\n") != 6 {
		t.Fatalf("exit %d: %s", code, out)
	}
	if code, _, errs := runCLI("outbox", "ddl", "--driver", "oracle", "--table", "outbox"); code != 2 || !strings.Contains(errs, "table.dialect") {
		t.Fatalf("a bad driver: exit %d: %s", code, errs)
	}
	if code, _, errs := runCLI("outbox", "ddl", "--driver", "mysql", "--table", "out box"); code != 2 || !strings.Contains(errs, "table") {
		t.Fatalf("a bad table: exit %d: %s", code, errs)
	}
	if code, _, _ := runCLI("outbox", "ddl"); code != 2 {
		t.Fatalf("no flags: exit %d", code)
	}
}

// TestCLIOutboxStatus: a node relaying a SQLite outbox; a malformed row is
// set aside and a failing message holds back its key: ontime outbox status
// shows both (table and --json, checked against the OpenAPI spec by
// apitest), and exits as documented.
func TestCLIOutboxStatus(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "app.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ddl, err := outbox.DDL(outbox.SQLite, "outbox")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range ddl {
		if _, err := db.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer ok.Close()
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) }))
	defer failing.Close()
	if _, err := db.Exec(`INSERT INTO outbox (topic, msg_key, payload, target) VALUES ('bad topic', 'k0', 'null', ?)`, ok.URL); err != nil {
		t.Fatal(err)
	}
	tb := outbox.Table{Name: "outbox", Dialect: outbox.SQLite}
	ctx := context.Background()
	if err := outbox.PutMany(ctx, db, tb,
		outbox.Message{Topic: "user.registered", Key: "held", Payload: json.RawMessage(`1`), Target: failing.URL},
		outbox.Message{Topic: "user.registered", Key: "held", Payload: json.RawMessage(`2`), Target: ok.URL},
		outbox.Message{Topic: "user.registered", Key: "free", Payload: json.RawMessage(`3`), Target: ok.URL}); err != nil {
		t.Fatal(err)
	}
	c := cli{t: t, server: apitest.Start(t, func(cfg *ontime.Config) {
		cfg.Outboxes = []ontime.OutboxConfig{{Name: "main", Driver: "sqlite", Databases: []string{path}, Table: "outbox",
			IdlePoll: ontime.Duration(50 * time.Millisecond)}}
	})}
	var obs []apiv1.Outbox
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, out, errs := c.run("outbox", "status", "--json")
		if code != 0 {
			t.Fatalf("outbox status --json: %d %q %q", code, out, errs)
		}
		if err := json.Unmarshal([]byte(out), &obs); err != nil || len(obs) != 1 || len(obs[0].Tables) != 1 {
			t.Fatalf("outbox status --json: %v %q", err, out)
		}
		tv := obs[0].Tables[0]
		if tv.SetAside == 1 && tv.HeldKeys == 1 && tv.Relayed >= 2 && tv.Waiting == 1 && len(tv.HeldSample) == 1 {
			if s := tv.SetAsideSample; len(s) != 1 || s[0].Topic != "bad topic" || !strings.Contains(s[0].Error, "topic") {
				t.Fatalf("set-aside sample: %+v", s)
			}
			if h := tv.HeldSample[0]; h.Key != "held" || h.Error == "" || h.Retries < 1 {
				t.Fatalf("held sample: %+v", h)
			}
			if tv.OldestAgeSeconds <= 0 || tv.Failures != 1 {
				t.Fatalf("oldest age %v, failures %d", tv.OldestAgeSeconds, tv.Failures)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never one set aside and one held key: %+v", tv)
		}
		time.Sleep(100 * time.Millisecond)
	}
	code, out, _ := c.run("outbox", "status")
	for _, want := range []string{"HELD KEYS", "main", "outbox", "1 set aside", `topic "bad topic"`, "1 holding back their key", `key "held"`} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("outbox status: %d, no %q in\n%s", code, want, out)
		}
	}
	// The held message's task: ontime get says what it holds back.
	held := obs[0].Tables[0].HeldSample[0]
	if held.TaskID == "" || !strings.Contains(out, "task "+held.TaskID) {
		t.Fatalf("outbox status: the held message's task %q not shown in\n%s", held.TaskID, out)
	}
	code, out, _ = c.run("get", held.TaskID)
	for _, want := range []string{"outbox       main, table outbox (database 0), message 2", `holds back   1 later message of key "held", until this task ends`} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("get %s: %d, no %q in\n%s", held.TaskID, code, want, out)
		}
	}
	if code, out, _ := c.run("outbox", "status", "main"); code != 0 || !strings.Contains(out, "main") {
		t.Fatalf("outbox status main: %d %q", code, out)
	}
	if code, _, errs := c.run("outbox", "status", "nope"); code != exitNotFound {
		t.Fatalf("outbox status nope: %d %q", code, errs)
	}
	if code, _, _ := c.run("outbox", "status", "a", "b"); code != exitUsage {
		t.Fatalf("outbox status a b: %d", code)
	}
	// A node without outboxes answers an empty list.
	empty := cli{t: t, server: apitest.Start(t, nil)}
	if code, out, _ := empty.run("outbox", "status"); code != 0 || !strings.Contains(out, "no outboxes") {
		t.Fatalf("outbox status without outboxes: %d %q", code, out)
	}
}
