package api_test

import (
	"strings"
	"testing"

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/internal/api/apitest"
)

// A node without Go handlers (as `ontime serve` is) refuses a task without
// a target with 400 naming "target" and saying why, alone and as a batch
// item (the batch's other items are written); a topic with a default
// target in the config accepts it and stores the target on the task.
func TestSubmitWithoutTargetOrHandler(t *testing.T) {
	t.Parallel()
	base := apitest.Start(t, func(c *ontime.Config) {
		c.Topics = map[string]ontime.TopicConfig{"with.default": {Target: "http://127.0.0.1:9/default"}}
	})
	code, m := call(t, "POST", base+"/v1/tasks", `{"topic":"t","delay":"1m"}`)
	e, _ := m["error"].(map[string]any)
	msg, _ := e["message"].(string)
	if code != 400 || e["code"] != "invalid" || e["field"] != "target" || !strings.Contains(msg, `no live node has a Go handler for topic "t"`) ||
		!strings.Contains(msg, "topics.t.target") {
		t.Fatalf("submit without a target: %d %v; want 400 on field target saying why", code, m)
	}
	code, m = call(t, "POST", base+"/v1/tasks:batch", `{"tasks":[{"topic":"t","delay":"1m"},{"topic":"t","delay":"1m","target":"http://127.0.0.1:9/t"},{"topic":"with.default","delay":"1m"}]}`)
	items, _ := m["tasks"].([]any)
	if code != 200 || len(items) != 3 {
		t.Fatalf("batch: %d %v", code, m)
	}
	if e, _ := items[0].(map[string]any)["error"].(map[string]any); e == nil || e["field"] != "target" || e["code"] != "invalid" {
		t.Fatalf("batch item without a target: %v", items[0])
	}
	if it := items[1].(map[string]any); it["id"] == nil || it["target"] != "http://127.0.0.1:9/t" {
		t.Fatalf("batch item with a target: %v", it)
	}
	if it := items[2].(map[string]any); it["id"] == nil || it["target"] != "http://127.0.0.1:9/default" {
		t.Fatalf("batch item of a topic with a default target: %v", it)
	}
	code, m = call(t, "GET", base+"/v1/tasks/"+items[2].(map[string]any)["id"].(string), "")
	if code != 200 || m["target"] != "http://127.0.0.1:9/default" {
		t.Fatalf("the default target is stored on the task: %d %v", code, m)
	}
}
