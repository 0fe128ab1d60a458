package api_test

import (
	"strings"
	"testing"
)

// TestMessagesInUsersTerms: error messages say what is wrong in the API's
// own terms: no Go type names, no verb said twice, no "not found" for an
// ID that is malformed, and an unknown field lists the known ones.
func TestMessagesInUsersTerms(t *testing.T) {
	t.Parallel()
	base := server(t)
	_, sub := call(t, "POST", base+"/v1/tasks", `{"topic":"msg","delay":"1h","target":"http://127.0.0.1:9/t"}`)
	id := sub["id"].(string)
	if code, m := call(t, "DELETE", base+"/v1/tasks/"+id, ""); code != 200 {
		t.Fatalf("cancel: %d %v", code, m)
	}
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		field, want              string
	}{
		{"malformed id", "GET", "/v1/tasks/abc", "", 400, "id", `not a task ID: "abc" has 3 characters, want 26`},
		{"cancel of a cancelled task is idempotent", "DELETE", "/v1/tasks/" + id, "", 200, "", ""},
		{"requeue of a cancelled task", "POST", "/v1/tasks/" + id + ":requeue", "", 409, "", "the task is cancelled; only a dead task can be requeued"},
		{"number as a string", "POST", "/v1/tasks", `{"topic":"t","max_attempts":"3"}`, 400, "max_attempts", "must be a whole number, got a string"},
		{"fraction", "POST", "/v1/tasks", `{"topic":"t","max_attempts":2.5}`, 400, "max_attempts", "must be a whole number, got the number 2.5"},
		{"number for a string", "POST", "/v1/tasks", `{"topic":7}`, 400, "topic", "must be a string, got a number"},
		{"array for a task", "POST", "/v1/tasks", `[1]`, 400, "", "a task is a JSON object, got an array"},
		{"unknown field", "POST", "/v1/tasks", `{"topic":"t","colour":1}`, 400, "colour", "unknown field; a task has delay, due_at, if_exists, key, max_attempts, payload, priority, retry, target, topic"},
		{"priority above 9", "POST", "/v1/tasks", `{"topic":"t","target":"http://127.0.0.1:1/h","priority":10}`, 400, "priority", "is 10; want 0 to 9"},
		{"negative priority", "POST", "/v1/tasks", `{"topic":"t","target":"http://127.0.0.1:1/h","priority":-1}`, 400, "priority", "is -1; want 0 to 9"},
		{"priority as a string", "POST", "/v1/tasks", `{"topic":"t","priority":"high"}`, 400, "priority", "must be a whole number, got a string"},
		{"batch of an object", "POST", "/v1/tasks:batch", `{"tasks":{}}`, 400, "tasks", "array of tasks"},
	} {
		code, m := call(t, tc.method, base+tc.path, tc.body)
		e, _ := m["error"].(map[string]any)
		msg, _ := e["message"].(string)
		field, _ := e["field"].(string)
		if code != tc.status || field != tc.field || !strings.Contains(msg, tc.want) {
			t.Errorf("%s: HTTP %d field %q message %q; want %d %q %q", tc.name, code, field, msg, tc.status, tc.field, tc.want)
		}
		for _, bad := range []string{"json.", "RawMessage", "[]", " int", "not found", "cancel cancel", "requeue requeue"} {
			if strings.Contains(msg, bad) {
				t.Errorf("%s: message %q has %q", tc.name, msg, bad)
			}
		}
	}
	// A batch entry of the wrong shape fails alone, in the same words.
	code, m := call(t, "POST", base+"/v1/tasks:batch", `{"tasks":[{"topic":"ok"},{"topic":"t","max_attempts":"3"}]}`)
	items, _ := m["tasks"].([]any)
	if code != 200 || len(items) != 2 {
		t.Fatalf("batch: %d %v", code, m)
	}
	e, _ := items[1].(map[string]any)["error"].(map[string]any)
	if e["field"] != "max_attempts" || e["message"] != "must be a whole number, got a string" {
		t.Fatalf("batch entry: %v", e)
	}
}
