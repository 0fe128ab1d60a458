package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// ontime topics: a paused topic's task waits (pending, no attempt) until
// resume; requeue brings a topic's dead tasks back; errors exit non-zero
// with one line.
func TestCLITopics(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	var healthy atomic.Bool
	var calls atomic.Int32
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if !healthy.Load() {
			http.Error(w, "no", http.StatusInternalServerError)
		}
	}))
	t.Cleanup(hook.Close)

	code, out, errs := c.run("topics", "pause", "cli.topic")
	if code != 0 || !strings.Contains(out, "cli.topic") || !strings.Contains(out, "true") || !strings.Contains(out, "PAUSED") {
		t.Fatalf("topics pause: %d %q %q", code, out, errs)
	}
	healthy.Store(true)
	code, out, errs = c.run("submit", "--topic", "cli.topic", "--target", hook.URL, "--json")
	if code != 0 {
		t.Fatalf("submit: %d %s", code, errs)
	}
	id := taskJSON(t, out).ID
	code, out, _ = c.run("topics", "--json")
	var tl struct {
		Topics []struct {
			Topic  string
			Paused bool
			Counts map[string]int64
		}
		CountedAt time.Time `json:"counted_at"`
	}
	if err := json.Unmarshal([]byte(out), &tl); code != 0 || err != nil || len(tl.Topics) != 1 || !tl.Topics[0].Paused ||
		tl.Topics[0].Counts["pending"]+tl.Topics[0].Counts["claimed"] != 1 || time.Since(tl.CountedAt) > time.Minute {
		t.Fatalf("topics --json while paused: %d %v %q", code, err, out)
	}
	code, out, errs = c.run("topics", "resume", "cli.topic", "--json")
	if code != 0 || !strings.Contains(out, `"paused":false`) {
		t.Fatalf("topics resume: %d %q %q", code, out, errs)
	}
	c.waitStatus(id, "done")

	healthy.Store(false)
	code, out, errs = c.run("submit", "--topic", "cli.topic", "--target", hook.URL, "--max-attempts", "1", "--json")
	if code != 0 {
		t.Fatalf("submit: %d %s", code, errs)
	}
	dead := taskJSON(t, out).ID
	c.waitStatus(dead, "dead")
	healthy.Store(true)
	code, out, errs = c.run("topics", "requeue", "cli.topic")
	if code != 0 || strings.TrimSpace(out) != "requeued 1 dead tasks of cli.topic" {
		t.Fatalf("topics requeue: %d %q %q", code, out, errs)
	}
	c.waitStatus(dead, "done")
	code, out, _ = c.run("topics")
	if code != 0 || !strings.Contains(out, "cli.topic") || !strings.Contains(out, "OLDEST PENDING DUE") || !regexp.MustCompile(`(?m)^counted at \S+ \((\S+ ago|now)\)$`).MatchString(out) {
		t.Fatalf("topics: %d %q", code, out)
	}

	// A topic without tasks: paused ahead of its first task, and said so.
	code, out, errs = c.run("topics", "pause", "no.such.topic")
	if code != 0 || !strings.Contains(out, "no.such.topic") || !strings.Contains(errs, "no task of topic no.such.topic exists yet") {
		t.Fatalf("pause of a topic without tasks: %d %q %q", code, out, errs)
	}
	oneLine(t, errs)
	code, out, errs = c.run("topics", "pause", "no.such.topic", "--json")
	if code != 0 || !strings.Contains(out, `"known":false`) || !strings.Contains(out, `"paused":true`) {
		t.Fatalf("pause --json of a topic without tasks: %d %q %q", code, out, errs)
	}
	code, out, errs = c.run("topics", "resume", "no.such.topic")
	if code != 0 || !strings.Contains(errs, "no pause is left") {
		t.Fatalf("resume of a topic without tasks: %d %q %q", code, out, errs)
	}
	if code, out, _ = c.run("topics"); code != 0 || strings.Contains(out, "no.such.topic") {
		t.Fatalf("topics after the resume: %d %q", code, out)
	}
	if code, _, errs = c.run("topics", "pause", "cli.topic"); code != 0 || errs != "" {
		t.Fatalf("pause of a known topic: %d %q", code, errs)
	}
	c.run("topics", "resume", "cli.topic")

	code, _, errs = c.run("topics", "pause", "not a topic")
	if code != exitUsage && code != exitError {
		t.Fatalf("pause of a bad topic name: exit %d %q", code, errs)
	}
	oneLine(t, errs)
	if code, _, errs = c.run("topics", "pause"); code != exitUsage {
		t.Fatalf("pause without a topic: exit %d %q", code, errs)
	}
}
