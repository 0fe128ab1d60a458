package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCLISchedules: every schedules verb against a real node, and its
// errors in one line with a non-zero exit code.
func TestCLISchedules(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	code, out, errs := c.run("schedules", "put", "nightly", "--cron", "0 2 * * *", "--tz", "Europe/Berlin", "--topic", "cli.sched",
		"--target", "http://127.0.0.1:9/hook", "--data", `{"kind":"daily"}`, "--misfire", "fire_once")
	if code != 0 || !strings.Contains(out, "created schedule nightly") || !strings.Contains(out, "Europe/Berlin") || !strings.Contains(out, "next fire") {
		t.Fatalf("put: %d %q %q", code, out, errs)
	}
	code, out, _ = c.run("schedules", "put", "nightly", "--cron", "0 3 * * *", "--topic", "cli.sched")
	if code != 0 || !strings.Contains(out, "updated schedule nightly") || !strings.Contains(out, "0 3 * * * (UTC)") {
		t.Fatalf("put again: %d %q", code, out)
	}
	code, out, _ = c.run("schedules", "list")
	if code != 0 || !strings.Contains(out, "NEXT FIRE") || !strings.Contains(out, "nightly") || !strings.Contains(out, "active") {
		t.Fatalf("list: %d %q", code, out)
	}
	code, out, _ = c.run("schedules", "pause", "nightly", "--json")
	var s struct {
		Name   string
		Paused bool
	}
	if code != 0 || json.Unmarshal([]byte(out), &s) != nil || !s.Paused || s.Name != "nightly" {
		t.Fatalf("pause --json: %d %q", code, out)
	}
	code, out, _ = c.run("schedules", "get", "nightly")
	if code != 0 || !strings.Contains(out, "paused") {
		t.Fatalf("get: %d %q", code, out)
	}
	code, out, _ = c.run("schedules", "resume", "nightly")
	if code != 0 || !strings.Contains(out, "active") {
		t.Fatalf("resume: %d %q", code, out)
	}
	code, out, _ = c.run("schedules", "trigger", "nightly", "--json")
	var tk struct{ ID, Key, Topic, Status string }
	if code != 0 || json.Unmarshal([]byte(out), &tk) != nil || !strings.HasPrefix(tk.Key, "nightly+trigger@") || tk.Topic != "cli.sched" {
		t.Fatalf("trigger: %d %q", code, out)
	}
	code, out, _ = c.run("schedules", "delete", "nightly")
	if code != 0 || !strings.Contains(out, "nightly") {
		t.Fatalf("delete: %d %q", code, out)
	}
	// The triggered task outlives its schedule.
	code, out, errs = c.run("get", tk.ID)
	if code != 0 || !strings.Contains(out, tk.Key) {
		t.Fatalf("get of the triggered task after the delete: %d %q %q", code, out, errs)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"schedules", "get", "nightly"}, 3, "404"},
		{[]string{"schedules", "pause", "nightly"}, 3, "404"},
		{[]string{"schedules", "trigger", "nightly"}, 3, "404"},
		{[]string{"schedules", "put", "x", "--cron", "* * *", "--topic", "t"}, 1, "cron:"},
		{[]string{"schedules", "put", "x", "--cron", "@every 1s", "--topic", "t", "--tz", "Nowhere/Land"}, 1, "time_zone:"},
		{[]string{"schedules", "put", "x", "--topic", "t"}, 2, "--cron and --topic are required"},
		{[]string{"schedules", "put", "x", "--cron", "@every 1s", "--topic", "t", "--data", "{"}, 2, "--data"},
		{[]string{"schedules", "get"}, 2, "schedule name"},
		{[]string{"schedules", "explode"}, 2, "explode"},
	} {
		code, _, errs := c.run(tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: %d %q, want %d with %q", tc.args, code, errs, tc.code, tc.want)
		}
		oneLine(t, errs)
	}
}
