package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/internal/api"
)

// Tokens of the auth tests, one per role, and one limited to topics.
var testTokens = map[string]string{
	"metrics": "metrics-token-0123456789",
	"read":    "read-token-0123456789abc",
	"write":   "write-token-0123456789ab",
	"admin":   "admin-token-0123456789ab",
	"orders":  "orders-token-0123456789a", // write, topics "orders.*"
}

// authServer runs a node with the test tokens (read from files, as
// `ontime serve` would) and returns its handler and base URL.
func authServer(t *testing.T) (http.Handler, string) {
	t.Helper()
	dir := t.TempDir()
	cfg := ontime.DefaultConfig()
	cfg.DataDir = dir
	cfg.Store.Tables = 2
	for _, name := range []string{"metrics", "read", "write", "admin", "orders"} {
		f := filepath.Join(dir, name+".token")
		if err := os.WriteFile(f, []byte(testTokens[name]+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		tc := ontime.TokenConfig{Name: name, TokenFile: f, Role: name}
		if name == "orders" {
			tc.Role, tc.Topics = "write", "orders.*"
		}
		cfg.Auth.Tokens = append(cfg.Auth.Tokens, tc)
	}
	ctx := context.Background()
	node, err := ontime.NewNode(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	h := node.HTTPHandler()
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		_ = node.Stop(context.Background())
	})
	return h, srv.URL
}

func authCall(t *testing.T, method, url, token, body string) (int, map[string]any, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return resp.StatusCode, m, resp.Header
}

func errCode(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

var wildcard = regexp.MustCompile(`\{[^}]+\}`)

// samplePath fills a pattern's wildcards. {idop} takes the one operation
// it has, so the route is judged as what it does.
func samplePath(p string) string {
	p = strings.ReplaceAll(p, "{idop}", "01jd0000000000000000000000:requeue")
	p = strings.ReplaceAll(p, "{topicop}", "orders.x:pause")
	p = strings.ReplaceAll(p, "{$}", "")
	p = strings.ReplaceAll(p, "{path...}", "x")
	return wildcard.ReplaceAllString(p, "orders.x")
}

// The roles decided for the routes this package and the node register;
// README "Security" lists them.
var wantRoles = map[string]api.Role{
	"POST /v1/tasks":            api.RoleWrite,
	"POST /v1/tasks:batch":      api.RoleWrite,
	"POST /v1/tasks/{idop}":     api.RoleAdmin, // :requeue
	"GET /v1/tasks/{id}":        api.RoleRead,
	"DELETE /v1/tasks/{id}":     api.RoleWrite,
	"GET /v1/tasks":             api.RoleRead,
	"GET /healthz":              api.RoleNone,
	"GET /readyz":               api.RoleNone,
	"GET /v1/openapi.json":      api.RoleNone,
	"GET /metrics":              api.RoleMetrics,
	"GET /v1/cluster":           api.RoleAdmin,
	"GET /v1/outboxes":          api.RoleRead,
	"PATCH /v1/tasks/{id}":      api.RoleWrite,
	"POST /v1/topics/{t}":       api.RoleWrite,
	"GET /v1/topics":            api.RoleRead,
	"POST /v1/topics/{topicop}": api.RoleAdmin, // :pause, :resume, :requeue
	// A schedule makes tasks for ever: defining, changing or deleting one
	// is an operator's act, like a pause; a trigger makes one task.
	"POST /v1/schedules":          api.RoleAdmin,
	"PUT /v1/schedules/{name}":    api.RoleAdmin,
	"DELETE /v1/schedules/{name}": api.RoleAdmin,
	"GET /v1/schedules":           api.RoleRead,
	"GET /v1/schedules/{name}":    api.RoleRead,
	"POST /v1/schedules/{nameop}": api.RoleAdmin, // :pause, :resume; :trigger is write (below)
	// A bulk operation changes any number of tasks at once.
	"POST /v1/operations":     api.RoleAdmin,
	"GET /v1/operations":      api.RoleRead,
	"GET /v1/operations/{id}": api.RoleRead,
}

// Every registered route, without a token, with a bad one, and with each
// role: refused (401, then 403) below the role it needs, served from it on.
func TestEveryRouteNeedsItsRole(t *testing.T) {
	t.Parallel()
	h, base := authServer(t)
	routes := api.Routes(h)
	if len(routes) < 10 {
		t.Fatalf("only %d routes listed: %v", len(routes), routes)
	}
	roleTok := map[api.Role]string{api.RoleMetrics: "metrics", api.RoleRead: "read", api.RoleWrite: "write", api.RoleAdmin: "admin"}
	for _, pattern := range routes {
		method, p, ok := strings.Cut(pattern, " ")
		if !ok {
			t.Fatalf("pattern %q has no method: every route must say which it takes", pattern)
		}
		path := samplePath(p)
		need := api.RouteRole(method, path)
		if want, listed := wantRoles[pattern]; listed && want != need {
			t.Errorf("%s needs %s; decided %s", pattern, need, want)
		}
		url := base + path
		if need == api.RoleNone {
			if code, _, _ := authCall(t, method, url, "", ""); code == 401 || code == 403 {
				t.Errorf("%s: health probe answered %d without a token", pattern, code)
			}
			continue
		}
		for _, hdr := range []string{"", "Bearer ", "Bearer wrong-token-0123456789", "Basic " + testTokens["admin"], testTokens["admin"]} {
			code, m, h := authCall(t, method, url, hdr, "")
			if code != 401 || errCode(m) != "unauthorized" || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s with Authorization %q: %d %v", pattern, hdr, code, m)
			}
		}
		for role := api.RoleMetrics; role <= api.RoleAdmin; role++ {
			code, m, _ := authCall(t, method, url, "Bearer "+testTokens[roleTok[role]], "")
			allowed := role == need || (need == api.RoleMetrics && role == api.RoleAdmin) ||
				(need != api.RoleMetrics && role != api.RoleMetrics && role > need)
			switch {
			case allowed && (code == 401 || code == 403):
				t.Errorf("%s with role %s: %d %v", pattern, role, code, m)
			case !allowed && (code != 403 || errCode(m) != "forbidden"):
				t.Errorf("%s with role %s (needs %s): %d %v; want 403 forbidden", pattern, role, need, code, m)
			}
		}
	}
	// An unknown route needs a token too: no probing without one.
	if code, _, _ := authCall(t, "GET", base+"/v1/nothing", "", ""); code != 401 {
		t.Errorf("unknown route without a token: %d", code)
	}
	if code, _, _ := authCall(t, "GET", base+"/v1/nothing", "bearer "+testTokens["read"], ""); code != 404 {
		t.Errorf("unknown route with a token (scheme in lower case): %d", code)
	}
}

// A token limited to topics sees and changes only their tasks.
func TestTopicLimitedToken(t *testing.T) {
	t.Parallel()
	_, base := authServer(t)
	orders, admin := "Bearer "+testTokens["orders"], "Bearer "+testTokens["admin"]
	code, mine, _ := authCall(t, "POST", base+"/v1/tasks", orders, `{"topic":"orders.cancel","delay":"1h","target":"http://127.0.0.1:9/t"}`)
	if code != 201 {
		t.Fatalf("own topic: %d %v", code, mine)
	}
	code, m, _ := authCall(t, "POST", base+"/v1/tasks", orders, `{"topic":"billing.charge","delay":"1h"}`)
	if code != 403 || errField(m) != "topic" {
		t.Fatalf("other topic: %d %v", code, m)
	}
	code, other, _ := authCall(t, "POST", base+"/v1/tasks", admin, `{"topic":"billing.charge","delay":"1h","target":"http://127.0.0.1:9/t"}`)
	if code != 201 {
		t.Fatalf("admin: %d %v", code, other)
	}
	otherID := other["id"].(string)
	for _, tc := range []struct{ method, path string }{{"GET", "/v1/tasks/" + otherID}, {"DELETE", "/v1/tasks/" + otherID}} {
		if code, m, _ := authCall(t, tc.method, base+tc.path, orders, ""); code != 404 {
			t.Errorf("%s another topic's task: %d %v; want 404", tc.method, code, m)
		}
	}
	if code, m, _ := authCall(t, "GET", base+"/v1/tasks/"+otherID, admin, ""); code != 200 || m["status"] != "pending" {
		t.Fatalf("the other task was touched: %d %v", code, m)
	}
	if code, m, _ := authCall(t, "GET", base+"/v1/tasks/"+mine["id"].(string), orders, ""); code != 200 {
		t.Errorf("own task: %d %v", code, m)
	}
	if code, m, _ := authCall(t, "GET", base+"/v1/tasks", orders, ""); code != 403 || errField(m) != "topic" {
		t.Errorf("list without topic: %d %v", code, m)
	}
	if code, m, _ := authCall(t, "GET", base+"/v1/tasks?topic=billing.charge", orders, ""); code != 403 {
		t.Errorf("list of another topic: %d %v", code, m)
	}
	if code, m, _ := authCall(t, "GET", base+"/v1/tasks?topic=orders.cancel", orders, ""); code != 200 || len(m["tasks"].([]any)) != 1 {
		t.Errorf("list of own topic: %d %v", code, m)
	}
	code, m, _ = authCall(t, "POST", base+"/v1/tasks:batch", orders, `{"tasks":[{"topic":"orders.a","target":"http://127.0.0.1:9/t"},{"topic":"billing.b"}]}`)
	items, _ := m["tasks"].([]any)
	if code != 200 || len(items) != 2 {
		t.Fatalf("batch: %d %v", code, m)
	}
	if e, _ := items[1].(map[string]any)["error"].(map[string]any); e == nil || e["code"] != "forbidden" || e["field"] != "topic" {
		t.Errorf("batch item of another topic: %v", items[1])
	}
	if e := items[0].(map[string]any)["error"]; e != nil {
		t.Errorf("batch item of own topic: %v", e)
	}
	for _, p := range []string{"/metrics", "/v1/cluster", "/v1/outboxes"} {
		if code, _, _ := authCall(t, "GET", base+p, orders, ""); code != 403 {
			t.Errorf("%s with a topic-limited token: %d", p, code)
		}
	}
}

// Config errors about tokens name the key and never print the token.
func TestTokenConfigErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	short := filepath.Join(dir, "short")
	os.WriteFile(short, []byte("tiny-secret\n"), 0o600)
	good := filepath.Join(dir, "good")
	os.WriteFile(good, []byte(testTokens["read"]), 0o600)
	for _, tc := range []struct {
		yaml, want string
	}{
		{"auth: {tokens: [{name: a, role: read}]}", "auth.tokens[0]: give token_file or token_env"},
		{fmt.Sprintf("auth: {tokens: [{name: a, role: read, token_file: %s}]}", short), "auth.tokens[0]: the token of \"a\" is 11 characters; at least 16"},
		{fmt.Sprintf("auth: {tokens: [{name: a, role: boss, token_file: %s}]}", good), "auth.tokens[0].role"},
		{fmt.Sprintf("auth: {tokens: [{name: a, role: read, token_file: %s}, {name: a, role: read, token_file: %s}]}", good, good), "auth.tokens[1].name"},
		{"auth: {tokens: [{name: a, role: read, token_env: ONTIME_TEST_UNSET_TOKEN}]}", "environment variable ONTIME_TEST_UNSET_TOKEN is not set"},
		{fmt.Sprintf("auth: {tokens: [{name: a, role: read, token_file: %s, topics: \"[\"}]}", good), "auth.tokens[0].topics"},
		{"auth: {tokens: [{name: a, rol: read}]}", "auth.tokens[0].rol: unknown key"},
		{"listen: 0.0.0.0:7070", "listen: 0.0.0.0:7070 is not a loopback address and auth.tokens is empty"},
		{"listen: \":7070\"", "is not a loopback address"},
		{"tls: {cert_file: x}", "tls: give both"},
	} {
		f := filepath.Join(dir, "ontime.yaml")
		os.WriteFile(f, []byte(tc.yaml), 0o600)
		_, err := ontime.LoadConfig(f, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want %q", tc.yaml, err, tc.want)
		}
		if err != nil && (strings.Contains(err.Error(), "tiny-secret") || strings.Contains(err.Error(), testTokens["read"])) {
			t.Errorf("the error shows the token: %v", err)
		}
	}
	for _, ok := range []string{
		"listen: 0.0.0.0:7070\nauth: {insecure: true}",
		"listen: localhost:7070",
		"listen: \"[::1]:7070\"",
		fmt.Sprintf("listen: 0.0.0.0:7070\nauth: {tokens: [{name: a, role: read, token_file: %s}]}", good),
	} {
		f := filepath.Join(dir, "ok.yaml")
		os.WriteFile(f, []byte(ok), 0o600)
		if _, err := ontime.LoadConfig(f, nil); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	if _, err := ontime.LoadConfig("", []string{"ONTIME_LISTEN=0.0.0.0:7070", "ONTIME_AUTH_INSECURE=true"}); err != nil {
		t.Errorf("ONTIME_AUTH_INSECURE: %v", err)
	}
}
