package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/ontimehq/ontime/internal/api/apitest"
)

// cli runs the CLI against a real node behind a real HTTP server.
type cli struct {
	t      *testing.T
	server string
}

func newCLI(t *testing.T) cli {
	return cli{t: t, server: apitest.Start(t, nil)}
}

func (c cli) run(args ...string) (code int, stdout, stderr string) {
	return runCLI(append(args, "--server", c.server)...)
}

func runCLI(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(context.Background(), args, &o, &e)
	return code, o.String(), e.String()
}

func oneLine(t *testing.T, stderr string) {
	t.Helper()
	if lines := strings.Split(strings.TrimSpace(stderr), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], "ontime: ") {
		t.Fatalf("stderr %q: want one line starting with 'ontime: '", stderr)
	}
}

// cliTask is a task printed with --json.
type cliTask struct {
	ID, Status, Topic, Key string
	Attempts, Priority     int
	DueAt                  time.Time `json:"due_at"`
	FirstDueAt             time.Time `json:"first_due_at"`
}

// taskJSON decodes a task printed with --json.
func taskJSON(t *testing.T, out string) (tk cliTask) {
	t.Helper()
	if err := json.Unmarshal([]byte(out), &tk); err != nil || tk.ID == "" {
		t.Fatalf("not a task as JSON: %v %q", err, out)
	}
	return tk
}

func TestCLISubmitGetListCancel(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	dataFile := filepath.Join(t.TempDir(), "p.json")
	os.WriteFile(dataFile, []byte(`{"order": 42}`), 0o644)

	code, out, errs := c.run("submit", "--topic", "cli.test", "--key", "o-42", "--in", "1h", "--target", "http://127.0.0.1:9/hook", "--data", "@"+dataFile, "--json")
	if code != 0 {
		t.Fatalf("submit: %d %s", code, errs)
	}
	tk := taskJSON(t, out)
	if tk.Status != "pending" || tk.Key != "o-42" {
		t.Fatalf("submit --json: %q", out)
	}
	// Resubmit: same task, said so.
	code, out, _ = c.run("submit", "--topic", "cli.test", "--key", "o-42", "--in", "2h", "--target", "http://127.0.0.1:9/hook")
	if code != 0 || !strings.Contains(out, tk.ID) || !strings.Contains(out, "exists already") {
		t.Fatalf("resubmit: %d %q", code, out)
	}
	code, out, _ = c.run("submit", "--topic", "cli.other", "--in", "2h", "--target", "http://127.0.0.1:9/hook")
	if code != 0 || !strings.Contains(out, " submitted, due ") {
		t.Fatalf("submit: %d %q", code, out)
	}
	// Without a target, on a node no Go handler runs on: refused, saying why.
	code, _, errs = c.run("submit", "--topic", "cli.nobody", "--in", "2h")
	if code != 1 || !strings.Contains(errs, "target: is required") || !strings.Contains(errs, `no live node has a Go handler for topic "cli.nobody"`) {
		t.Fatalf("submit without a target: %d %q", code, errs)
	}
	code, out, _ = c.run("get", tk.ID)
	if code != 0 || !strings.Contains(out, "pending") || !strings.Contains(out, `{"order":42}`) || !strings.Contains(out, "http://127.0.0.1:9/hook") {
		t.Fatalf("get: %d %q", code, out)
	}
	code, out, _ = c.run("get", tk.ID, "--json")
	if code != 0 || taskJSON(t, out).ID != tk.ID {
		t.Fatalf("get --json: %d %q", code, out)
	}
	code, out, _ = c.run("list", "--topic", "cli.test")
	if code != 0 || !strings.Contains(out, tk.ID) || !strings.Contains(out, "STATUS") || strings.Contains(out, "cli.other") {
		t.Fatalf("list: %d %q", code, out)
	}
	code, out, _ = c.run("list", "--limit", "1", "--json")
	var page struct {
		Tasks []struct{ ID string }
		Next  string `json:"next_cursor"`
	}
	if err := json.Unmarshal([]byte(out), &page); code != 0 || err != nil || len(page.Tasks) != 1 || page.Next == "" {
		t.Fatalf("list --json: %d %v %q", code, err, out)
	}
	code, out, _ = c.run("list", "--limit", "1", "--cursor", page.Next)
	if code != 0 || strings.Contains(out, page.Tasks[0].ID) || !strings.Contains(out, "more: --cursor") {
		t.Fatalf("list, second page: %d %q", code, out)
	}
	code, out, _ = c.run("cancel", tk.ID, "--json")
	if code != 0 || !strings.Contains(out, `"status":"cancelled"`) {
		t.Fatalf("cancel: %d %q", code, out)
	}
	code, out, _ = c.run("cancel", tk.ID) // cancel is idempotent
	if code != 0 || !strings.Contains(out, "cancelled") {
		t.Fatalf("cancel of a cancelled task: exit %d %q", code, out)
	}
	code, _, errs = c.run("requeue", tk.ID)
	if code != exitConflict || !strings.Contains(errs, "409") {
		t.Fatalf("requeue of a cancelled task: %d %q", code, errs)
	}
	oneLine(t, errs)
}

// waitStatus polls `get` until the task has the status (30 s at most).
func (c cli) waitStatus(id, status string) cliTask {
	c.t.Helper()
	return c.waitTask(id, status, func(tk cliTask) bool { return tk.Status == status })
}

// waitTask polls `get` until ok holds for the task (30 s at most).
func (c cli) waitTask(id, what string, ok func(cliTask) bool) cliTask {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, out, errs := c.run("get", id, "--json")
		if code != 0 {
			c.t.Fatalf("get: %d %s", code, errs)
		}
		if tk := taskJSON(c.t, out); ok(tk) {
			return tk
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("not %s after 30s: %s", what, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestCLIGetKeepsFirstDue: after a failed attempt, get shows the next
// attempt's due time and, beside it, the time the task was first due.
func TestCLIGetKeepsFirstDue(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusInternalServerError)
	}))
	t.Cleanup(hook.Close)
	_, out, _ := c.run("submit", "--topic", "cli.retry", "--target", hook.URL, "--max-attempts", "5", "--json")
	sub := taskJSON(t, out)
	if !sub.FirstDueAt.Equal(sub.DueAt) {
		t.Fatalf("submitted: first due %s, due %s", sub.FirstDueAt, sub.DueAt)
	}
	// Between attempts a task is pending, or claimed when its retry is due
	// within the window (it waits in the hot tier).
	tk := c.waitTask(sub.ID, "retried", func(tk cliTask) bool {
		return tk.Attempts >= 1 && (tk.Status == "pending" || tk.Status == "claimed")
	})
	if !tk.FirstDueAt.Equal(sub.DueAt) || !tk.DueAt.After(sub.DueAt) {
		t.Fatalf("after a retry: first due %s, due %s; submitted due %s", tk.FirstDueAt, tk.DueAt, sub.DueAt)
	}
	code, out, _ := c.run("get", sub.ID)
	if code != 0 || !strings.Contains(out, "first due    "+sub.DueAt.Local().Format(time.RFC3339Nano)) || !strings.Contains(out, "a retry moved it") {
		t.Fatalf("get: %d %q", code, out)
	}
	c.run("cancel", sub.ID)
}

// TestCLIGetSaysWhatMovedIt: get names what moved a task's due time from
// its first — an update, a requeue — as the server recorded it, and says
// nothing of retries when none moved it.
func TestCLIGetSaysWhatMovedIt(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusInternalServerError)
	}))
	t.Cleanup(hook.Close)

	_, out, _ := c.run("submit", "--topic", "cli.moved", "--target", hook.URL, "--in", "1h", "--json")
	sub := taskJSON(t, out)
	code, out, errs := c.run("update", sub.ID, "--in", "2h")
	if code != 0 || !strings.Contains(out, "an update moved it") || strings.Contains(out, "retr") {
		t.Fatalf("update: %d %q %q", code, out, errs)
	}
	code, out, _ = c.run("get", sub.ID, "--json")
	if code != 0 || !strings.Contains(out, `"moved_by":"update"`) {
		t.Fatalf("get --json after an update: %d %q", code, out)
	}

	_, out, _ = c.run("submit", "--topic", "cli.moved", "--target", hook.URL, "--max-attempts", "1", "--json")
	dead := taskJSON(t, out)
	c.waitStatus(dead.ID, "dead")
	if code, out, _ = c.run("get", dead.ID); code != 0 || strings.Contains(out, "first due") {
		t.Fatalf("get of a dead task whose due time never moved: %d %q", code, out)
	}
	code, out, errs = c.run("requeue", dead.ID)
	if code != 0 || !strings.Contains(out, "a requeue moved it") || strings.Contains(out, "retr") {
		t.Fatalf("requeue: %d %q %q", code, out, errs)
	}
	c.run("cancel", sub.ID)
}

// TestCLIRequeueDead: a task whose only attempt failed is dead; requeue
// returns it to pending.
func TestCLIRequeueDead(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	var healthy atomic.Bool
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !healthy.Load() {
			http.Error(w, "no", http.StatusInternalServerError)
		}
	}))
	t.Cleanup(hook.Close)
	code, out, errs := c.run("submit", "--topic", "cli.dead", "--target", hook.URL, "--max-attempts", "1", "--json")
	if code != 0 {
		t.Fatalf("submit: %d %s", code, errs)
	}
	id := taskJSON(t, out).ID
	c.waitStatus(id, "dead")
	code, out, _ = c.run("list", "--status", "dead")
	if code != 0 || !strings.Contains(out, id) || !strings.Contains(out, "1/1") {
		t.Fatalf("list --status dead: %d %q", code, out)
	}
	healthy.Store(true)
	code, out, errs = c.run("requeue", id, "--json")
	if tk := taskJSON(t, out); code != 0 || tk.ID != id || tk.Status == "dead" || tk.Attempts != 0 {
		t.Fatalf("requeue: %d %q %q", code, out, errs)
	}
	c.waitStatus(id, "done")
	code, _, errs = c.run("requeue", id)
	if code != exitConflict || !strings.Contains(errs, "409") {
		t.Fatalf("requeue of a done task: %d %q", code, errs)
	}
	// Purge deletes the final task; then it is not found.
	code, out, errs = c.run("purge", id, "--json")
	if tk := taskJSON(t, out); code != 0 || tk.ID != id || tk.Status != "done" {
		t.Fatalf("purge: %d %q %q", code, out, errs)
	}
	if code, _, errs = c.run("get", id); code != exitNotFound {
		t.Fatalf("get of a purged task: %d %q", code, errs)
	}
}

func TestCLIErrors(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"submit", "--in", "1s"}, 2, "--topic is required"},
		{[]string{"submit", "--topic", "t", "--in", "soon"}, 2, "--in"},
		{[]string{"submit", "--topic", "t", "--at", "tomorrow"}, 2, "--at"},
		{[]string{"submit", "--topic", "t", "--in", "1s", "--at", "2030-01-01T00:00:00Z"}, 2, "not both"},
		{[]string{"submit", "--topic", "t", "--data", "{"}, 2, "--data"},
		{[]string{"submit", "--topic", "t", "--data", "@/nonexistent"}, 2, "--data"},
		{[]string{"submit", "--topic", "t", "--max-attempts", "x"}, 2, "--max-attempts"},
		{[]string{"submit", "--topic", "t", "extra"}, 2, "unexpected argument"},
		{[]string{"submit", "--topic", "bad topic"}, 1, "topic"},
		{[]string{"submit", "--topic", "t", "--target", "ftp://x"}, 1, "target"},
		{[]string{"get"}, 2, "1 task ID"},
		{[]string{"get", "a", "b"}, 2, "1 task ID"},
		{[]string{"get", "nope"}, 1, "HTTP 400"},
		{[]string{"get", strings.Repeat("0", 26)}, 3, "HTTP 404"},
		{[]string{"cancel", strings.Repeat("0", 26)}, 3, "HTTP 404"},
		{[]string{"requeue", strings.Repeat("0", 26)}, 3, "HTTP 404"},
		{[]string{"list", "--status", "sleeping"}, 2, `--status: "sleeping" is not one of pending`},
		{[]string{"key", "bogus"}, 2, `unknown verb "bogus"; ontime key takes cancel, get, update`},
		{[]string{"jobs", "bogus"}, 2, `unknown verb "bogus"`},
		{[]string{"completion", "tcsh"}, 2, `unknown verb "tcsh"; ontime completion takes bash, fish, powershell, zsh`},
		{[]string{"key"}, 2, "which verb? cancel, get, update"},
		{[]string{"jobs"}, 2, "which verb?"},
		{[]string{"completion"}, 2, "which verb?"},
		{[]string{"topics", "bogus"}, 2, `unknown verb "bogus"; ontime topics takes get, pause, requeue, resume, set`},
		{[]string{"schedules", "put", "n", "--cron", "@hourly", "--topic", "t", "--misfire", "later"}, 2, `--misfire: "later" is not one of skip, fire_once`},
		{[]string{"schedules", "put", "n", "--cron", "@hourly", "--topic", "t", "--max-attempts", "0"}, 2, "--max-attempts"},
		{[]string{"jobs", "runs", "j", "--limit", "0"}, 2, "--limit"},
		{[]string{"list", "--limit", "0"}, 2, "--limit"},
		{[]string{"list", "--frob"}, 2, "unknown flag"},
		{[]string{"cluster", "x"}, 2, "unexpected argument"},
		{[]string{"version", "x"}, 2, "unexpected argument"},
		{[]string{"frobnicate"}, 2, "unknown command"},
		{[]string{"serve", "--config", "/nonexistent.yaml"}, 2, "--server is for the client verbs"},
	} {
		code, _, errs := c.run(tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d stderr %q; want %d and %q", tc.args, code, errs, tc.code, tc.want)
			continue
		}
		oneLine(t, errs)
	}
	for _, server := range []string{"ftp://x", "http://h:1/path", "h:1?x=1", ""} {
		code, _, errs := runCLI("list", "--server", server)
		if code != exitUsage || !strings.Contains(errs, "--server") {
			t.Errorf("--server %q: exit %d %q", server, code, errs)
		}
	}
}

// TestCLIUnknownVerbs: every verb that has verbs of its own refuses one
// it does not have with exit 2, and one given none asks which, instead of
// printing its help and exiting 0 (README: an unknown verb is usage, 2).
func TestCLIUnknownVerbs(t *testing.T) {
	t.Parallel()
	root := newRootCmd(&globals{env: func(string) string { return "" }})
	root.InitDefaultCompletionCmd()
	groups := 0
	walk(root, func(cmd *cobra.Command) {
		if !cmd.HasParent() || !cmd.HasAvailableSubCommands() {
			return
		}
		groups++
		path := strings.Fields(cmd.CommandPath())[1:]
		code, out, errs := runCLI(append(path, "frobnicate")...)
		if code != exitUsage || !strings.Contains(errs, `unknown verb "frobnicate"`) || out != "" {
			t.Errorf("%v frobnicate: exit %d stdout %q stderr %q; want 2 and unknown verb", path, code, out, errs)
		}
		if !cmd.Runnable() || cmd.Name() == "schedules" || cmd.Name() == "shard" {
			code, out, errs = runCLI(path...)
			if code != exitUsage || !strings.Contains(errs, "which") || out != "" {
				t.Errorf("%v: exit %d stdout %q stderr %q; want 2 and which verb", path, code, out, errs)
			}
		}
	})
	if groups < 6 { // key, topics, schedules, jobs, shard, completion
		t.Fatalf("only %d verbs with verbs of their own", groups)
	}
}

// TestCLIUnreachable: no server, one line with a hint, exit 5.
func TestCLIUnreachable(t *testing.T) {
	t.Parallel()
	// A port that was just free: nothing listens there.
	ln := httptest.NewServer(http.NotFoundHandler())
	addr := ln.Listener.Addr().String()
	ln.Close()
	for _, args := range [][]string{
		{"get", strings.Repeat("0", 26)},
		{"list"},
		{"cluster"},
		{"submit", "--topic", "t"},
	} {
		code, _, errs := runCLI(append(args, "--server", addr)...)
		if code != exitUnreachable || !strings.Contains(errs, "cannot reach the server at http://"+addr) || !strings.Contains(errs, "ONTIME_SERVER") {
			t.Errorf("%v: exit %d %q", args, code, errs)
		}
		oneLine(t, errs)
	}
}

// TestCLIServerFlag: --server takes host:port without a scheme, and
// ONTIME_SERVER is its default.
func TestCLIServerFlag(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	hostport := strings.TrimPrefix(c.server, "http://")
	if code, out, errs := runCLI("list", "--server", hostport); code != 0 || !strings.Contains(out, "STATUS") {
		t.Fatalf("--server %s: %d %q %q", hostport, code, out, errs)
	}
	g := &globals{env: func(k string) string {
		if k == "ONTIME_SERVER" {
			return hostport
		}
		return ""
	}}
	root := newRootCmd(g)
	var o, e bytes.Buffer
	root.SetArgs([]string{"cluster", "--json"})
	root.SetOut(&o)
	root.SetErr(&e)
	if err := root.Execute(); err != nil || !strings.Contains(o.String(), `"coordinator":"none"`) {
		t.Fatalf("ONTIME_SERVER=%s: %v %q", hostport, err, o.String())
	}
	for in, want := range map[string]string{
		"localhost:7070":         "http://localhost:7070",
		":7070":                  "http://127.0.0.1:7070",
		"https://ontime.example": "https://ontime.example",
		"http://h:1/":            "http://h:1",
	} {
		if got, err := serverURL(in); err != nil || got != want {
			t.Errorf("serverURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// TestCLIUnauthorized: 401 and 403 answers exit 6.
func TestCLIUnauthorized(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusUnauthorized, http.StatusForbidden} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			w.Write([]byte(`{"error":{"code":"unauthorized","message":"a bearer token is required"}}`))
		}))
		code, _, errs := runCLI("list", "--server", srv.URL)
		srv.Close()
		if code != exitUnauthorized || !strings.Contains(errs, "a bearer token is required") {
			t.Errorf("HTTP %d: exit %d %q", status, code, errs)
		}
	}
}

// TestCLICluster: one line per node by default, every item with --items.
func TestCLICluster(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	code, out, _ := c.run("cluster")
	if code != 0 || !strings.Contains(out, "coordinator none") || !strings.Contains(out, "MAX SCAN LAG") || !strings.Contains(out, "VERSION") || strings.Contains(out, "0.0.0") {
		t.Fatalf("cluster: %d %q", code, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 { // summary, blank, header, one node
		t.Fatalf("cluster of one node printed %d lines: %q", len(lines), out)
	}
	code, out, _ = c.run("cluster", "--items")
	if code != 0 || !strings.Contains(out, "0.0.0") || !strings.Contains(out, "OWNER") {
		t.Fatalf("cluster --items: %d %q", code, out)
	}
	code, out, _ = c.run("cluster", "--json")
	var v struct {
		Coordinator string
		Nodes       []struct{ ID string }
		Items       []struct{ Item string }
	}
	if err := json.Unmarshal([]byte(out), &v); code != 0 || err != nil || len(v.Nodes) != 1 || len(v.Items) != 0 {
		t.Fatalf("cluster --json: %d %v %q", code, err, out)
	}
	code, out, _ = c.run("cluster", "--json", "--items")
	if err := json.Unmarshal([]byte(out), &v); code != 0 || err != nil || len(v.Items) == 0 {
		t.Fatalf("cluster --json --items: %d %v %q", code, err, out)
	}
}

// walk calls f on every command under root.
func walk(c *cobra.Command, f func(*cobra.Command)) {
	f(c)
	for _, sub := range c.Commands() {
		walk(sub, f)
	}
}

// TestCLIHelp: every verb answers -h, --help and `help VERB` on stdout with
// exit 0, and has a summary and examples.
func TestCLIHelp(t *testing.T) {
	t.Parallel()
	root := newRootCmd(&globals{env: func(string) string { return "" }})
	walk(root, func(cmd *cobra.Command) {
		path := strings.Fields(cmd.CommandPath())[1:]
		generated := cmd.Name() == "help" || (len(path) > 0 && path[0] == "completion")
		if !generated && (cmd.Short == "" || (cmd.Runnable() && cmd.Example == "")) {
			t.Errorf("%q: no summary or no examples", cmd.CommandPath())
		}
		for _, flag := range []string{"-h", "--help"} {
			code, out, errs := runCLI(append(append([]string{}, path...), flag)...)
			if code != 0 || !strings.Contains(out, "Usage:") || errs != "" {
				t.Errorf("%v %s: exit %d stdout %q stderr %q", path, flag, code, out, errs)
			}
			if !generated && cmd.Runnable() && !strings.Contains(out, "Examples:") {
				t.Errorf("%v %s: no examples in %q", path, flag, out)
			}
		}
		if len(path) > 0 && !generated {
			code, out, _ := runCLI(append([]string{"help"}, path...)...)
			if code != 0 || !strings.Contains(out, cmd.Long) {
				t.Errorf("help %v: exit %d %q", path, code, out)
			}
		}
	})
	if code, _, errs := runCLI("help", "frob"); code != exitUsage || !strings.Contains(errs, `no verb "frob"`) {
		t.Errorf("help frob: exit %d %q", code, errs)
	}
	for _, args := range [][]string{{}, {"help"}} {
		code, out, _ := runCLI(args...)
		if code != 0 || !strings.Contains(out, "submit") || !strings.Contains(out, "Exit codes") {
			t.Errorf("%v: exit %d %q", args, code, out)
		}
	}
}

func TestCLIVersion(t *testing.T) {
	t.Parallel()
	code, out, _ := runCLI("version")
	if code != 0 || !strings.HasPrefix(out, "ontime ") || !strings.Contains(out, "go1.") {
		t.Fatalf("version: %d %q", code, out)
	}
	code, out2, _ := runCLI("--version")
	if code != 0 || out2 != out {
		t.Fatalf("--version: %d %q, want %q", code, out2, out)
	}
	code, out, _ = runCLI("version", "--json")
	var v versionJSON
	if err := json.Unmarshal([]byte(out), &v); code != 0 || err != nil || v.Version == "" || !strings.HasPrefix(v.Go, "go1.") || v.Revision != v.Commit {
		t.Fatalf("version --json: %d %v %q", code, err, out)
	}
}

// TestCLICompletion: shell scripts for the usual shells, and task IDs
// completed from the server.
func TestCLICompletion(t *testing.T) {
	t.Parallel()
	for _, sh := range []string{"bash", "zsh", "fish", "powershell"} {
		code, out, errs := runCLI("completion", sh)
		if code != 0 || !strings.Contains(out, "ontime") || errs != "" {
			t.Errorf("completion %s: exit %d %q", sh, code, errs)
		}
	}
	c := newCLI(t)
	_, out, _ := c.run("submit", "--topic", "cli.complete", "--in", "1h", "--target", "http://127.0.0.1:9/hook", "--json")
	id := taskJSON(t, out).ID
	code, out, _ := runCLI(cobra.ShellCompRequestCmd, "--server", c.server, "get", "")
	if code != 0 || !strings.Contains(out, id) {
		t.Fatalf("completing get: %d %q", code, out)
	}
	code, out, _ = runCLI(cobra.ShellCompRequestCmd, "list", "--status", "")
	if code != 0 || !strings.Contains(out, "dead") || !strings.Contains(out, "cancelled") {
		t.Fatalf("completing --status: %d %q", code, out)
	}
}

// TestCLISubmitOverAFinalTask: submit --key over a cancelled task says the
// key is held and until when, and exits 4; --replace makes a new task,
// and the same command again finds it.
func TestCLISubmitOverAFinalTask(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	args := []string{"submit", "--topic", "cli.held", "--key", "order-42", "--in", "1h", "--target", "http://127.0.0.1:9/hook"}
	code, out, errs := c.run(append(args, "--json")...)
	if code != 0 {
		t.Fatalf("submit: %d %s", code, errs)
	}
	first := taskJSON(t, out)
	if code, _, errs = c.run("cancel", first.ID); code != 0 {
		t.Fatalf("cancel: %d %s", code, errs)
	}
	code, out, errs = c.run(args...)
	if code != exitConflict || !strings.Contains(errs, "held by cancelled task "+first.ID+" until ") || !strings.Contains(errs, "--replace") || strings.Contains(out, "exists already") {
		t.Fatalf("submit over a cancelled task: exit %d, out %q, err %q", code, out, errs)
	}
	oneLine(t, errs)
	code, out, _ = c.run(append(args, "--json")...)
	var held struct {
		ID    string
		Until *time.Time `json:"key_held_until"`
	}
	if err := json.Unmarshal([]byte(out), &held); code != exitConflict || err != nil || held.ID != first.ID || held.Until == nil {
		t.Fatalf("submit --json over a cancelled task: exit %d %v %q", code, err, out)
	}
	code, out, errs = c.run(append(args, "--replace", "--json")...)
	made := taskJSON(t, out)
	if code != 0 || made.ID == first.ID || made.Status != "pending" {
		t.Fatalf("submit --replace over a cancelled task: exit %d %q %s", code, out, errs)
	}
	code, out, errs = c.run(append(args, "--replace")...)
	if code != 0 || !strings.Contains(out, made.ID+" replaced") {
		t.Fatalf("retried submit --replace: exit %d %q %s, want %s replaced", code, out, errs, made.ID)
	}
}

// --priority: 0 to 9, shown by get; out of range, a usage error naming it.
func TestCLISubmitPriority(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	code, out, errs := c.run("submit", "--topic", "cli.prio", "--in", "1h", "--target", "http://127.0.0.1:9/hook", "--priority", "7", "--json")
	if code != 0 {
		t.Fatalf("submit: %d %s", code, errs)
	}
	tk := taskJSON(t, out)
	if tk.Priority != 7 {
		t.Fatalf("submit --priority 7: priority %d", tk.Priority)
	}
	if code, out, _ = c.run("get", tk.ID); code != 0 || !strings.Contains(out, "priority     7") {
		t.Fatalf("get: %d %q", code, out)
	}
	code, _, errs = c.run("submit", "--topic", "cli.prio", "--target", "http://127.0.0.1:9/hook", "--priority", "10")
	if code != exitUsage || !strings.Contains(errs, "--priority: 10; want 0 to 9") {
		t.Fatalf("submit --priority 10: %d %q", code, errs)
	}
}
