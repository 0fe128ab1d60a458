package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestServeTopicSettings: on `ontime serve`, a topic whose config gives a
// default target accepts tasks without one and delivers them there, with
// the topic's max_attempts; `ontime topics` shows the settings the config
// gave, `topics set` stores more (bad values refused naming the field),
// `topics get` says where each comes from, `topics set --clear` removes
// what set stored.
func TestServeTopicSettings(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer rcv.Close()
	addr := startServe(t, "topics:\n  cli.dt:\n    target: "+rcv.URL+"/hook\n    max_attempts: 3\n    retry: {schedule: [10s, 1m]}\n")
	code, out, errs := runCLI("submit", "--server", addr, "--topic", "cli.dt", "--in", "1h", "--retry-schedule", "5s,1m", "--retry-jitter", "0", "--json")
	if code != 0 || !strings.Contains(out, `"retry":{"jitter":0,"schedule":["5s","1m0s"]}`) {
		t.Fatalf("submit with a retry policy: %d %s %s", code, out, errs)
	}
	if code, _, errs := runCLI("submit", "--server", addr, "--topic", "cli.dt", "--retry-backoff", "linear"); code == 0 || !strings.Contains(errs, "retry.backoff") {
		t.Fatalf("submit with a bad retry policy: %d %s", code, errs)
	}
	code, out, errs = runCLI("submit", "--server", addr, "--topic", "cli.dt", "--json")
	if code != 0 || !strings.Contains(out, `"target":"`+rcv.URL+`/hook"`) || !strings.Contains(out, `"max_attempts":3`) {
		t.Fatalf("submit without a target: %d %s %s", code, out, errs)
	}
	deadline := time.Now().Add(20 * time.Second)
	for calls.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if calls.Load() != 1 {
		t.Fatalf("the topic's default target got %d calls; want 1", calls.Load())
	}
	// A topic without a default target and no handler: refused.
	if code, _, errs := runCLI("submit", "--server", addr, "--topic", "cli.none"); code == 0 || !strings.Contains(errs, "target") {
		t.Fatalf("submit without a target to a topic without one: %d %s", code, errs)
	}

	code, out, errs = runCLI("topics", "--server", addr)
	if code != 0 || !strings.Contains(out, "SETTINGS") || !strings.Contains(out, "max_attempts=3") || !strings.Contains(out, "retry=schedule 10s,1m0s") {
		t.Fatalf("topics: %d %s %s", code, out, errs)
	}
	code, _, errs = runCLI("topics", "set", "cli.dt", "--server", addr, "--priority", "12")
	if code == 0 || !strings.Contains(errs, "priority") {
		t.Fatalf("a bad priority: %d %s", code, errs)
	}
	code, _, errs = runCLI("topics", "set", "cli.dt", "--server", addr, "--retry-initial", "1m", "--retry-max", "1s")
	if code == 0 || !strings.Contains(errs, "retry.max") {
		t.Fatalf("a bad retry: %d %s", code, errs)
	}
	code, out, errs = runCLI("topics", "set", "cli.dt", "--server", addr, "--max-attempts", "5", "--retry-backoff", "fixed", "--retry-initial", "30s", "--rate", "20")
	if code != 0 || !strings.Contains(out, "max_attempts  5") {
		t.Fatalf("topics set: %d %s %s", code, out, errs)
	}
	code, out, errs = runCLI("topics", "get", "cli.dt", "--server", addr)
	for _, want := range [][]string{{"max_attempts", "5", "api"}, {"retry", "fixed", "30s", "jitter", "0.2", "api"}, {"rate", "20", "api"},
		{"target", rcv.URL + "/hook", "config"}, {"timeout", "10s", "node"}} {
		if code != 0 || !hasRow(out, want...) {
			t.Fatalf("topics get: %d %s %s; want a row %q", code, out, errs, want)
		}
	}
	code, out, errs = runCLI("topics", "set", "cli.dt", "--server", addr, "--clear")
	if code != 0 || !hasRow(out, "max_attempts", "3", "config") || !hasRow(out, "rate", "no", "limit", "node") {
		t.Fatalf("topics set --clear: %d %s %s", code, out, errs)
	}
	if code, _, errs := runCLI("topics", "set", "cli.dt", "--server", addr); code == 0 || !strings.Contains(errs, "--clear") {
		t.Fatalf("topics set without flags: %d %s", code, errs)
	}
}

// hasRow reports whether out has a line of exactly these fields.
func hasRow(out string, fields ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		if strings.Join(strings.Fields(line), " ") == strings.Join(fields, " ") {
			return true
		}
	}
	return false
}
