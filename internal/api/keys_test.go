package api_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestKeyRoutes: by key and PATCH over HTTP on a real node: answers,
// validation naming the field, 404 naming the key, 409 for final tasks,
// keys with slashes and non-ASCII.
func TestKeyRoutes(t *testing.T) {
	t.Parallel()
	base := server(t)
	key := "order/42 é"
	kp := base + "/v1/topics/k.t/keys/" + url.PathEscape(key)
	code, m := call(t, "POST", base+"/v1/tasks", `{"topic":"k.t","key":"order/42 é","delay":"1h","payload":{"a":1},"target":"http://127.0.0.1:9/t"}`)
	if code != 201 {
		t.Fatalf("submit: %d %v", code, m)
	}
	id := m["id"].(string)
	if m["updated_at"] == nil {
		t.Fatalf("view has no updated_at: %v", m)
	}

	code, m = call(t, "GET", kp, "")
	if code != 200 || m["id"] != id {
		t.Fatalf("get by key: %d %v", code, m)
	}
	code, m = call(t, "GET", base+"/v1/tasks?topic=k.t&key="+url.QueryEscape(key), "")
	if tasks, _ := m["tasks"].([]any); code != 200 || len(tasks) != 1 || tasks[0].(map[string]any)["id"] != id {
		t.Fatalf("list by key: %d %v", code, m)
	}
	for q, n := range map[string]int{"&status=pending": 1, "&status=done": 0, "&cursor=" + id: 0} {
		code, m = call(t, "GET", base+"/v1/tasks?topic=k.t&key="+url.QueryEscape(key)+q, "")
		if tasks, _ := m["tasks"].([]any); code != 200 || len(tasks) != n {
			t.Fatalf("list by key %s: %d %v, want %d tasks", q, code, m, n)
		}
	}
	code, m = call(t, "GET", base+"/v1/tasks?topic=k.t&key=nobody", "")
	if tasks, _ := m["tasks"].([]any); code != 200 || len(tasks) != 0 {
		t.Fatalf("list by unknown key: %d %v", code, m)
	}

	// PATCH by ID and by key.
	code, m = call(t, "PATCH", base+"/v1/tasks/"+id, `{"delay":"2h","max_attempts":3}`)
	if code != 200 || m["max_attempts"] != float64(3) || m["id"] != id {
		t.Fatalf("patch: %d %v", code, m)
	}
	code, m = call(t, "PATCH", kp, `{"payload":null,"target":"https://example.com/x"}`)
	if code != 200 || m["target"] != "https://example.com/x" || m["payload"] != nil || m["max_attempts"] != float64(3) {
		t.Fatalf("patch by key: %d %v", code, m)
	}

	for _, tc := range []struct {
		name, method, url, body string
		status                  int
		field                   string
	}{
		{"patch unknown field", "PATCH", base + "/v1/tasks/" + id, `{"topic":"x"}`, 400, "topic"},
		{"patch nothing", "PATCH", base + "/v1/tasks/" + id, `{}`, 400, ""},
		{"patch both times", "PATCH", kp, `{"delay":"1s","due_at":"2030-01-01T00:00:00Z"}`, 400, "due_at"},
		{"patch bad delay", "PATCH", kp, `{"delay":"soon"}`, 400, "delay"},
		{"patch negative delay", "PATCH", kp, `{"delay":"-1s"}`, 400, "delay"},
		{"patch bad due", "PATCH", kp, `{"due_at":"tomorrow"}`, 400, "due_at"},
		{"patch bad payload", "PATCH", kp, `{"payload":"` + strings.Repeat("x", 2000) + `"}`, 413, "payload"},
		{"patch bad target", "PATCH", kp, `{"target":"ftp://x"}`, 400, "target"},
		{"patch bad attempts", "PATCH", kp, `{"max_attempts":0}`, 400, "max_attempts"},
		{"patch type", "PATCH", kp, `{"max_attempts":"3"}`, 400, "max_attempts"},
		{"patch malformed", "PATCH", kp, `{"delay":`, 400, ""},
		{"patch unknown id", "PATCH", base + "/v1/tasks/" + strings.Repeat("0", 26), `{"delay":"1s"}`, 404, "id"},
		{"patch malformed id", "PATCH", base + "/v1/tasks/nope", `{"delay":"1s"}`, 400, "id"},
		{"get unknown key", "GET", base + "/v1/topics/k.t/keys/nobody", "", 404, "key"},
		{"delete unknown key", "DELETE", base + "/v1/topics/k.t/keys/nobody", "", 404, "key"},
		{"patch unknown key", "PATCH", base + "/v1/topics/k.t/keys/nobody", `{"delay":"1s"}`, 404, "key"},
		{"bad topic", "GET", base + "/v1/topics/bad%20topic/keys/x", "", 400, "topic"},
		{"key too long", "GET", base + "/v1/topics/k.t/keys/" + strings.Repeat("k", 256), "", 400, "key"},
		{"list key without topic", "GET", base + "/v1/tasks?key=x", "", 400, "topic"},
		{"list empty key", "GET", base + "/v1/tasks?topic=k.t&key=", "", 400, "key"},
		{"submit bad if_exists", "POST", base + "/v1/tasks", `{"topic":"k.t","key":"z","if_exists":"merge"}`, 400, "if_exists"},
		{"wrong method by key", "POST", kp, "", 405, ""},
	} {
		code, m := call(t, tc.method, tc.url, tc.body)
		if code != tc.status || errField(m) != tc.field {
			t.Errorf("%s: %d %v; want %d field %q", tc.name, code, m, tc.status, tc.field)
		}
	}

	// Cancel by key; again answers the cancelled task; PATCH is then 409.
	for range 2 {
		code, m = call(t, "DELETE", kp, "")
		if code != 200 || m["status"] != "cancelled" || m["id"] != id {
			t.Fatalf("cancel by key: %d %v", code, m)
		}
	}
	for _, u := range []string{kp, base + "/v1/tasks/" + id} {
		code, m = call(t, "PATCH", u, `{"delay":"1s"}`)
		if e, _ := m["error"].(map[string]any); code != 409 || e["code"] != "conflict" {
			t.Fatalf("patch of a cancelled task: %d %v", code, m)
		}
	}
	// With the default key hold (10m) the key still names the cancelled
	// task, and a resubmit returns it.
	code, m = call(t, "POST", base+"/v1/tasks", `{"topic":"k.t","key":"order/42 é","target":"http://127.0.0.1:9/t"}`)
	if code != 200 || m["id"] != id || m["status"] != "cancelled" {
		t.Fatalf("resubmit within the key hold: %d %v", code, m)
	}
}

// TestSubmitOverAFinalTask: a key held by a final task answers a keep
// submit with that task and key_held_until (alone and in a batch); a
// replace makes a new task (201), and the same replace again finds it.
func TestSubmitOverAFinalTask(t *testing.T) {
	t.Parallel()
	base := server(t) // retention.key_hold: the default 10m
	body := func(ifExists string) string {
		return `{"topic":"kh.t","key":"order-42","delay":"1h","target":"http://127.0.0.1:9/t","payload":{"v":1},"if_exists":"` + ifExists + `"}`
	}
	code, m := call(t, "POST", base+"/v1/tasks", body("keep"))
	if code != 201 {
		t.Fatalf("submit: %d %v", code, m)
	}
	first := m["id"].(string)
	if _, ok := m["key_held_until"]; ok {
		t.Fatalf("a created task has key_held_until: %v", m)
	}
	code, m = call(t, "DELETE", base+"/v1/topics/kh.t/keys/order-42", "")
	if code != 200 || m["status"] != "cancelled" {
		t.Fatalf("cancel: %d %v", code, m)
	}
	ended, _ := time.Parse(time.RFC3339Nano, m["updated_at"].(string))

	code, m = call(t, "POST", base+"/v1/tasks", body("keep"))
	held, err := time.Parse(time.RFC3339Nano, fmt.Sprint(m["key_held_until"]))
	if code != 200 || m["id"] != first || m["status"] != "cancelled" || err != nil || !held.Equal(ended.Add(10*time.Minute)) {
		t.Fatalf("keep over a cancelled task: %d %v (ended %v)", code, m, ended)
	}
	code, m = call(t, "POST", base+"/v1/tasks:batch", `{"tasks":[`+body("keep")+`]}`)
	items, _ := m["tasks"].([]any)
	if code != 200 || len(items) != 1 || items[0].(map[string]any)["id"] != first || items[0].(map[string]any)["key_held_until"] == nil {
		t.Fatalf("batch keep over a cancelled task: %d %v", code, m)
	}

	code, m = call(t, "POST", base+"/v1/tasks", body("replace"))
	if code != 201 || m["id"] == first || m["status"] != "pending" || m["key_held_until"] != nil {
		t.Fatalf("replace over a cancelled task: %d %v", code, m)
	}
	made := m["id"].(string)
	code, m = call(t, "POST", base+"/v1/tasks", body("replace"))
	if code != 200 || m["id"] != made || m["status"] != "pending" || m["key_held_until"] != nil {
		t.Fatalf("retried replace: %d %v, want %s", code, m, made)
	}
	code, m = call(t, "GET", base+"/v1/topics/kh.t/keys/order-42", "")
	if code != 200 || m["id"] != made {
		t.Fatalf("by key: %d %v, want %s", code, m, made)
	}
	// In a batch: a replace over a final task is created too.
	call(t, "DELETE", base+"/v1/topics/kh.t/keys/order-42", "")
	code, m = call(t, "POST", base+"/v1/tasks:batch", `{"tasks":[`+body("replace")+`]}`)
	items, _ = m["tasks"].([]any)
	if code != 200 || len(items) != 1 {
		t.Fatalf("batch replace: %d %v", code, m)
	}
	if it := items[0].(map[string]any); it["id"] == made || it["status"] != "pending" || it["key_held_until"] != nil {
		t.Fatalf("batch replace over a cancelled task: %v", it)
	}
}
