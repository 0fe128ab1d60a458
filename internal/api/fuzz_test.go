package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/internal/api"
	"github.com/ontimehq/ontime/internal/hot"
	"github.com/ontimehq/ontime/internal/router"
	"github.com/ontimehq/ontime/internal/stagetest"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/submit"
	"github.com/ontimehq/ontime/internal/task"
)

// fuzzAPI is the API handler over the real submit path and a real SQLite
// store in a temp dir. Nothing consumes its hot tier, so the fuzzer's
// targets (any URL) are never called.
type fuzzAPI struct {
	h  http.Handler
	st store.Store
}

type noNotifier struct{}

func (noNotifier) Notify(store.Item, time.Time) {}

const fuzzMaxPayload = 1000

func newFuzzAPI(tb testing.TB) *fuzzAPI {
	tb.Helper()
	st := stagetest.Store(tb)
	svc, err := submit.New(submit.Config{Store: st, Tier: stagetest.Tier(tb), Planner: hot.NewPlanner(20*time.Millisecond, 0),
		Notifier: noNotifier{}, Topology: stagetest.Topology, Segments: stagetest.Segments, NodeID: "fuzz",
		Window: time.Second, LeaseTTL: time.Minute, Limits: task.Limits{MaxPayloadBytes: fuzzMaxPayload}})
	if err != nil {
		tb.Fatal(err)
	}
	svc.SetReady(true)
	a := &fuzzAPI{h: api.NewHandler(api.Services{Tasks: svc, Keys: svc}, api.Options{MaxPayloadBytes: fuzzMaxPayload, MaxBatchBytes: 256 << 10}), st: st}
	// Some tasks for the list and the keys to collide with.
	for i, body := range []string{
		`{"topic":"orders","key":"k1","delay":"1h","payload":{"n":1}}`,
		`{"topic":"orders","key":"k2","target":"http://127.0.0.1:9/x"}`,
		`{"topic":"mail","delay":"10m"}`,
	} {
		if code, raw := a.do(tb, "POST", "/v1/tasks", "", []byte(body)); code != 201 {
			tb.Fatalf("seed task %d: HTTP %d %s", i, code, raw)
		}
	}
	return a
}

func (a *fuzzAPI) do(tb testing.TB, method, path, rawQuery string, body []byte) (int, []byte) {
	req := httptest.NewRequest(method, path, bytes.NewReader(body))
	req.URL.RawQuery = rawQuery
	req.RequestURI = ""
	rec := httptest.NewRecorder()
	a.h.ServeHTTP(rec, req)
	raw, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, raw
}

func (a *fuzzAPI) total(tb testing.TB) int64 { return stagetest.Total(tb, a.st) }

var statusOfCode = map[apiv1.Code][]int{
	apiv1.CodeInvalid: {400, 405}, apiv1.CodeTooLarge: {413}, apiv1.CodeNotFound: {404}, apiv1.CodeConflict: {409},
}

// checkAnswer: never a 5xx for anything a client sends; every answer is
// JSON; every error is the envelope with a code that matches its status.
func checkAnswer(t *testing.T, what string, code int, raw []byte) {
	t.Helper()
	if code >= 500 {
		t.Fatalf("%s: HTTP %d %s", what, code, raw)
	}
	if !json.Valid(raw) {
		t.Fatalf("%s: HTTP %d answer is not JSON: %q", what, code, raw)
	}
	if code < 400 {
		return
	}
	var eb apiv1.ErrorBody
	if err := json.Unmarshal(raw, &eb); err != nil || eb.Error.Message == "" {
		t.Fatalf("%s: HTTP %d without the error envelope: %s", what, code, raw)
	}
	ok := false
	for _, s := range statusOfCode[eb.Error.Code] {
		ok = ok || s == code
	}
	if !ok {
		t.Fatalf("%s: HTTP %d with code %q", what, code, eb.Error.Code)
	}
}

// checkStored: the view the API answered is the stored task's.
func (a *fuzzAPI) checkStored(t *testing.T, v apiv1.Task, asked apiv1.TaskRequest, created bool) {
	t.Helper()
	if _, err := router.ParseID(v.ID); err != nil {
		t.Fatalf("answered id %q: %v", v.ID, err)
	}
	code, raw := a.do(t, "GET", "/v1/tasks/"+v.ID, "", nil)
	var got apiv1.Task
	if code != 200 || json.Unmarshal(raw, &got) != nil {
		t.Fatalf("GET %s: HTTP %d %s", v.ID, code, raw)
	}
	if got.ID != v.ID || got.Topic != v.Topic || got.Key != v.Key || !got.DueAt.Equal(v.DueAt) || got.Target != v.Target || !bytes.Equal(compact(got.Payload), compact(v.Payload)) {
		t.Fatalf("answered %+v, stored %+v", v, got)
	}
	if got.Topic != asked.Topic || got.Key != asked.Key {
		t.Fatalf("asked topic %q key %q, stored %q %q", asked.Topic, asked.Key, got.Topic, got.Key)
	}
	// A created task is never due before what was asked, not by a
	// nanosecond; a key's existing task keeps its own due time.
	if d, err := time.Parse(time.RFC3339Nano, asked.DueAt); created && err == nil && got.DueAt.Before(d) {
		t.Fatalf("asked due %s, stored %s: earlier", d, got.DueAt)
	}
}

func compact(b []byte) []byte {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return b
	}
	return buf.Bytes()
}

var submitSeeds = []string{
	`{"topic":"orders","key":"k1","delay":"30s","payload":{"order":42},"target":"https://shop.example/hook","max_attempts":3}`,
	`{"topic":"orders","key":"k1"}`,
	`{"topic":"t","due_at":"2030-01-01T00:00:00.123456789Z"}`,
	`{"topic":"t","due_at":"0001-01-01T00:00:00Z"}`,
	`{"topic":"t","due_at":"2026-11-23T18:00:00+14:00","payload":null}`,
	`{}`, `{"topic":"has space"}`, `{"topic":"t","colour":"red"}`, `{"topic":"t","max_attempts":"three"}`,
	`{"topic":"t","delay":"5s","due_at":"2030-01-01T00:00:00Z"}`, `{"topic":"t","target":"mailto:x@y"}`,
	`{"topic":"t","key":"\xff"}`, `{"topic":"t","key":"a\u0000b"}`, `{"topic":"t","payload":"` + strings.Repeat("x", 1200) + `"}`,
	`{"topic":"t"} {"topic":"u"}`, `[]`, `null`, `{"topic":"t","topic":"u"}`, `{"topic":"t","delay":"-1ns"}`,
	`{"topic":"t","delay":"87600h1s"}`, `{"topic":"t","max_attempts":1e3}`, `{"topic":"t","payload":{"a":[1,2,{"b":null}]}}`,
}

// FuzzSubmit: POST /v1/tasks with any body: no 5xx; a 4xx writes nothing;
// a 201 writes one task, stored as answered, never due before what was
// asked; a 200 (the key's live task) writes nothing.
func FuzzSubmit(f *testing.F) {
	for _, s := range submitSeeds {
		f.Add([]byte(s))
	}
	a := newFuzzAPI(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		before := a.total(t)
		code, raw := a.do(t, "POST", "/v1/tasks", "", body)
		checkAnswer(t, fmt.Sprintf("POST /v1/tasks %q", body), code, raw)
		after := a.total(t)
		switch {
		case code >= 400 || code == 200:
			if after != before {
				t.Fatalf("HTTP %d for %q, yet %d tasks were written", code, body, after-before)
			}
		case code == 201:
			if after != before+1 {
				t.Fatalf("201 for %q, and %d tasks were written", body, after-before)
			}
		default:
			t.Fatalf("HTTP %d for %q", code, body)
		}
		if code == 200 || code == 201 {
			var v apiv1.Task
			var asked apiv1.TaskRequest
			if json.Unmarshal(raw, &v) != nil || json.Unmarshal(body, &asked) != nil {
				t.Fatalf("HTTP %d %s for %q", code, raw, body)
			}
			a.checkStored(t, v, asked, code == 201)
		}
	})
}

// FuzzBatch: POST /v1/tasks:batch with any body: no 5xx; a 4xx writes
// nothing; a 200 has one answer per task, each a stored task or an error
// of the task's own, and writes no more tasks than it answered.
func FuzzBatch(f *testing.F) {
	f.Add([]byte(`{"tasks":[]}`))
	f.Add([]byte(`{"tasks":[{"topic":"a"},{"topic":"bad topic"},{"topic":"orders","key":"k1"},"x",{"topic":"a","key":"\xff"}]}`))
	f.Add([]byte(`{"tasks":[{"topic":"a","key":"dup"},{"topic":"a","key":"dup"}]}`))
	f.Add([]byte(`{"tasks":null}`))
	f.Add([]byte(`{"tasks":[{"topic":"a"}],"extra":1}`))
	f.Add([]byte(`{"tasks":[{"topic":"a","payload":"` + strings.Repeat("y", 1100) + `"}]}`))
	for _, s := range submitSeeds[:6] {
		f.Add([]byte(`{"tasks":[` + s + `]}`))
	}
	a := newFuzzAPI(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		before := a.total(t)
		code, raw := a.do(t, "POST", "/v1/tasks:batch", "", body)
		checkAnswer(t, fmt.Sprintf("POST /v1/tasks:batch %q", body), code, raw)
		after := a.total(t)
		if code >= 400 {
			if after != before {
				t.Fatalf("HTTP %d for %q, yet %d tasks were written", code, body, after-before)
			}
			return
		}
		if code != 200 {
			t.Fatalf("HTTP %d for %q", code, body)
		}
		var in struct{ Tasks []json.RawMessage }
		var out apiv1.BatchResponse
		if json.Unmarshal(raw, &out) != nil || json.Unmarshal(body, &in) != nil || len(out.Tasks) != len(in.Tasks) {
			t.Fatalf("batch %q: %d answers %s", body, len(out.Tasks), raw)
		}
		stored := 0
		for i, it := range out.Tasks {
			switch {
			case it.Error != nil && it.Task == nil:
				if it.Error.Code != apiv1.CodeInvalid && it.Error.Code != apiv1.CodeTooLarge {
					t.Fatalf("batch %q: task %d failed with %+v", body, i, *it.Error)
				}
			case it.Error == nil && it.Task != nil:
				stored++
				var asked apiv1.TaskRequest
				if json.Unmarshal(in.Tasks[i], &asked) != nil {
					t.Fatalf("batch %q: task %d stored from %q", body, i, in.Tasks[i])
				}
				a.checkStored(t, *it.Task, asked, asked.Key == "")
			default:
				t.Fatalf("batch %q: answer %d is neither a task nor an error: %s", body, i, raw)
			}
		}
		if after-before > int64(stored) {
			t.Fatalf("batch %q: %d tasks written, %d answered", body, after-before, stored)
		}
	})
}

// FuzzList: GET /v1/tasks with any query: no 5xx, nothing written; a page
// holds at most limit tasks, each matching the filters, and a cursor only
// when full.
func FuzzList(f *testing.F) {
	for _, q := range []string{"", "topic=orders", "status=pending&limit=1", "limit=1000", "limit=0", "limit=1001",
		"%zz=1", "topic=", "status=", "topic=a&topic=b", "a;b=c", "cursor=00000000000000000000000000", "cursor=x",
		"status=done&topic=orders&limit=2&cursor=zzzzzzzzzzzzzzzzzzzzzzzzzz", "limit=%31", "topic=%ff", "colour=red"} {
		f.Add(q)
	}
	a := newFuzzAPI(f)
	f.Fuzz(func(t *testing.T, q string) {
		before := a.total(t)
		code, raw := a.do(t, "GET", "/v1/tasks", q, nil)
		checkAnswer(t, "GET /v1/tasks?"+q, code, raw)
		if after := a.total(t); after != before {
			t.Fatalf("GET ?%s wrote %d tasks", q, after-before)
		}
		if code != 200 {
			if code != 400 {
				t.Fatalf("GET ?%s: HTTP %d", q, code)
			}
			return
		}
		var page apiv1.ListPage
		if err := json.Unmarshal(raw, &page); err != nil {
			t.Fatal(err)
		}
		v, err := parseStrict(q)
		if err != nil {
			t.Fatalf("GET ?%s answered 200, but the query is malformed: %v", q, err)
		}
		limit := 100
		if l := v["limit"]; l != "" {
			fmt.Sscan(l, &limit)
		}
		if len(page.Tasks) > limit || (page.NextCursor != "") != (len(page.Tasks) == limit) {
			t.Fatalf("GET ?%s: %d tasks, cursor %q", q, len(page.Tasks), page.NextCursor)
		}
		for _, tk := range page.Tasks {
			if (v["topic"] != "" && tk.Topic != v["topic"]) || (v["status"] != "" && tk.Status != v["status"]) {
				t.Fatalf("GET ?%s listed %+v", q, tk)
			}
		}
	})
}

// parseStrict is the list's query contract, independent of the handler:
// name=value pairs, percent-encoded, each name once among topic, status,
// limit, cursor, with a value.
func parseStrict(q string) (map[string]string, error) {
	out := map[string]string{}
	for _, part := range strings.Split(q, "&") {
		if part == "" {
			continue
		}
		k, val, _ := strings.Cut(part, "=")
		req, err := http.NewRequestWithContext(context.Background(), "GET", "/?"+k+"="+val, nil)
		if err != nil {
			return nil, err
		}
		got := req.URL.Query()
		if len(got) != 1 {
			return nil, fmt.Errorf("%q does not parse as one parameter", part)
		}
		for name, vs := range got {
			if _, dup := out[name]; dup || vs[0] == "" {
				return nil, fmt.Errorf("%q given twice or empty", name)
			}
			switch name {
			case "topic", "status", "limit", "cursor":
			default:
				return nil, fmt.Errorf("unknown parameter %q", name)
			}
			out[name] = vs[0]
		}
	}
	return out, nil
}
