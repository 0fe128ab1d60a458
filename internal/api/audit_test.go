package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/internal/api"
)

// auditNode runs a node with the test tokens and audit.file, and returns
// its base URL and the audit file's path.
func auditNode(t *testing.T, submits bool) (string, string) {
	t.Helper()
	dir := t.TempDir()
	cfg := ontime.DefaultConfig()
	cfg.DataDir = dir
	cfg.Store.Tables = 2
	cfg.Audit.File = filepath.Join(dir, "audit.jsonl")
	cfg.Audit.Submits = submits
	for _, name := range []string{"read", "write", "admin"} {
		f := filepath.Join(dir, name+".token")
		if err := os.WriteFile(f, []byte(testTokens[name]+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg.Auth.Tokens = append(cfg.Auth.Tokens, ontime.TokenConfig{Name: name, TokenFile: f, Role: name})
	}
	ctx := context.Background()
	node, err := ontime.NewNode(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(node.HTTPHandler())
	t.Cleanup(func() {
		srv.Close()
		_ = node.Stop(context.Background())
	})
	return srv.URL, cfg.Audit.File
}

// auditLines reads the audit file's JSON lines.
func auditLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("audit line %q is not JSON: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// TestAuditRouteClasses: each class of state-changing route (task by ID,
// task by key, topic ops, schedules, jobs) writes one line to audit.file
// with actor, route, target and outcome; reads and submits write none;
// refusals by auth are audited with the token's name or as
// unauthenticated; no token value appears in the file.
func TestAuditRouteClasses(t *testing.T) {
	t.Parallel()
	base, file := auditNode(t, false)
	w, a, rd := "Bearer "+testTokens["write"], "Bearer "+testTokens["admin"], "Bearer "+testTokens["read"]

	code, m, _ := authCall(t, "POST", base+"/v1/tasks", w, `{"topic":"orders","key":"k1","delay":"1h","target":"http://127.0.0.1:9/x"}`)
	if code != 201 {
		t.Fatalf("submit: %d %v", code, m)
	}
	id := m["id"].(string)
	code, m, _ = authCall(t, "POST", base+"/v1/tasks", w, `{"topic":"orders","key":"k2","delay":"1h","target":"http://127.0.0.1:9/x"}`)
	if code != 201 {
		t.Fatalf("submit: %d %v", code, m)
	}
	id2 := m["id"].(string)

	type step struct {
		method, path, token, body string
		status                    int
		actor, kind, target, op   string
		outcome                   string
	}
	steps := []step{
		{"GET", "/v1/tasks/" + id, rd, "", 200, "", "", "", "", ""}, // a read: no line
		{"PATCH", "/v1/tasks/" + id, w, `{"delay":"2h"}`, 200, "write", "task", id, "", "ok"},
		{"DELETE", "/v1/tasks/" + id, w, "", 200, "write", "task", id, "", "ok"},
		{"POST", "/v1/tasks/" + id + ":requeue", a, "", 409, "admin", "task", id, "requeue", "refused"},
		{"POST", "/v1/tasks/" + id + ":purge", a, "", 200, "admin", "task", id, "purge", "ok"},
		{"PATCH", "/v1/topics/orders/keys/k2", w, `{"delay":"3h"}`, 200, "write", "key", "orders/k2", "", "ok"},
		{"DELETE", "/v1/topics/orders/keys/k2", w, "", 200, "write", "key", "orders/k2", "", "ok"},
		{"POST", "/v1/topics/orders:pause", a, "", 200, "admin", "topic", "orders", "pause", "ok"},
		{"POST", "/v1/topics/orders:resume", a, "", 200, "admin", "topic", "orders", "resume", "ok"},
		{"POST", "/v1/schedules", a, `{"name":"nightly","cron":"0 3 * * *","task":{"topic":"orders","target":"http://127.0.0.1:9/x"}}`, 201, "admin", "schedule", "nightly", "", "ok"},
		{"POST", "/v1/schedules/nightly:pause", a, "", 200, "admin", "schedule", "nightly", "pause", "ok"},
		{"DELETE", "/v1/schedules/nightly", a, "", 200, "admin", "schedule", "nightly", "", "ok"},
		{"POST", "/v1/jobs/nope:pause", a, "", 404, "admin", "job", "nope", "pause", "refused"},
		// Refused by auth: a read token may not cancel; no token at all.
		{"DELETE", "/v1/tasks/" + id2, rd, "", 403, "read", "", "", "", "refused"},
		{"POST", "/v1/tasks/" + id2 + ":purge", w, "", 403, "write", "", "", "", "refused"}, // admin only
		{"DELETE", "/v1/tasks/" + id2, "Bearer not-a-token-" + testTokens["admin"][:6], "", 401, "unauthenticated", "", "", "", "refused"},
		// Refused for its query, before the handler.
		{"DELETE", "/v1/tasks/" + id2 + "?a=%zz", w, "", 400, "write", "", "", "", "refused"},
	}
	var want []step
	for _, s := range steps {
		code, m, _ := authCall(t, s.method, base+s.path, s.token, s.body)
		if code != s.status {
			t.Fatalf("%s %s: %d %v, want %d", s.method, s.path, code, m, s.status)
		}
		if s.actor != "" {
			want = append(want, s)
		}
	}
	lines := auditLines(t, file)
	if len(lines) != len(want) {
		t.Fatalf("%d audit lines, want %d: %v", len(lines), len(want), lines)
	}
	for i, s := range want {
		l := lines[i]
		if l["msg"] != "audit" || l["actor"] != s.actor || l["method"] != s.method || l["path"] != strings.SplitN(s.path, "?", 2)[0] ||
			l["outcome"] != s.outcome || l["status"] != float64(s.status) || l["request_id"] == "" || l["route"] == nil {
			t.Errorf("line %d = %v; want %+v", i, l, s)
		}
		if s.kind != "" && (l["target_kind"] != s.kind || l["target"] != s.target) {
			t.Errorf("line %d target = %v %v; want %s %s", i, l["target_kind"], l["target"], s.kind, s.target)
		}
		if (l["op"] != nil || s.op != "") && l["op"] != s.op {
			t.Errorf("line %d op = %v; want %q", i, l["op"], s.op)
		}
		if s.status >= 400 && l["code"] == nil {
			t.Errorf("line %d has no error code: %v", i, l)
		}
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for name, tok := range testTokens {
		if bytes.Contains(raw, []byte(tok)) || bytes.Contains(raw, []byte(tok[:12])) {
			t.Errorf("the audit file holds token %s's value", name)
		}
	}
}

// TestAuditSubmits: with audit.submits, a submit and a batch are audited
// too.
func TestAuditSubmits(t *testing.T) {
	t.Parallel()
	base, file := auditNode(t, true)
	w := "Bearer " + testTokens["write"]
	if code, m, _ := authCall(t, "POST", base+"/v1/tasks", w, `{"topic":"orders","delay":"1h","target":"http://127.0.0.1:9/x"}`); code != 201 {
		t.Fatalf("submit: %d %v", code, m)
	}
	if code, m, _ := authCall(t, "POST", base+"/v1/tasks:batch", w, `{"tasks":[{"topic":"orders","delay":"1h","target":"http://127.0.0.1:9/x"}]}`); code != 200 {
		t.Fatalf("batch: %d %v", code, m)
	}
	lines := auditLines(t, file)
	if len(lines) != 2 || lines[0]["route"] != "POST /v1/tasks" || lines[1]["route"] != "POST /v1/tasks:batch" || lines[0]["actor"] != "write" {
		t.Fatalf("audit lines %v", lines)
	}
}

// syncBuffer is a log sink written from the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestAuditNodeLogLocal: without audit.file the lines go to the node's
// log; without tokens the actor is "local"; the request log (debug)
// carries the request ID the client sent, and the answer returns it.
func TestAuditNodeLogLocal(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	cfg := ontime.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Store.Tables = 2
	ctx := context.Background()
	node, err := ontime.NewNode(ctx, cfg, ontime.WithLogger(ontime.NewLogger(&logs, "debug")))
	if err != nil {
		t.Fatal(err)
	}
	if err := node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(node.HTTPHandler())
	defer func() {
		srv.Close()
		_ = node.Stop(context.Background())
	}()
	req, _ := http.NewRequest("POST", srv.URL+"/v1/topics/orders:pause", nil)
	req.Header.Set(api.RequestIDHeader, "client-req-42")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get(api.RequestIDHeader) != "client-req-42" {
		t.Fatalf("pause: %d, X-Request-Id %q", resp.StatusCode, resp.Header.Get(api.RequestIDHeader))
	}
	var audit, reqLine map[string]any
	// The request line is written once the handler has returned, which
	// may be after the client has read the answer: wait for it.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		for _, l := range strings.Split(logs.String(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) != nil {
				continue
			}
			switch m["msg"] {
			case "audit":
				audit = m
			case "api request":
				reqLine = m
			}
		}
		if (audit != nil && reqLine != nil) || time.Now().After(deadline) {
			break
		}
	}
	if audit == nil || audit["actor"] != api.ActorLocal || audit["target"] != "orders" || audit["op"] != "pause" || audit["request_id"] != "client-req-42" || audit["level"] != slog.LevelInfo.String() {
		t.Fatalf("audit line %v in the node log:\n%s", audit, logs.String())
	}
	if reqLine == nil || reqLine["request_id"] != "client-req-42" || reqLine["level"] != "DEBUG" || reqLine["route"] != "POST /v1/topics/{topicop}" {
		t.Fatalf("request line %v", reqLine)
	}
}

// TestAuditFileReopenedOnSIGHUP: after logrotate moves audit.file away
// and sends SIGHUP, the node writes its next lines to a new file at the
// configured path; the moved file keeps the lines written before.
func TestAuditFileReopenedOnSIGHUP(t *testing.T) {
	t.Parallel()
	base, file := auditNode(t, false)
	a := "Bearer " + testTokens["admin"]
	if code, m, _ := authCall(t, "POST", base+"/v1/topics/before:pause", a, ""); code != 200 {
		t.Fatalf("pause: %d %v", code, m)
	}
	rotated := file + ".1"
	if err := os.Rename(file, rotated); err != nil {
		t.Fatal(err)
	}
	// The node's SIGHUP watch runs (auditNode started it), so the signal
	// is caught, not fatal to the test process.
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(file); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("audit.file was not opened again after SIGHUP")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if code, m, _ := authCall(t, "POST", base+"/v1/topics/after:pause", a, ""); code != 200 {
		t.Fatalf("pause: %d %v", code, m)
	}
	targets := func(path string) []string {
		var out []string
		for _, l := range auditLines(t, path) {
			out = append(out, fmt.Sprint(l["target"]))
		}
		return out
	}
	if got := targets(rotated); len(got) != 1 || got[0] != "before" {
		t.Errorf("rotated file's targets %v, want [before]", got)
	}
	if got := targets(file); len(got) != 1 || got[0] != "after" {
		t.Errorf("new file's targets %v, want [after]", got)
	}
}
