package api_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/stagetest"
)

func countedAt(t *testing.T, m map[string]any) time.Time {
	t.Helper()
	s, _ := m["counted_at"].(string)
	at, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("counted_at %q: %v", m["counted_at"], err)
	}
	return at
}

// The topic routes through the OpenAPI checker (apitest): every answer,
// error ones included, is what apiv1/openapi.json describes.
func TestTopicRoutesMatchTheSpec(t *testing.T) {
	t.Parallel()
	base := server(t)
	if code, m := call(t, "POST", base+"/v1/tasks", `{"topic":"api.topic","delay":"1h","target":"http://127.0.0.1:9/t"}`); code != 201 {
		t.Fatalf("submit: %d %v", code, m)
	}
	code, m := call(t, "POST", base+"/v1/topics/api.topic:pause", "")
	counts, _ := m["counts"].(map[string]any)
	if code != 200 || m["paused"] != true || m["topic"] != "api.topic" || counts["pending"] != float64(1) || m["oldest_due_at"] == nil || m["known"] != true {
		t.Fatalf("pause: %d %v", code, m)
	}
	// Ahead of its first task: paused, and said to be unknown.
	if code, m := call(t, "POST", base+"/v1/topics/api.ghost:pause", ""); code != 200 || m["paused"] != true || m["known"] != false {
		t.Fatalf("pause of a topic without tasks: %d %v", code, m)
	}
	if code, m := call(t, "GET", base+"/v1/topics", ""); code != 200 || len(m["topics"].([]any)) != 2 {
		t.Fatalf("list with a topic paused ahead: %d %v", code, m)
	}
	if code, m := call(t, "POST", base+"/v1/topics/api.ghost:resume", ""); code != 200 || m["paused"] != false || m["known"] != false {
		t.Fatalf("resume of a topic without tasks: %d %v", code, m)
	}
	code, m = call(t, "GET", base+"/v1/topics", "")
	if code != 200 || len(m["topics"].([]any)) != 1 {
		t.Fatalf("list: %d %v", code, m)
	}
	// The counts come from the node's count cache and say how old they
	// are; the cache's worker recounts, so a new topic shows without any
	// write through this route.
	first := countedAt(t, m)
	if age := time.Since(first); age < 0 || age > time.Minute {
		t.Fatalf("counted_at %v: %v old", first, age)
	}
	if code, m := call(t, "POST", base+"/v1/tasks", `{"topic":"api.later","delay":"1h","target":"http://127.0.0.1:9/t"}`); code != 201 {
		t.Fatalf("submit: %d %v", code, m)
	}
	stagetest.Eventually(t, "the new topic counted", func() bool {
		code, m := call(t, "GET", base+"/v1/topics", "")
		return code == 200 && len(m["topics"].([]any)) == 2 && countedAt(t, m).After(first)
	})
	if code, m := call(t, "POST", base+"/v1/topics/api.empty:resume", ""); code != 200 || m["paused"] != false || m["oldest_due_at"] != nil {
		t.Fatalf("resume of a topic without tasks: %d %v", code, m)
	}
	if code, m := call(t, "POST", base+"/v1/topics/api.topic:requeue", ""); code != 200 || m["requeued"] != float64(0) {
		t.Fatalf("requeue: %d %v", code, m)
	}
	long := "/v1/topics/" + strings.Repeat("x", 65) + ":resume"
	for _, p := range []string{"/v1/topics/bad%20topic:pause", long} {
		if code, m := call(t, "POST", base+p, ""); code != 400 || m["error"].(map[string]any)["field"] != "topic" {
			t.Fatalf("POST %s: %d %v", p, code, m)
		}
	}
}
