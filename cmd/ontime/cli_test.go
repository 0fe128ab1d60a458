package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ontimehq/ontime/internal/nodetest"
)

// cli runs the CLI against a real node behind a real HTTP server.
type cli struct {
	t      *testing.T
	server string
}

func newCLI(t *testing.T) cli {
	return cli{t: t, server: nodetest.Start(t, nil)}
}

func (c cli) run(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(context.Background(), append(args, "--server", c.server), &o, &e)
	return code, o.String(), e.String()
}

func oneLine(t *testing.T, stderr string) {
	t.Helper()
	if lines := strings.Split(strings.TrimSpace(stderr), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], "ontime: ") {
		t.Fatalf("stderr %q: want one line starting with 'ontime: '", stderr)
	}
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
	var tk struct{ ID, Status, Topic, Key string }
	if err := json.Unmarshal([]byte(out), &tk); err != nil || tk.Status != "pending" || tk.Key != "o-42" {
		t.Fatalf("submit --json: %v %q", err, out)
	}
	// Resubmit: same task, said so.
	code, out, _ = c.run("submit", "--topic", "cli.test", "--key", "o-42", "--in", "2h")
	if code != 0 || !strings.Contains(out, tk.ID) || !strings.Contains(out, "exists already") {
		t.Fatalf("resubmit: %d %q", code, out)
	}
	code, out, _ = c.run("get", tk.ID)
	if code != 0 || !strings.Contains(out, "pending") || !strings.Contains(out, `{"order":42}`) {
		t.Fatalf("get: %d %q", code, out)
	}
	code, out, _ = c.run("list", "--topic", "cli.test")
	if code != 0 || !strings.Contains(out, tk.ID) || !strings.Contains(out, "STATUS") {
		t.Fatalf("list: %d %q", code, out)
	}
	code, out, _ = c.run("cluster")
	if code != 0 || !strings.Contains(out, "coordinator none") || !strings.Contains(out, "0.0.0") {
		t.Fatalf("cluster: %d %q", code, out)
	}
	code, out, _ = c.run("cancel", tk.ID, "--json")
	if code != 0 || !strings.Contains(out, `"status":"cancelled"`) {
		t.Fatalf("cancel: %d %q", code, out)
	}
	code, _, errs = c.run("requeue", tk.ID)
	if code != 1 || !strings.Contains(errs, "409") {
		t.Fatalf("requeue of a cancelled task: %d %q", code, errs)
	}
	oneLine(t, errs)
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
		{[]string{"submit", "--topic", "bad topic"}, 1, "topic"},
		{[]string{"submit", "--topic", "t", "--target", "ftp://x"}, 1, "target"},
		{[]string{"get"}, 2, "one task ID"},
		{[]string{"get", "nope"}, 1, "HTTP 400"},
		{[]string{"get", strings.Repeat("0", 26)}, 1, "HTTP 404"},
		{[]string{"list", "--status", "sleeping"}, 1, "status"},
		{[]string{"list", "--limit", "0"}, 2, "--limit"},
		{[]string{"frobnicate"}, 2, "unknown command"},
	} {
		code, _, errs := c.run(tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d stderr %q; want %d and %q", tc.args, code, errs, tc.code, tc.want)
			continue
		}
		oneLine(t, errs)
	}
	// An unreachable server: one line, exit 1.
	var o, e bytes.Buffer
	if code := run(context.Background(), []string{"get", strings.Repeat("0", 26), "--server", "http://127.0.0.1:1"}, &o, &e); code != 1 {
		t.Fatalf("unreachable server: exit %d", code)
	}
	oneLine(t, e.String())
}
