package main

import (
	"strings"
	"testing"
)

func TestCLIUpdateAndKey(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	code, out, errs := c.run("submit", "--topic", "cli.key", "--key", "user/7", "--in", "1h", "--json", "--target", "http://127.0.0.1:9/hook")
	if code != 0 {
		t.Fatalf("submit: %d %s", code, errs)
	}
	tk := taskJSON(t, out)
	code, out, errs = c.run("update", tk.ID, "--in", "2h", "--data", `{"v":2}`, "--max-attempts", "4")
	if code != 0 || !strings.Contains(out, `{"v":2}`) || !strings.Contains(out, "of 4") || !(strings.Contains(out, "in 2h") || strings.Contains(out, "in 1h59m")) {
		t.Fatalf("update: %d %q %s", code, out, errs)
	}
	code, out, _ = c.run("key", "get", "cli.key", "user/7")
	if code != 0 || !strings.Contains(out, tk.ID) {
		t.Fatalf("key get: %d %q", code, out)
	}
	code, out, errs = c.run("key", "update", "cli.key", "user/7", "--target", "http://127.0.0.1:9/x", "--json")
	if code != 0 || !strings.Contains(out, `"target":"http://127.0.0.1:9/x"`) {
		t.Fatalf("key update: %d %q %s", code, out, errs)
	}
	code, out, _ = c.run("submit", "--topic", "cli.key", "--key", "user/7", "--in", "3h", "--replace", "--target", "http://127.0.0.1:9/hook")
	if code != 0 || !strings.Contains(out, "replaced") || !strings.Contains(out, tk.ID) {
		t.Fatalf("submit --replace: %d %q", code, out)
	}
	code, out, _ = c.run("key", "cancel", "cli.key", "user/7", "--json")
	if code != 0 || taskJSON(t, out).Status != "cancelled" {
		t.Fatalf("key cancel: %d %q", code, out)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"update", tk.ID, "--in", "1h"}, 4, "cancelled"},
		{[]string{"update", tk.ID}, 2, "nothing to change"},
		{[]string{"update", tk.ID, "--in", "soon"}, 2, "--in"},
		{[]string{"update", tk.ID, "--in", "1s", "--at", "2030-01-01T00:00:00Z"}, 2, "not both"},
		{[]string{"update", tk.ID, "--data", "{"}, 2, "--data"},
		{[]string{"update", tk.ID, "--max-attempts", "0"}, 2, "--max-attempts"},
		{[]string{"update"}, 2, "task ID"},
		{[]string{"key", "get", "cli.key", "nobody"}, 3, "nobody"},
		{[]string{"key", "get", "cli.key"}, 2, "TOPIC KEY"},
		{[]string{"key", "update", "cli.key", "user/7"}, 2, "nothing to change"},
		{[]string{"key", "update", "cli.key", "user/7", "--in", "1h"}, 4, "cancelled"},
	} {
		code, _, errs := c.run(tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: %d %q; want %d and %q", tc.args, code, errs, tc.code, tc.want)
		}
		oneLine(t, errs)
	}
}
