package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/internal/api/apitest"
)

// Bulk operations over the API (issue 29 item 5): bad input answered 400
// naming the field; a dry run counts; an operation runs to its end on the
// node and its progress, and the list, show it; the tasks changed are the
// matching ones; requests and answers are checked against the OpenAPI
// document. A webhook's JSON answer is the task's result in its view.
func TestOperationsAPI(t *testing.T) {
	t.Parallel()
	base := apitest.Start(t, nil)
	must := func(t *testing.T, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	waitUntil := func(t *testing.T, what string, cond func() bool) {
		t.Helper()
		end := time.Now().Add(30 * time.Second)
		for !cond() {
			if time.Now().After(end) {
				t.Fatalf("not within 30s: %s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	get := func(id string) apiv1.Task {
		t.Helper()
		resp, err := http.Get(base + "/v1/tasks/" + id)
		must(t, err)
		defer resp.Body.Close()
		var tk apiv1.Task
		must(t, json.NewDecoder(resp.Body).Decode(&tk))
		return tk
	}
	srv := struct{ URL string }{base}
	post := func(body string) (int, map[string]json.RawMessage) {
		t.Helper()
		resp, err := http.Post(srv.URL+"/v1/operations", "application/json", strings.NewReader(body))
		must(t, err)
		defer resp.Body.Close()
		var v map[string]json.RawMessage
		must(t, json.NewDecoder(resp.Body).Decode(&v))
		return resp.StatusCode, v
	}
	for _, c := range []struct{ body, field string }{
		{`{"filter":{"topic":"a"}}`, "action"},
		{`{"action":"purge","filter":{"topic":"a"}}`, "action"},
		{`{"action":"cancel","filter":{}}`, "filter"},
		{`{"action":"cancel"}`, "filter"},
		{`{"action":"cancel","filter":{"topic":"a b"}}`, "filter.topic"},
		{`{"action":"cancel","filter":{"status":["gone"]}}`, "filter.status"},
		{`{"action":"cancel","filter":{"status":"dead"}}`, "filter.status"},
		{`{"action":"cancel","filter":{"key_prefix":"` + strings.Repeat("k", 256) + `"}}`, "filter.key_prefix"},
		{`{"action":"cancel","filter":{"due_after":"tomorrow"}}`, "filter.due_after"},
		{`{"action":"cancel","filter":{"due_before":"2030-01-01"}}`, "filter.due_before"},
		{`{"action":"cancel","filter":{"due_after":"2030-01-02T00:00:00Z","due_before":"2030-01-01T00:00:00Z"}}`, "filter.due_before"},
		{`{"action":"cancel","filter":{"error_contains":"` + strings.Repeat("e", 1025) + `"}}`, "filter.error_contains"},
		{`{"action":"cancel","filter":{"topic":"a","shape":1}}`, "filter.shape"},
		{`{"action":"cancel","filter":{"topic":"a"},"due_at":"soon"}`, "due_at"},
		{`{"action":"cancel","filter":{"topic":"a"},"delay":"1h"}`, "delay"},
		{`{"action":"reschedule","filter":{"topic":"a"},"delay":"an hour"}`, "delay"},
		{`{"action":"reschedule","filter":{"topic":"a"},"shift":"x"}`, "shift"},
		{`{"action":"reschedule","filter":{"topic":"a"}}`, "due_at"},
		{`{"action":"requeue","filter":{"topic":"a"},"shift":"1h"}`, "shift"},
		{`{"action":"cancel","filter":{"topic":"a"},"dry_run":"yes"}`, "dry_run"},
		{`{"action":"cancel","filter":{"topic":"a"},"extra":1}`, "extra"},
	} {
		code, v := post(c.body)
		var e apiv1.ErrorBody
		b, _ := json.Marshal(v)
		_ = json.Unmarshal(b, &e)
		if code != http.StatusBadRequest || e.Error.Field != c.field {
			t.Errorf("%s: %d %s, want 400 on %s", c.body, code, b, c.field)
		}
	}
	var ids []string
	var batch []string
	for i := range 30 {
		topic := "ops.a"
		if i%3 == 0 {
			topic = "ops.b"
		}
		batch = append(batch, fmt.Sprintf(`{"topic":%q,"key":"order-%c-%d","delay":"1h","target":"http://127.0.0.1:1/h"}`, topic, 'a'+i%2, i))
	}
	resp, err := http.Post(base+"/v1/tasks:batch", "application/json", strings.NewReader(`{"tasks":[`+strings.Join(batch, ",")+`]}`))
	must(t, err)
	var br apiv1.BatchResponse
	must(t, json.NewDecoder(resp.Body).Decode(&br))
	resp.Body.Close()
	for _, it := range br.Tasks {
		if it.Error != nil {
			t.Fatalf("submit: %+v", it.Error)
		}
		ids = append(ids, it.ID)
	}
	run := func(body string) apiv1.Operation {
		t.Helper()
		code, v := post(body)
		if code != http.StatusAccepted {
			t.Fatalf("%s: %d %v", body, code, v)
		}
		var op apiv1.Operation
		b, _ := json.Marshal(v)
		must(t, json.Unmarshal(b, &op))
		waitUntil(t, "operation "+op.ID+" done", func() bool {
			resp, err := http.Get(srv.URL + "/v1/operations/" + op.ID)
			must(t, err)
			defer resp.Body.Close()
			must(t, json.NewDecoder(resp.Body).Decode(&op))
			return op.Status == "done"
		})
		return op
	}
	// 20 of topic ops.a, 10 of them keyed order-a-…
	op := run(`{"action":"cancel","filter":{"topic":"ops.a","key_prefix":"order-a"},"dry_run":true}`)
	if op.Matched != 10 || op.Changed != 10 || !op.DryRun || op.StartedAt == nil || op.FinishedAt == nil || op.TablesDone != op.Tables || op.Tables != 2 {
		t.Fatalf("dry run: %+v", op)
	}
	op = run(`{"action":"cancel","filter":{"topic":"ops.a","key_prefix":"order-a","status":["pending","claimed"]}}`)
	if op.Matched != 10 || op.Changed != 10 || op.DryRun {
		t.Fatalf("cancel: %+v", op)
	}
	cancelled := 0
	for _, id := range ids {
		tk := get(id)
		if tk.Status == "cancelled" {
			cancelled++
			if tk.Topic != "ops.a" || !strings.HasPrefix(tk.Key, "order-a") {
				t.Fatalf("cancelled outside the filter: %+v", tk)
			}
		}
	}
	if cancelled != 10 {
		t.Fatalf("%d cancelled", cancelled)
	}
	op = run(`{"action":"reschedule","filter":{"topic":"ops.b"},"shift":"-30m"}`)
	if op.Changed != 10 || op.Shift != "-30m0s" {
		t.Fatalf("reschedule: %+v", op)
	}
	resp, err = http.Get(srv.URL + "/v1/operations?limit=2")
	must(t, err)
	var list apiv1.OperationList
	must(t, json.NewDecoder(resp.Body).Decode(&list))
	resp.Body.Close()
	if len(list.Operations) != 2 || list.Operations[0].ID != op.ID || list.Operations[0].Action != "reschedule" {
		t.Fatalf("list: %+v", list)
	}
	for path, want := range map[string]int{"/v1/operations/01JD5Q5H0C8Y2X4ZV7M3N9P6RT": 404, "/v1/operations/nope": 404, "/v1/operations?limit=0": 400, "/v1/operations?lim=1": 400} {
		resp, err := http.Get(srv.URL + path)
		must(t, err)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, want)
		}
	}

	// A webhook's JSON answer: the task's result, in its view.
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"charged":42}`)
	}))
	defer rcv.Close()
	resp, err = http.Post(base+"/v1/tasks", "application/json", strings.NewReader(`{"topic":"res","target":"`+rcv.URL+`/hook"}`))
	must(t, err)
	var tk apiv1.Task
	must(t, json.NewDecoder(resp.Body).Decode(&tk))
	resp.Body.Close()
	waitUntil(t, "task done", func() bool { tk = get(tk.ID); return tk.Status == "done" })
	if string(tk.Result) != `{"charged":42}` {
		t.Fatalf("result %s", tk.Result)
	}
}
