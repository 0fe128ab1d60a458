package api_test

import (
	"strings"
	"testing"
)

// TestPurge: POST /v1/tasks/{id}:purge deletes a final task and answers it
// as it was; a live task is refused with 409 in the API's words; a purged
// or unknown task is 404.
func TestPurge(t *testing.T) {
	t.Parallel()
	base := server(t)
	_, sub := call(t, "POST", base+"/v1/tasks", `{"topic":"purge","key":"p1","delay":"1h","target":"http://127.0.0.1:9/t"}`)
	id := sub["id"].(string)
	code, m := call(t, "POST", base+"/v1/tasks/"+id+":purge", "")
	e, _ := m["error"].(map[string]any)
	if code != 409 || e["code"] != "conflict" || e["message"] != "the task is pending; only a done, dead or cancelled task can be purged (cancel it first)" {
		t.Fatalf("purge of a pending task: %d %v", code, m)
	}
	if code, m := call(t, "DELETE", base+"/v1/tasks/"+id, ""); code != 200 {
		t.Fatalf("cancel: %d %v", code, m)
	}
	if code, m := call(t, "POST", base+"/v1/tasks/"+id+":purge", ""); code != 200 || m["id"] != id || m["status"] != "cancelled" {
		t.Fatalf("purge of a cancelled task: %d %v", code, m)
	}
	for _, p := range []string{"GET /v1/tasks/" + id, "POST /v1/tasks/" + id + ":purge"} {
		method, path, _ := strings.Cut(p, " ")
		if code, m := call(t, method, base+path, ""); code != 404 {
			t.Fatalf("%s after the purge: %d %v", p, code, m)
		}
	}
	// The key is free again at once.
	if code, m := call(t, "POST", base+"/v1/tasks", `{"topic":"purge","key":"p1","delay":"1h","target":"http://127.0.0.1:9/t"}`); code != 201 || m["id"] == id {
		t.Fatalf("submit of the purged task's key: %d %v", code, m)
	}
	if code, m := call(t, "POST", base+"/v1/tasks/"+id+":wipe", ""); code != 404 {
		t.Fatalf("unknown op: %d %v", code, m)
	}
}
