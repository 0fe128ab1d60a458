package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// ontime bulk: a dry run counts, a cancel by topic and key prefix changes
// the matching tasks only, status and list show the operations; flags the
// CLI can judge are usage errors (exit 2), the server's refusals exit 1.
func TestCLIBulk(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	var ids []string
	for _, key := range []string{"t7:a", "t7:b", "t8:a"} {
		code, out, errs := c.run("submit", "--topic", "cli.bulk", "--key", key, "--in", "1h", "--target", "http://127.0.0.1:1/h", "--json")
		if code != 0 {
			t.Fatalf("submit: %d %s", code, errs)
		}
		ids = append(ids, taskJSON(t, out).ID)
	}
	code, out, errs := c.run("bulk", "cancel", "--topic", "cli.bulk", "--key-prefix", "t7:", "--dry-run")
	if code != 0 || !strings.Contains(out, "matched 2, would change 2") || !strings.Contains(out, "done") {
		t.Fatalf("bulk cancel --dry-run: %d %q %q", code, out, errs)
	}
	code, out, errs = c.run("bulk", "cancel", "--topic", "cli.bulk", "--key-prefix", "t7:", "--json")
	var op struct {
		ID      string
		Status  string
		Changed int64
	}
	if err := json.Unmarshal([]byte(out), &op); code != 0 || err != nil || op.Status != "done" || op.Changed != 2 {
		t.Fatalf("bulk cancel: %d %q %q", code, out, errs)
	}
	c.waitStatus(ids[0], "cancelled")
	c.waitStatus(ids[1], "cancelled")
	c.waitStatus(ids[2], "pending")
	code, out, _ = c.run("bulk", "status", op.ID)
	if code != 0 || !strings.Contains(out, op.ID) || !strings.Contains(out, "changed 2") {
		t.Fatalf("bulk status: %d %q", code, out)
	}
	code, out, _ = c.run("bulk", "list")
	if code != 0 || strings.Count(out, "cancel") != 2 || !strings.Contains(out, "(dry run)") {
		t.Fatalf("bulk list: %d %q", code, out)
	}
	code, out, _ = c.run("bulk", "reschedule", "--topic", "cli.bulk", "--shift", "-30m", "--no-wait")
	if code != 0 || !strings.Contains(out, "bulk status") {
		t.Fatalf("bulk reschedule --no-wait: %d %q", code, out)
	}
	for _, args := range [][]string{
		{"bulk", "cancel"},
		{"bulk", "cancel", "--topic", "t", "--status", "gone"},
		{"bulk", "cancel", "--due-after", "tomorrow"},
		{"bulk", "reschedule", "--topic", "t"},
		{"bulk", "reschedule", "--topic", "t", "--in", "1h", "--shift", "1h"},
		{"bulk", "reschedule", "--topic", "t", "--shift", "an hour"},
		{"bulk", "cancel", "--topic", "t", "--shift", "1h"},
	} {
		if code, _, errs := c.run(args...); code != 2 {
			t.Errorf("%v: exit %d (%s), want 2", args, code, errs)
		}
	}
	if code, _, errs := c.run("bulk", "cancel", "--topic", "bad topic"); code != 1 || !strings.Contains(errs, "filter.topic") {
		t.Errorf("bad topic: exit %d %q, want 1 naming filter.topic", code, errs)
	}
	if code, _, _ := c.run("bulk", "status", "01JD5Q5H0C8Y2X4ZV7M3N9P6RT"); code != 3 {
		t.Errorf("bulk status of an unknown ID: exit %d, want 3", code)
	}
}
