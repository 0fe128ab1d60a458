package console_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/apiv1"
)

// Tokens of the tests, one per role.
var tokens = map[string]string{
	"metrics": "metrics-token-0123456789",
	"read":    "read-token-0123456789abc",
	"write":   "write-token-0123456789ab",
	"admin":   "admin-token-0123456789ab",
}

// node runs a node serving its HTTP handler (API and console), with the
// test tokens when auth is set, and returns its base URL.
func node(t *testing.T, auth bool) string {
	t.Helper()
	return nodeServer(t, auth, httptest.NewServer).URL
}

// nodeServer is node, served by newServer (httptest.NewServer or
// NewTLSServer).
func nodeServer(t *testing.T, auth bool, newServer func(http.Handler) *httptest.Server) *httptest.Server {
	t.Helper()
	dir := t.TempDir()
	cfg := ontime.DefaultConfig()
	cfg.DataDir = dir
	cfg.Store.Tables = 2
	if auth {
		for name, tok := range tokens {
			f := filepath.Join(dir, name+".token")
			if err := os.WriteFile(f, []byte(tok+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg.Auth.Tokens = append(cfg.Auth.Tokens, ontime.TokenConfig{Name: name, TokenFile: f, Role: name})
		}
	}
	ctx := context.Background()
	n, err := ontime.NewNode(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv := newServer(n.HTTPHandler())
	t.Cleanup(func() {
		srv.Close()
		if err := n.Stop(context.Background()); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return srv
}

// browser is a cookie-keeping HTTP client that does not follow redirects.
type browser struct {
	t    *testing.T
	base string
	hc   *http.Client
	csrf string // from the last page read
}

func newBrowser(t *testing.T, base string) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, base: base, hc: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

var csrfRe = regexp.MustCompile(`data-csrf="([0-9a-f]*)"`)

func (b *browser) do(req *http.Request) (int, string, http.Header) {
	b.t.Helper()
	resp, err := b.hc.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if m := csrfRe.FindSubmatch(body); m != nil && len(m[1]) > 0 {
		b.csrf = string(m[1])
	}
	return resp.StatusCode, string(body), resp.Header
}

func (b *browser) get(path string) (int, string, http.Header) {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, b.base+path, nil)
	return b.do(req)
}

// post submits a form; the CSRF token of the last page read is added
// unless the form sets csrf itself.
func (b *browser) post(path string, form url.Values) (int, string, http.Header) {
	b.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	if _, set := form["csrf"]; !set {
		form.Set("csrf", b.csrf)
	}
	req, _ := http.NewRequest(http.MethodPost, b.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return b.do(req)
}

func (b *browser) signIn(role string) {
	b.t.Helper()
	code, _, h := b.post("/ui/login", url.Values{"token": {tokens[role]}, "next": {"/ui/topics"}})
	if code != http.StatusSeeOther || h.Get("Location") != "/ui/topics" {
		b.t.Fatalf("sign-in as %s: %d → %q", role, code, h.Get("Location"))
	}
	if code, body, _ := b.get("/ui/topics"); code != 200 {
		b.t.Fatalf("after sign-in: %d %s", code, body)
	}
}

// api calls the JSON API with a bearer token ("" for none).
func api(t *testing.T, base, token, method, path string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = bytes.NewReader(raw)
	}
	req, _ := http.NewRequest(method, base+path, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw
}

func submit(t *testing.T, base, token string, req apiv1.TaskRequest) apiv1.Task {
	t.Helper()
	code, raw := api(t, base, token, http.MethodPost, "/v1/tasks", req)
	if code != 201 && code != 200 {
		t.Fatalf("submit: %d %s", code, raw)
	}
	var task apiv1.Task
	if err := json.Unmarshal(raw, &task); err != nil {
		t.Fatal(err)
	}
	return task
}

// deadHost numbers the loopback addresses dead tasks are sent to: each
// its own destination, so one's open breaker does not defer the next.
var deadHost atomic.Int32

// deadTask submits a task to a closed port with one attempt and waits
// until it is dead.
func deadTask(t *testing.T, base, token, topic, key string) apiv1.Task {
	t.Helper()
	target := fmt.Sprintf("http://127.0.%d.%d:1/hook", 1+deadHost.Load()/250, 2+deadHost.Add(1)%250)
	task := submit(t, base, token, apiv1.TaskRequest{Topic: topic, Key: key, Target: target, MaxAttempts: 1})
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		_, raw := api(t, base, token, http.MethodGet, "/v1/tasks/"+task.ID, nil)
		var got apiv1.Task
		_ = json.Unmarshal(raw, &got)
		if got.Status == "dead" {
			return got
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("task %s never died", task.ID)
	return task
}

func getTask(t *testing.T, base, token, id string) apiv1.Task {
	t.Helper()
	_, raw := api(t, base, token, http.MethodGet, "/v1/tasks/"+id, nil)
	var got apiv1.Task
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestRootAndAPI404: GET / redirects to the console; the API's unknown
// paths still answer its JSON 404.
func TestRootAndAPI404(t *testing.T) {
	t.Parallel()
	base := node(t, false)
	b := newBrowser(t, base)
	if code, _, h := b.get("/"); code != http.StatusFound || h.Get("Location") != "/ui/" {
		t.Fatalf("GET /: %d → %q", code, h.Get("Location"))
	}
	code, raw := api(t, base, "", http.MethodGet, "/v1/nope", nil)
	var eb apiv1.ErrorBody
	if code != 404 || json.Unmarshal(raw, &eb) != nil || eb.Error.Code != apiv1.CodeNotFound {
		t.Fatalf("GET /v1/nope: %d %s", code, raw)
	}
	if code, body, h := b.get("/ui/nope"); code != 404 || !strings.Contains(h.Get("Content-Type"), "text/html") || !strings.Contains(body, "no console page") {
		t.Fatalf("GET /ui/nope: %d %q", code, body)
	}
	if code, _, h := b.get("/ui"); code != http.StatusFound || h.Get("Location") != "/ui/" {
		t.Fatalf("GET /ui: %d → %q", code, h.Get("Location"))
	}
}

// TestEveryPageWithoutTokens: a node without tokens serves every page
// with no sign-in, each with the top navigation and a CSRF token.
func TestEveryPageWithoutTokens(t *testing.T) {
	t.Parallel()
	base := node(t, false)
	task := submit(t, base, "", apiv1.TaskRequest{Topic: "orders", Key: "o-1", Delay: "1h", Target: "http://127.0.0.1:1/x", Payload: json.RawMessage(`{"order":1}`)})
	b := newBrowser(t, base)
	for _, p := range []string{"/ui/", "/ui/upcoming", "/ui/upcoming?range=7d", "/ui/upcoming?range=1h&topic=orders", "/ui/tasks", "/ui/tasks?topic=orders&status=pending", "/ui/tasks?topic=orders&key=o-1", "/ui/tasks/" + task.ID,
		"/ui/dead", "/ui/dead?topic=orders", "/ui/topics", "/ui/schedules", "/ui/schedules/new", "/ui/jobs", "/ui/cluster"} {
		code, body, h := b.get(p)
		if code != 200 {
			t.Errorf("%s: %d %s", p, code, body)
			continue
		}
		for _, want := range []string{`<nav aria-label="console">`, `href="/ui/dead"`, "data-csrf=", "/ui/assets/htmx.min.js"} {
			if !strings.Contains(body, want) {
				t.Errorf("%s: no %q", p, want)
			}
		}
		if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
			t.Errorf("%s: CSP %q", p, csp)
		}
	}
	// The overview and the topics page say how old their counts are (the
	// node's count cache).
	for _, p := range []string{"/ui/", "/ui/topics"} {
		if _, body, _ := b.get(p); !strings.Contains(body, "counts as of ") {
			t.Errorf("%s: the counts' age is not shown", p)
		}
	}
	// The cluster page shows each node's start, version and zone (none).
	if _, body, _ := b.get("/ui/cluster"); !strings.Contains(body, `class="node-started"><span title=`) || strings.Contains(body, `class="mono node-version">—`) ||
		!strings.Contains(body, `class="mono node-zone">—`) {
		t.Errorf("cluster: the node's start, version or zone is not shown:\n%s", body)
	}
	// The task's detail shows the payload pretty-printed, its key search finds it.
	if _, body, _ := b.get("/ui/tasks/" + task.ID); !strings.Contains(body, "&#34;order&#34;: 1") {
		t.Errorf("detail: payload not pretty-printed:\n%s", body)
	}
	if _, body, _ := b.get("/ui/tasks?topic=orders&key=o-1"); !strings.Contains(body, task.ID) {
		t.Errorf("search by key: %s not listed", task.ID)
	}
	// A due range, in the browser's zone (UTC+1: offset -60).
	in := task.DueAt.Add(time.Hour).Add(-time.Minute).Format("2006-01-02T15:04:05")
	if _, body, _ := b.get("/ui/tasks?tz_offset=-60&due_after=" + url.QueryEscape(in)); !strings.Contains(body, task.ID) {
		t.Errorf("due range around it: %s not listed", task.ID)
	}
	after := task.DueAt.Add(time.Hour).Add(time.Minute).Format("2006-01-02T15:04:05")
	if _, body, _ := b.get("/ui/tasks?tz_offset=-60&due_after=" + url.QueryEscape(after)); strings.Contains(body, task.ID) {
		t.Errorf("due range after it: %s listed", task.ID)
	}
	// A live poll answers only the live region.
	req, _ := http.NewRequest(http.MethodGet, base+"/ui/", nil)
	req.Header.Set("HX-Request", "true")
	req.Header.Set("HX-Target", "live")
	if code, body, _ := b.do(req); code != 200 || !strings.HasPrefix(body, `<div id="live"`) || strings.Contains(body, "<html") {
		t.Errorf("live poll: %d %.200s", code, body)
	}
	// The charts' series is uPlot's columns.
	code, body, _ := b.get("/ui/overview/series")
	var cols [][]*float64
	if code != 200 || json.Unmarshal([]byte(body), &cols) != nil || len(cols) != 5 {
		t.Errorf("series: %d %.200s", code, body)
	}
	// The assets are served.
	for _, a := range []string{"htmx.min.js", "uPlot.iife.min.js", "console.js", "console.css"} {
		if code, _, _ := b.get("/ui/assets/" + a); code != 200 {
			t.Errorf("asset %s: %d", a, code)
		}
	}
}

// TestUpcoming: the Coming up page counts pending tasks per topic by due
// time, over the range asked, filtered by topic.
func TestUpcoming(t *testing.T) {
	t.Parallel()
	base := node(t, false)
	for i, tc := range []struct{ topic, delay string }{{"up.a", "90m"}, {"up.a", "100m"}, {"up.b", "5h"}, {"up.b", "30h"}} {
		submit(t, base, "", apiv1.TaskRequest{Topic: tc.topic, Key: fmt.Sprint(i), Delay: tc.delay, Target: "http://127.0.0.1:1/x"})
	}
	b := newBrowser(t, base)
	for _, tc := range []struct {
		query string
		want  []string
		not   []string
	}{
		{"?range=6h", []string{"3 pending tasks due in the next 6h", "up.a <b>2</b>", "up.b <b>1</b>"}, nil},
		{"?range=7d", []string{"4 pending tasks due in the next 7d"}, nil},
		{"?range=1h", []string{"0 pending tasks due in the next 1h"}, []string{"up.a <b>"}},
		{"?range=6h&topic=up.b", []string{"1 pending tasks due in the next 6h"}, []string{"up.a <b>"}},
	} {
		code, body, _ := b.get("/ui/upcoming" + tc.query)
		if code != 200 {
			t.Fatalf("%s: %d", tc.query, code)
		}
		for _, w := range tc.want {
			if !strings.Contains(body, w) {
				t.Errorf("%s: no %q", tc.query, w)
			}
		}
		for _, w := range tc.not {
			if strings.Contains(body, w) {
				t.Errorf("%s: %q shown", tc.query, w)
			}
		}
	}
}

// TestSignIn: with tokens, pages send to the sign-in, which refuses a bad
// or metrics token (the field named) and keeps a good one in an
// HttpOnly, SameSite=Strict cookie; sign-out forgets it.
func TestSignIn(t *testing.T) {
	t.Parallel()
	base := node(t, true)
	b := newBrowser(t, base)
	code, _, h := b.get("/ui/tasks?topic=a")
	if code != http.StatusSeeOther || h.Get("Location") != "/ui/login?next="+url.QueryEscape("/ui/tasks?topic=a") {
		t.Fatalf("unsigned page: %d → %q", code, h.Get("Location"))
	}
	if code, body, _ := b.get("/ui/login"); code != 200 || !strings.Contains(body, `name="token"`) {
		t.Fatalf("login page: %d", code)
	}
	for _, tc := range []struct {
		token string
		code  int
		want  string
	}{
		{"", 400, "give a token"},
		{"wrong-token-0123456789", 401, "not one of auth.tokens"},
		{tokens["metrics"], 403, "role metrics"},
	} {
		code, body, _ := b.post("/ui/login", url.Values{"token": {tc.token}})
		if code != tc.code || !strings.Contains(body, tc.want) || !strings.Contains(body, `<code class="field">token</code>`) {
			t.Errorf("token %q: %d, want %d with %q", tc.token, code, tc.code, tc.want)
		}
	}
	// A POST without a session is refused, not redirected to a GET.
	if code, _, _ := b.post("/ui/topics/a/pause", nil); code != 401 {
		t.Errorf("unsigned POST: %d", code)
	}
	code, _, h = b.post("/ui/login", url.Values{"token": {tokens["read"]}, "next": {"https://evil.example/"}})
	if code != http.StatusSeeOther || h.Get("Location") != "/ui/" {
		t.Fatalf("sign-in: %d → %q (an outside next must not be followed)", code, h.Get("Location"))
	}
	ck := h.Get("Set-Cookie")
	for _, want := range []string{"ontime_console=", "HttpOnly", "SameSite=Strict", "Path=/ui"} {
		if !strings.Contains(ck, want) {
			t.Errorf("cookie %q: no %s", ck, want)
		}
	}
	if strings.Contains(ck, "Secure") {
		t.Errorf("cookie %q: Secure over plain HTTP would never come back", ck)
	}
	if code, body, _ := b.get("/ui/"); code != 200 || !strings.Contains(body, "read (read)") {
		t.Fatalf("signed in: %d", code)
	}
	if code, _, _ := b.post("/ui/logout", nil); code != http.StatusSeeOther {
		t.Fatalf("logout: %d", code)
	}
	if code, _, _ := b.get("/ui/"); code != http.StatusSeeOther {
		t.Fatalf("after logout: %d", code)
	}
}

// TestSignInTLS: under TLS the sign-in cookie is Secure too.
func TestSignInTLS(t *testing.T) {
	t.Parallel()
	srv := nodeServer(t, true, httptest.NewTLSServer)
	b := newBrowser(t, srv.URL)
	b.hc.Transport = srv.Client().Transport
	code, _, h := b.post("/ui/login", url.Values{"token": {tokens["admin"]}})
	ck := h.Get("Set-Cookie")
	if code != http.StatusSeeOther || !strings.Contains(ck, "Secure") || !strings.Contains(ck, "HttpOnly") || !strings.Contains(ck, "SameSite=Strict") {
		t.Fatalf("sign-in over TLS: %d, cookie %q", code, ck)
	}
	if code, body, _ := b.get("/ui/"); code != 200 || !strings.Contains(body, "admin (admin)") {
		t.Fatalf("signed in over TLS: %d", code)
	}
}

// TestCSRF: a POST without the CSRF token, with another one, or from
// another site is refused 403 and does nothing.
func TestCSRF(t *testing.T) {
	t.Parallel()
	for _, auth := range []bool{false, true} {
		base := node(t, auth)
		tok := ""
		if auth {
			tok = tokens["admin"]
		}
		task := submit(t, base, tok, apiv1.TaskRequest{Topic: "csrf", Delay: "1h", Target: "http://127.0.0.1:1/x"})
		b := newBrowser(t, base)
		if auth {
			b.signIn("admin")
		} else {
			b.get("/ui/")
		}
		for _, csrf := range []string{"", strings.Repeat("0", 64)} {
			code, body, _ := b.post("/ui/tasks/"+task.ID+"/cancel", url.Values{"csrf": {csrf}})
			if code != 403 || !strings.Contains(body, `<code class="field">csrf</code>`) {
				t.Errorf("auth %v, csrf %q: %d", auth, csrf, code)
			}
		}
		req, _ := http.NewRequest(http.MethodPost, base+"/ui/tasks/"+task.ID+"/cancel", strings.NewReader(url.Values{"csrf": {b.csrf}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		if code, _, _ := b.do(req); code != 403 {
			t.Errorf("auth %v, cross-site: %d", auth, code)
		}
		if got := getTask(t, base, tok, task.ID); got.Status != "pending" {
			t.Fatalf("auth %v: a refused POST changed the task: %s", auth, got.Status)
		}
		// The right token works.
		if code, _, _ := b.post("/ui/tasks/"+task.ID+"/cancel", nil); code != http.StatusSeeOther {
			t.Errorf("auth %v, with the CSRF token: %d", auth, code)
		}
		if got := getTask(t, base, tok, task.ID); got.Status != "cancelled" {
			t.Errorf("auth %v: cancel did nothing: %s", auth, got.Status)
		}
	}
}

// TestReadToken: a read token sees no action buttons, and the server
// refuses each action anyway with the API's 403 in the page.
func TestReadToken(t *testing.T) {
	t.Parallel()
	base := node(t, true)
	task := submit(t, base, tokens["admin"], apiv1.TaskRequest{Topic: "ro", Key: "k", Delay: "1h", Target: "http://127.0.0.1:1/x"})
	dead := deadTask(t, base, tokens["admin"], "ro", "d")
	code, raw := api(t, base, tokens["admin"], http.MethodPost, "/v1/schedules", apiv1.ScheduleRequest{Name: "nightly", Cron: "0 3 * * *", Task: apiv1.ScheduleTask{Topic: "ro", Target: "http://127.0.0.1:1/x"}})
	if code != 201 {
		t.Fatalf("schedule: %d %s", code, raw)
	}
	b := newBrowser(t, base)
	b.signIn("read")
	for _, p := range []string{"/ui/tasks/" + task.ID, "/ui/tasks/" + dead.ID, "/ui/topics", "/ui/dead", "/ui/schedules"} {
		code, body, _ := b.get(p)
		if code != 200 {
			t.Fatalf("%s: %d", p, code)
		}
		for _, action := range []string{"/cancel\"", "/reschedule\"", "/payload\"", "/requeue\"", "/purge\"", "/pause\"", "/trigger\"", "Requeue selected", "Purge selected", "New schedule"} {
			if strings.Contains(body, action) {
				t.Errorf("%s shows %s to a read token", p, action)
			}
		}
	}
	for _, tc := range []struct{ path, field string }{
		{"/ui/tasks/" + task.ID + "/cancel", ""},
		{"/ui/tasks/" + dead.ID + "/requeue", ""},
		{"/ui/topics/ro/pause", ""},
		{"/ui/topics/ro/requeue", ""},
		{"/ui/schedules/nightly/trigger", ""},
		{"/ui/dead/requeue", ""},
		{"/ui/dead/purge", ""},
		{"/ui/tasks/" + dead.ID + "/purge", ""},
	} {
		form := url.Values{"id": {dead.ID}}
		code, body, _ := b.post(tc.path, form)
		if code != 403 || !strings.Contains(body, "403 forbidden") || !strings.Contains(body, "has role read") {
			t.Errorf("%s as read: %d %.300s", tc.path, code, body)
		}
	}
	if got := getTask(t, base, tokens["admin"], task.ID); got.Status != "pending" {
		t.Errorf("a read token changed the task: %s", got.Status)
	}
	if got := getTask(t, base, tokens["admin"], dead.ID); got.Status != "dead" {
		t.Errorf("a read token requeued: %s", got.Status)
	}
}

// TestBadInput: an unknown task ID, a malformed one, a malformed cron, a
// negative delay: answered in the page, with the status and field named.
func TestBadInput(t *testing.T) {
	t.Parallel()
	base := node(t, false)
	task := submit(t, base, "", apiv1.TaskRequest{Topic: "bad", Delay: "1h", Target: "http://127.0.0.1:1/x"})
	b := newBrowser(t, base)
	b.get("/ui/")
	missing := task.ID[:len(task.ID)-1] + map[bool]string{true: "1", false: "0"}[task.ID[len(task.ID)-1] == '0']
	fieldRe := func(f string) string { return `<code class="field">` + f + `</code>` }
	for _, tc := range []struct {
		name   string
		code   int
		field  string
		get    string
		post   string
		form   url.Values
		within string
	}{
		{name: "unknown id", get: "/ui/tasks/" + missing, code: 404, field: "id"},
		{name: "malformed id", get: "/ui/tasks/nope", code: 400, field: "id"},
		{name: "search by unknown id", get: "/ui/tasks?id=" + missing, code: http.StatusSeeOther},
		{name: "key without topic", get: "/ui/tasks?key=k", code: 400, field: "topic"},
		{name: "bad status", get: "/ui/tasks?status=late", code: 400, field: "status"},
		{name: "bad due time", get: "/ui/tasks?due_after=soon", code: 400, field: "due_after"},
		{name: "empty due range", get: "/ui/tasks?due_after=2030-01-02T00:00&due_before=2030-01-01T00:00", code: 400, field: "due_before"},
		{name: "negative delay", post: "/ui/tasks/" + task.ID + "/reschedule", form: url.Values{"delay": {"-5m"}}, code: 400, field: "delay"},
		{name: "time and delay", post: "/ui/tasks/" + task.ID + "/reschedule", form: url.Values{"delay": {"5m"}, "due_at": {"2030-01-01T00:00"}}, code: 400, field: "delay"},
		{name: "no time", post: "/ui/tasks/" + task.ID + "/reschedule", code: 400, field: "due_at"},
		{name: "bad payload", post: "/ui/tasks/" + task.ID + "/payload", form: url.Values{"payload": {"{nope"}}, code: 400, field: "payload", within: "{nope"},
		{name: "unknown task op", post: "/ui/tasks/" + task.ID + "/explode", code: 404, field: "op"},
		{name: "cancel unknown", post: "/ui/tasks/" + missing + "/cancel", code: 404, field: "id"},
		{name: "malformed cron preview", post: "/ui/schedules/preview", form: url.Values{"cron": {"61 * * * *"}}, code: 400, field: "cron"},
		{name: "malformed cron save", post: "/ui/schedules", form: url.Values{"name": {"s"}, "cron": {"not cron"}, "topic": {"t"}, "target": {"http://127.0.0.1:1/x"}}, code: 400, field: "cron"},
		{name: "schedule without name", post: "/ui/schedules", form: url.Values{"cron": {"@hourly"}, "topic": {"t"}}, code: 400, field: "name"},
		{name: "bad zone", post: "/ui/schedules", form: url.Values{"name": {"z"}, "cron": {"@hourly"}, "time_zone": {"Mars/Base"}, "topic": {"t"}, "target": {"http://127.0.0.1:1/x"}}, code: 400, field: "time_zone"},
		{name: "requeue nothing selected", post: "/ui/dead/requeue", code: 400, field: "id"},
		{name: "requeue all without topic", post: "/ui/dead/requeue", form: url.Values{"all": {"1"}}, code: 400, field: "topic"},
		{name: "purge nothing selected", post: "/ui/dead/purge", code: 400, field: "id"},
		{name: "purge all without topic", post: "/ui/dead/purge", form: url.Values{"all": {"1"}}, code: 400, field: "topic"},
		{name: "unknown dead op", post: "/ui/dead/cancel", form: url.Values{"id": {task.ID}}, code: 404, field: "op"},
		{name: "purge of a pending task", post: "/ui/tasks/" + task.ID + "/purge", code: 409},
		{name: "unknown job", post: "/ui/jobs/nojob/trigger", code: 404},
		{name: "unknown schedule", post: "/ui/schedules/nosched/trigger", code: 404},
	} {
		var code int
		var body string
		if tc.get != "" {
			code, body, _ = b.get(tc.get)
		} else {
			code, body, _ = b.post(tc.post, tc.form)
		}
		if code != tc.code {
			t.Errorf("%s: %d, want %d: %.400s", tc.name, code, tc.code, body)
			continue
		}
		if tc.field != "" && !strings.Contains(body, fieldRe(tc.field)) {
			t.Errorf("%s: the field %s is not named: %.600s", tc.name, tc.field, body)
		}
		if tc.within != "" && !strings.Contains(body, tc.within) {
			t.Errorf("%s: the form lost the input %q", tc.name, tc.within)
		}
	}
	if got := getTask(t, base, "", task.ID); got.Status != "pending" || !got.DueAt.Equal(task.DueAt) {
		t.Errorf("bad input changed the task: %+v", got)
	}
}

// TestActions: every action of the console does what it says, through the
// API: cancel, reschedule (a delay, a time), edit payload, requeue; topic
// pause, resume, requeue; dead letters by selection and all matching;
// schedule create, edit, pause, resume, trigger, delete.
func TestActions(t *testing.T) {
	t.Parallel()
	base := node(t, true)
	adm := tokens["admin"]
	b := newBrowser(t, base)
	b.signIn("admin")
	ok := func(what string, code int, h http.Header, back string) {
		t.Helper()
		if code != http.StatusSeeOther || !strings.HasPrefix(h.Get("Location"), back) {
			t.Fatalf("%s: %d → %q", what, code, h.Get("Location"))
		}
		if _, body, _ := b.get(h.Get("Location")); !strings.Contains(body, `class="flash"`) {
			t.Errorf("%s: no flash on the page it returned to", what)
		}
	}
	task := submit(t, base, adm, apiv1.TaskRequest{Topic: "act", Key: "a-1", Delay: "1h", Target: "http://127.0.0.1:1/x", Payload: json.RawMessage(`{"v":1}`)})
	b.get("/ui/tasks/" + task.ID)
	code, _, h := b.post("/ui/tasks/"+task.ID+"/reschedule", url.Values{"delay": {"3h"}})
	ok("reschedule by delay", code, h, "/ui/tasks/"+task.ID)
	if got := getTask(t, base, adm, task.ID); got.DueAt.Sub(task.DueAt) < 90*time.Minute {
		t.Errorf("reschedule by delay: due %v, was %v", got.DueAt, task.DueAt)
	}
	// A datetime-local value in the browser's zone (UTC-2: offset 120).
	code, _, h = b.post("/ui/tasks/"+task.ID+"/reschedule", url.Values{"due_at": {"2031-05-06T07:08"}, "tz_offset": {"120"}})
	ok("reschedule at a time", code, h, "/ui/tasks/"+task.ID)
	if got := getTask(t, base, adm, task.ID); !got.DueAt.Equal(time.Date(2031, 5, 6, 9, 8, 0, 0, time.UTC)) {
		t.Errorf("reschedule at a time: due %v", got.DueAt)
	}
	code, _, h = b.post("/ui/tasks/"+task.ID+"/payload", url.Values{"payload": {`{"v": 2}`}})
	ok("payload", code, h, "/ui/tasks/"+task.ID)
	if got := getTask(t, base, adm, task.ID); string(got.Payload) != `{"v":2}` && string(got.Payload) != `{"v": 2}` {
		t.Errorf("payload: %s", got.Payload)
	}
	code, _, h = b.post("/ui/tasks/"+task.ID+"/cancel", nil)
	ok("cancel", code, h, "/ui/tasks/"+task.ID)
	if got := getTask(t, base, adm, task.ID); got.Status != "cancelled" {
		t.Errorf("cancel: %s", got.Status)
	}
	// A cancelled task cannot be cancelled into anything else: the API's 409.
	if code, body, _ := b.post("/ui/tasks/"+task.ID+"/requeue", nil); code != 409 || !strings.Contains(body, "409 conflict") {
		t.Errorf("requeue of a cancelled task: %d", code)
	}

	d1 := deadTask(t, base, adm, "act", "d-1")
	code, _, h = b.post("/ui/tasks/"+d1.ID+"/requeue", nil)
	ok("requeue", code, h, "/ui/tasks/"+d1.ID)
	if got := getTask(t, base, adm, d1.ID); got.MovedBy != apiv1.MovedByRequeue {
		t.Errorf("requeue: %+v", got)
	}

	// Dead letters: a selection, then all of a topic, then all matching an error.
	d2, d3 := deadTask(t, base, adm, "dl", "d-2"), deadTask(t, base, adm, "dl", "d-3")
	if _, body, _ := b.get("/ui/dead?topic=dl"); !strings.Contains(body, d2.ID) || !strings.Contains(body, "connection refused") {
		t.Fatalf("dead page does not list %s with its error", d2.ID)
	}
	code, _, h = b.post("/ui/dead/requeue", url.Values{"id": {d2.ID}, "topic": {"dl"}, "back": {"/ui/dead?topic=dl"}})
	ok("requeue selected", code, h, "/ui/dead?topic=dl")
	if got := getTask(t, base, adm, d3.ID); got.Status != "dead" {
		t.Errorf("an unselected task was requeued: %s", got.Status)
	}
	code, _, h = b.post("/ui/dead/requeue", url.Values{"all": {"1"}, "topic": {"dl"}, "back": {"/ui/dead?topic=dl"}})
	ok("requeue all of a topic", code, h, "/ui/dead?topic=dl")
	if got := getTask(t, base, adm, d3.ID); got.Status == "dead" && got.MovedBy != apiv1.MovedByRequeue {
		t.Errorf("requeue all: %+v", got)
	}
	d4 := deadTask(t, base, adm, "dm", "d-4")
	code, _, h = b.post("/ui/dead/requeue", url.Values{"all": {"1"}, "error": {"no such text"}, "back": {"/ui/dead"}})
	ok("requeue matching nothing", code, h, "/ui/dead")
	if got := getTask(t, base, adm, d4.ID); got.Status != "dead" {
		t.Errorf("a task whose error does not match was requeued: %s", got.Status)
	}
	code, _, h = b.post("/ui/dead/requeue", url.Values{"all": {"1"}, "error": {"connection refused"}, "back": {"/ui/dead"}})
	ok("requeue matching", code, h, "/ui/dead")
	if got := getTask(t, base, adm, d4.ID); got.MovedBy != apiv1.MovedByRequeue {
		t.Errorf("requeue matching: %+v", got)
	}

	// Purge ("cancel" of dead letters: they are final, so they go): one
	// from its page, a selection, all of a topic, all matching an error.
	p1 := deadTask(t, base, adm, "pu", "p-1")
	if _, body, _ := b.get("/ui/tasks/" + p1.ID); !strings.Contains(body, "/ui/tasks/"+p1.ID+"/purge") {
		t.Errorf("a dead task's page has no purge")
	}
	code, _, h = b.post("/ui/tasks/"+p1.ID+"/purge", nil)
	ok("purge one", code, h, "/ui/dead?topic=pu")
	p2, p3, p4 := deadTask(t, base, adm, "pu", "p-2"), deadTask(t, base, adm, "pu", "p-3"), deadTask(t, base, adm, "pu", "p-4")
	if _, body, _ := b.get("/ui/dead?topic=pu"); !strings.Contains(body, "Purge all matching") || !strings.Contains(body, `formaction="/ui/dead/purge"`) {
		t.Errorf("the dead letters of a topic offer no purge")
	}
	code, _, h = b.post("/ui/dead/purge", url.Values{"id": {p2.ID}, "topic": {"pu"}, "back": {"/ui/dead?topic=pu"}})
	ok("purge selected", code, h, "/ui/dead?topic=pu")
	if got := getTask(t, base, adm, p3.ID); got.Status != "dead" {
		t.Errorf("an unselected task was purged: %s", got.Status)
	}
	code, _, h = b.post("/ui/dead/purge", url.Values{"all": {"1"}, "topic": {"pu"}, "back": {"/ui/dead?topic=pu"}})
	ok("purge all of a topic", code, h, "/ui/dead?topic=pu")
	p5 := deadTask(t, base, adm, "pv", "p-5")
	code, _, h = b.post("/ui/dead/purge", url.Values{"all": {"1"}, "error": {"no such text"}, "back": {"/ui/dead"}})
	ok("purge matching nothing", code, h, "/ui/dead")
	if got := getTask(t, base, adm, p5.ID); got.Status != "dead" {
		t.Errorf("a task whose error does not match was purged: %s", got.Status)
	}
	code, _, h = b.post("/ui/dead/purge", url.Values{"all": {"1"}, "error": {"connection refused"}, "back": {"/ui/dead"}})
	ok("purge matching", code, h, "/ui/dead")
	for _, id := range []string{p1.ID, p2.ID, p3.ID, p4.ID, p5.ID} {
		if code, raw := api(t, base, adm, http.MethodGet, "/v1/tasks/"+id, nil); code != 404 {
			t.Errorf("purged task %s: %d %s", id, code, raw)
		}
	}

	// Topics.
	code, _, h = b.post("/ui/topics/act/pause", nil)
	ok("pause", code, h, "/ui/topics")
	if _, body, _ := b.get("/ui/topics"); !strings.Contains(body, "paused</span>") || !strings.Contains(body, "/ui/topics/act/resume") {
		t.Errorf("topics page does not show act paused")
	}
	code, _, h = b.post("/ui/topics/act/resume", nil)
	ok("resume", code, h, "/ui/topics")
	d5 := deadTask(t, base, adm, "tq", "d-5")
	code, _, h = b.post("/ui/topics/tq/requeue", nil)
	ok("topic requeue", code, h, "/ui/topics")
	if got := getTask(t, base, adm, d5.ID); got.MovedBy != apiv1.MovedByRequeue {
		t.Errorf("topic requeue: %+v", got)
	}

	// Schedules.
	code, _, h = b.post("/ui/schedules", url.Values{"name": {"s1"}, "cron": {"0 9 * * 1-5"}, "time_zone": {"Europe/Paris"}, "topic": {"sched"}, "target": {"http://127.0.0.1:1/x"}, "payload": {`{"a":1}`}, "misfire": {"skip"}})
	ok("create schedule", code, h, "/ui/schedules")
	if _, body, _ := b.get("/ui/schedules/s1/edit"); !strings.Contains(body, "at 09:00") || !strings.Contains(body, "Monday–Friday") || strings.Count(body, "<li>") < 5 {
		t.Errorf("edit form: the cron is not explained with 5 fire times:\n%s", body)
	}
	code, _, h = b.post("/ui/schedules", url.Values{"editing": {"1"}, "name": {"s1"}, "cron": {"@hourly"}, "topic": {"sched"}, "target": {"http://127.0.0.1:1/x"}, "misfire": {"fire_once"}})
	ok("edit schedule", code, h, "/ui/schedules")
	code, raw := api(t, base, adm, http.MethodGet, "/v1/schedules/s1", nil)
	var s apiv1.Schedule
	if code != 200 || json.Unmarshal(raw, &s) != nil || s.Cron != "@hourly" || s.Misfire != "fire_once" {
		t.Errorf("edit schedule: %d %s", code, raw)
	}
	for _, op := range []string{"pause", "resume", "trigger"} {
		code, _, h = b.post("/ui/schedules/s1/"+op, nil)
		ok("schedule "+op, code, h, "/ui/schedules")
	}
	if _, raw := api(t, base, adm, http.MethodGet, "/v1/tasks?topic=sched", nil); !strings.Contains(string(raw), `"key":"s1+trigger@`) {
		t.Errorf("trigger made no task: %s", raw)
	}
	code, _, h = b.post("/ui/schedules/s1/delete", nil)
	ok("delete schedule", code, h, "/ui/schedules")
	if code, _ := api(t, base, adm, http.MethodGet, "/v1/schedules/s1", nil); code != 404 {
		t.Errorf("deleted schedule: %d", code)
	}
}

// TestVendoredChecksums: the embedded libraries are the files VENDOR.md
// records.
func TestVendoredChecksums(t *testing.T) {
	t.Parallel()
	md, err := os.ReadFile("assets/VENDOR.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([^`]+)` \\|.*\\| `([0-9a-f]{64})` \\|$")
	rows := row.FindAllStringSubmatch(string(md), -1)
	if len(rows) != 3 {
		t.Fatalf("VENDOR.md lists %d files", len(rows))
	}
	for _, r := range rows {
		b, err := os.ReadFile(filepath.Join("assets", r[1]))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		if got := hex.EncodeToString(sum[:]); got != r[2] {
			t.Errorf("%s: sha256 %s, VENDOR.md says %s", r[1], got, r[2])
		}
	}
}

// TestScheduleLastFires: the schedules list shows a schedule's last fire
// times with the tasks they made.
func TestScheduleLastFires(t *testing.T) {
	t.Parallel()
	base := node(t, false)
	code, raw := api(t, base, "", http.MethodPost, "/v1/schedules", apiv1.ScheduleRequest{Name: "tick", Cron: "* * * * * *", Task: apiv1.ScheduleTask{Topic: "ticks", Target: "http://127.0.0.1:1/x"}})
	if code != 201 {
		t.Fatalf("schedule: %d %s", code, raw)
	}
	b := newBrowser(t, base)
	re := regexp.MustCompile(`<a href="/ui/tasks/([0-9a-z]+)">[^<]+</a> <span class="badge`)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		_, body, _ := b.get("/ui/schedules")
		if m := re.FindStringSubmatch(body); m != nil {
			if got := getTask(t, base, "", m[1]); got.Topic != "ticks" || !strings.HasPrefix(got.Key, "tick@") {
				t.Fatalf("the last fire links to %+v", got)
			}
			return
		}
	}
	t.Fatal("the schedules page never showed a last fire with its task")
}
