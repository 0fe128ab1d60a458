package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/internal/api/apitest"
)

func server(t *testing.T) string {
	return apitest.Start(t, func(c *ontime.Config) { c.Delivery.MaxPayloadBytes = 1000 })
}

func call(t *testing.T, method, url, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	if m == nil {
		m = map[string]any{"raw": string(raw)}
	}
	return resp.StatusCode, m
}

func errField(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	f, _ := e["field"].(string)
	return f
}

func TestBadInputNamesTheField(t *testing.T) {
	t.Parallel()
	base := server(t)
	big := `{"topic":"t","payload":"` + strings.Repeat("x", 2000) + `"}`
	for _, tc := range []struct {
		body  string
		code  int
		field string
	}{
		{`{}`, 400, "topic"},
		{`{"topic":"has space"}`, 400, "topic"},
		{`{"topic":"t","colour":"red"}`, 400, "colour"},
		{`{"topic":"t","max_attempts":"three"}`, 400, "max_attempts"},
		{`{"topic":"t","max_attempts":5000}`, 400, "max_attempts"},
		{`{"topic":"t","delay":"soon"}`, 400, "delay"},
		{`{"topic":"t","delay":"-5s"}`, 400, "delay"},
		{`{"topic":"t","delay":"5s","due_at":"2030-01-01T00:00:00Z"}`, 400, "due_at"},
		{`{"topic":"t","due_at":"tomorrow"}`, 400, "due_at"},
		{`{"topic":"t","target":"mailto:x@y"}`, 400, "target"},
		{`{"topic":"t","key":"` + strings.Repeat("k", 256) + `"}`, 400, "key"},
		{big, 413, "payload"},
		{`{"topic":`, 400, ""},
		{``, 400, ""},
	} {
		code, m := call(t, "POST", base+"/v1/tasks", tc.body)
		if code != tc.code || errField(m) != tc.field {
			t.Errorf("%.60s: HTTP %d field %q (%v); want %d %q", tc.body, code, errField(m), m, tc.code, tc.field)
		}
	}
	// Nothing was written by any of them.
	code, m := call(t, "GET", base+"/v1/tasks", "")
	if code != 200 || len(m["tasks"].([]any)) != 0 {
		t.Fatalf("bad input wrote tasks: %v", m)
	}
}

func TestBatchReportsEachTask(t *testing.T) {
	t.Parallel()
	base := server(t)
	body := `{"tasks":[{"topic":"b","key":"1","delay":"1h","target":"http://127.0.0.1:9/t"},{"topic":"bad topic"},{"topic":"b","key":"2","delay":"1h","payload":[1,2,3],"target":"http://127.0.0.1:9/t"},{"topic":"b","key":"1","target":"http://127.0.0.1:9/t"}]}`
	code, m := call(t, "POST", base+"/v1/tasks:batch", body)
	if code != 200 {
		t.Fatalf("batch: HTTP %d %v", code, m)
	}
	items := m["tasks"].([]any)
	if len(items) != 4 {
		t.Fatalf("%d answers for 4 tasks", len(items))
	}
	first := items[0].(map[string]any)
	if first["id"] == nil || items[1].(map[string]any)["error"] == nil || items[2].(map[string]any)["id"] == nil {
		t.Fatalf("answers %v", items)
	}
	if e := items[1].(map[string]any)["error"].(map[string]any); e["field"] != "topic" {
		t.Fatalf("bad task's error %v", e)
	}
	if items[3].(map[string]any)["id"] != first["id"] {
		t.Fatal("a resubmitted key in a batch did not return the existing task")
	}
	// created as a single submit's 201 or 200: the key's second submit in
	// the batch found the first's task; an error is not created.
	for i, want := range []bool{true, false, true, false} {
		if got := items[i].(map[string]any)["created"]; got != want {
			t.Errorf("item %d: created %v, want %v", i, got, want)
		}
	}
	_, l := call(t, "GET", base+"/v1/tasks?topic=b", "")
	if n := len(l["tasks"].([]any)); n != 2 {
		t.Fatalf("batch wrote %d tasks, want 2", n)
	}
	if code, m := call(t, "POST", base+"/v1/tasks:batch", `{"tasks":[]}`); code != 400 || errField(m) != "tasks" {
		t.Fatalf("empty batch: %d %v", code, m)
	}
	var many bytes.Buffer
	many.WriteString(`{"tasks":[`)
	for i := range 1001 {
		if i > 0 {
			many.WriteString(",")
		}
		many.WriteString(`{"topic":"m"}`)
	}
	many.WriteString("]}")
	if code, m := call(t, "POST", base+"/v1/tasks:batch", many.String()); code != 400 || errField(m) != "tasks" {
		t.Fatalf("1001 tasks: %d %v", code, m)
	}
}

func TestListParamsAndPaging(t *testing.T) {
	t.Parallel()
	base := server(t)
	for i := range 7 {
		call(t, "POST", base+"/v1/tasks", `{"topic":"page","delay":"1h","target":"http://127.0.0.1:9/t","key":"`+string(rune('a'+i))+`"}`)
	}
	seen := map[string]bool{}
	cursor := ""
	for range 10 {
		url := base + "/v1/tasks?topic=page&limit=3"
		if cursor != "" {
			url += "&cursor=" + cursor
		}
		code, m := call(t, "GET", url, "")
		if code != 200 {
			t.Fatalf("list: %d %v", code, m)
		}
		for _, x := range m["tasks"].([]any) {
			id := x.(map[string]any)["id"].(string)
			if seen[id] {
				t.Fatalf("task %s on two pages", id)
			}
			seen[id] = true
		}
		next, _ := m["next_cursor"].(string)
		if next == "" {
			break
		}
		cursor = next
	}
	if len(seen) != 7 {
		t.Fatalf("paging saw %d of 7", len(seen))
	}
	// Without a limit the page is the default 100 and, when full, has a
	// cursor to the next one.
	var batch strings.Builder
	batch.WriteString(`{"tasks":[`)
	for i := range 110 {
		if i > 0 {
			batch.WriteString(",")
		}
		batch.WriteString(`{"topic":"page.default","delay":"1h","target":"http://127.0.0.1:9/t"}`)
	}
	batch.WriteString("]}")
	if code, m := call(t, "POST", base+"/v1/tasks:batch", batch.String()); code != 200 {
		t.Fatalf("batch: %d %v", code, m)
	}
	dcode, page := call(t, "GET", base+"/v1/tasks?topic=page.default", "")
	if n := len(page["tasks"].([]any)); dcode != 200 || n != 100 || page["next_cursor"] == nil {
		t.Fatalf("default page: %d, %d tasks, next_cursor %v", dcode, n, page["next_cursor"])
	}
	dcode, page = call(t, "GET", base+"/v1/tasks?topic=page.default&cursor="+page["next_cursor"].(string), "")
	if n := len(page["tasks"].([]any)); dcode != 200 || n != 10 || page["next_cursor"] != nil {
		t.Fatalf("second default page: %d, %d tasks, next_cursor %v", dcode, n, page["next_cursor"])
	}
	for _, q := range []struct{ query, field string }{
		{"limit=0", "limit"}, {"limit=abc", "limit"}, {"status=sleeping", "status"},
		{"cursor=xyz", "cursor"}, {"topic=a%20b", "topic"}, {"colour=red", "colour"},
	} {
		if code, m := call(t, "GET", base+"/v1/tasks?"+q.query, ""); code != 400 || errField(m) != q.field {
			t.Errorf("%s: %d %v", q.query, code, m)
		}
	}
	if code, _ := call(t, "GET", base+"/healthz", ""); code != 200 {
		t.Fatal("healthz")
	}
	if code, _ := call(t, "GET", base+"/readyz", ""); code != 200 {
		t.Fatal("readyz")
	}
	code, m := call(t, "GET", base+"/metrics", "")
	if code != 200 || !strings.Contains(m["raw"].(string), "ontime_tasks_submitted_total") {
		t.Fatalf("metrics: %d", code)
	}
	if code, _ := call(t, "POST", base+"/v1/tasks/"+strings.Repeat("0", 26)+":explode", ""); code != 404 {
		t.Fatalf("unknown op: %d", code)
	}
}

// The batch answer is written item by item (no views kept): its bytes are
// still what encoding/json writes for the same answer, for created,
// existing and refused tasks, payloads it compacts and escapes, and a bad
// target repeated (judged once for the batch, refused for each task).
func TestBatchAnswerIsEncodingJSON(t *testing.T) {
	t.Parallel()
	base := server(t)
	body := `{"tasks":[` +
		`{"topic":"e","key":"1","delay":"1h","target":"http://127.0.0.1:9/t","payload":{ "a" : [1, 2, "x y"] ,"h":"<&>"}},` +
		`{"topic":"e","key":"2","delay":"1h","target":"mailto:x@y"},` +
		`{"topic":"e","key":"3","delay":"1h","target":"mailto:x@y"},` +
		`{"topic":"e","delay":"1h","target":"http://127.0.0.1:9/t","payload":"\u2028 line"},` +
		`{"topic":"e","key":"1","target":"http://127.0.0.1:9/t"},` +
		`{"topic":"bad topic"},` +
		`{"topic":"e","delay":"1h","target":"http://127.0.0.1:9/t","payload":12.50e1}]}`
	resp, err := http.Post(base+"/v1/tasks:batch", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("HTTP %d %s", resp.StatusCode, raw)
	}
	var got apiv1.BatchResponse
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	var want bytes.Buffer
	if err := json.NewEncoder(&want).Encode(got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(raw, want.Bytes()) {
		t.Fatalf("answer\n%s\nis not encoding/json's\n%s", raw, want.Bytes())
	}
	if n := resp.ContentLength; n != int64(len(raw)) {
		t.Fatalf("Content-Length %d for %d bytes", n, len(raw))
	}
	items := got.Tasks
	if len(items) != 7 {
		t.Fatalf("%d items for 7 tasks", len(items))
	}
	for i, refused := range []bool{false, true, true, false, false, true, false} {
		if (items[i].Error != nil) != refused {
			t.Fatalf("item %d: error %v, want refused %v", i, items[i].Error, refused)
		}
	}
	for _, i := range []int{1, 2} {
		if items[i].Error.Field != "target" {
			t.Fatalf("item %d: %+v, want an error on target", i, items[i].Error)
		}
	}
	if string(items[0].Payload) != `{"a":[1,2,"x y"],"h":"\u003c\u0026\u003e"}` || string(items[3].Payload) != `"\u2028 line"` || string(items[6].Payload) != `12.50e1` {
		t.Fatalf("payloads %s %s %s", items[0].Payload, items[3].Payload, items[6].Payload)
	}
	if !items[0].Created || items[4].Created || items[4].ID != items[0].ID {
		t.Fatalf("the key's second task: %+v, first %+v", items[4], items[0])
	}
}

// TestBatchMinimalAnswer: with Prefer: return=minimal a batch answers each
// task's ID and status (or its error) in the whole answer's order and
// terms, says Preference-Applied, and writes what the whole answer would.
func TestBatchMinimalAnswer(t *testing.T) {
	t.Parallel()
	base := server(t)
	body := `{"tasks":[` +
		`{"topic":"min","key":"1","delay":"1h","target":"http://127.0.0.1:9/t"},` +
		`{"topic":"bad topic"},` +
		`{"topic":"min","delay":"1h","target":"mailto:x@y"},` +
		`{"topic":"min","delay":"1h","target":"http://127.0.0.1:9/t","payload":{"a":1}},` +
		`{"topic":"min","key":"1","target":"http://127.0.0.1:9/t"}]}`
	post := func(prefer string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest("POST", base+"/v1/tasks:batch", strings.NewReader(body))
		if prefer != "" {
			req.Header.Set("Prefer", prefer)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("Prefer %q: HTTP %d %s", prefer, resp.StatusCode, raw)
		}
		return resp, raw
	}
	resp, raw := post("return=minimal")
	if got := resp.Header.Get("Preference-Applied"); got != "return=minimal" {
		t.Fatalf("Preference-Applied %q", got)
	}
	var got apiv1.BatchMinimalResponse
	if err := jsonStrict(raw, &got); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	var want bytes.Buffer
	if err := json.NewEncoder(&want).Encode(got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(raw, want.Bytes()) || resp.ContentLength != int64(len(raw)) {
		t.Fatalf("answer\n%s\nis not encoding/json's\n%s", raw, want.Bytes())
	}
	it := got.Tasks
	if len(it) != 5 {
		t.Fatalf("%d items for 5 tasks: %s", len(it), raw)
	}
	if it[0].ID == "" || it[0].Status != "pending" || !it[0].Created || it[0].Error != nil {
		t.Fatalf("item 0: %+v", it[0])
	}
	if it[1].Error == nil || it[1].Error.Code != apiv1.CodeInvalid || it[1].Error.Field != "topic" || it[1].ID != "" || it[1].Created {
		t.Fatalf("item 1: %+v", it[1])
	}
	if it[2].Error == nil || it[2].Error.Field != "target" {
		t.Fatalf("item 2: %+v", it[2])
	}
	if it[3].ID == "" || it[3].ID == it[0].ID || !it[3].Created {
		t.Fatalf("item 3: %+v", it[3])
	}
	if it[4].ID != it[0].ID || it[4].Created || it[4].Status != "pending" {
		t.Fatalf("the key's second task: %+v, first %+v", it[4], it[0])
	}
	// What the minimal answer names is what was written: the tasks by
	// their IDs, and no more of them.
	for _, i := range []int{0, 3} {
		if code, m := call(t, "GET", base+"/v1/tasks/"+it[i].ID, ""); code != 200 || m["topic"] != "min" {
			t.Fatalf("GET item %d: %d %v", i, code, m)
		}
	}
	if _, l := call(t, "GET", base+"/v1/tasks?topic=min", ""); len(l["tasks"].([]any)) != 2 {
		t.Fatalf("tasks of the batch: %v", l)
	}
	// Prefer as RFC 7240 writes it: among others, quoted, any case, with
	// parameters; anything else is the whole answer.
	for prefer, minimal := range map[string]bool{
		"respond-async, return=minimal": true, `return="minimal"`: true, "Return=Minimal; x=y": true, " return = minimal ": true,
		"return=representation": false, "returns=minimal": false, "wait=5": false, "": false,
	} {
		resp, raw := post(prefer)
		applied := resp.Header.Get("Preference-Applied") == "return=minimal"
		var whole apiv1.BatchResponse
		isWhole := jsonStrict(raw, &whole) == nil && len(whole.Tasks) == 5 && whole.Tasks[0].Task != nil && whole.Tasks[0].Topic == "min"
		if applied != minimal || isWhole == minimal {
			t.Errorf("Prefer %q: applied %v, a whole answer %v; want minimal %v: %s", prefer, applied, isWhole, minimal, raw)
		}
	}
}

// TestLargeBatchKeepsOrder: a batch decoded on two cores answers each task
// in its place, refused ones with their own error, in both halves.
func TestLargeBatchKeepsOrder(t *testing.T) {
	t.Parallel()
	base := server(t)
	const n = 301
	var b bytes.Buffer
	b.WriteString(`{"tasks":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		switch {
		case i%7 == 3:
			fmt.Fprintf(&b, `{"topic":"bad topic %d"}`, i)
		case i%11 == 5:
			fmt.Fprintf(&b, `{"topic":"large","delay":"%d parsecs"}`, i)
		default:
			fmt.Fprintf(&b, `{"topic":"large","key":"k%d","delay":"1h","target":"http://127.0.0.1:9/t","payload":{"i":%d}}`, i, i)
		}
	}
	b.WriteString("]}")
	code, m := call(t, "POST", base+"/v1/tasks:batch", b.String())
	if code != 200 {
		t.Fatalf("batch: %d %v", code, m)
	}
	items := m["tasks"].([]any)
	if len(items) != n {
		t.Fatalf("%d items for %d tasks", len(items), n)
	}
	created := 0
	for i, it := range items {
		it := it.(map[string]any)
		e, _ := it["error"].(map[string]any)
		switch {
		case i%7 == 3:
			if e == nil || e["field"] != "topic" || !strings.Contains(e["message"].(string), "position") {
				t.Fatalf("item %d: %v, want its topic refused", i, it)
			}
		case i%11 == 5:
			if e == nil || e["field"] != "delay" || !strings.Contains(e["message"].(string), fmt.Sprintf("%d parsecs", i)) {
				t.Fatalf("item %d: %v, want its own delay refused", i, it)
			}
		default:
			if e != nil || it["key"] != fmt.Sprintf("k%d", i) || it["created"] != true {
				t.Fatalf("item %d: %v", i, it)
			}
			created++
		}
	}
	_, l := call(t, "GET", base+"/v1/tasks?topic=large&limit=1000", "")
	if got := len(l["tasks"].([]any)); got != created {
		t.Fatalf("%d tasks stored, %d answered created", got, created)
	}
}
