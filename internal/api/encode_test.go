package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/internal/halves"
)

// stdJSON is what writeJSON wrote before the appenders: encoding/json's
// Encoder, HTML escaping and newline included.
func stdJSON(t *testing.T, v any) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// awkward are strings that take every branch of encoding/json's escaping.
var awkward = []string{"", "plain", `quo"te`, `back\slash`, "<b>&amp;</b>", "tab\tnl\nret\rbs\bff\f",
	"ctl\x00\x01\x1f\x7f", "é ü 日本", "line\u2028para\u2029", "bad\xffutf8\xc3", "emoji 😀"}

func sampleTasks() []apiv1.Task {
	now := time.Date(2026, 11, 23, 18, 0, 0, 123456789, time.UTC)
	var out []apiv1.Task
	payloads := []json.RawMessage{nil, json.RawMessage(`null`), json.RawMessage(`{"a":1}`),
		json.RawMessage(`{ "a" : [1, 2, "x y"] ,"h":"<&>"}`), json.RawMessage("\"\u2028\""), json.RawMessage(`12.5e3`)}
	for i, s := range awkward {
		out = append(out, apiv1.Task{ID: "01JD" + s, Topic: s, Key: s, DueAt: now.Add(time.Duration(i) * time.Second),
			FirstDueAt: now, Payload: payloads[i%len(payloads)], Target: s, MaxAttempts: i, Status: "pending" + s,
			Attempts: -i, CreatedAt: now.Truncate(time.Second), UpdatedAt: now.Truncate(time.Duration(i+1) * time.Millisecond), LastError: s})
	}
	// Equal instants share text (appendTimeAgain); zero times.
	out = append(out, apiv1.Task{DueAt: now, FirstDueAt: now, CreatedAt: now, UpdatedAt: now}, apiv1.Task{})
	return out
}

func TestAppendReplyIsEncodingJSON(t *testing.T) {
	tasks := sampleTasks()
	var items []apiv1.BatchItem
	for i := range tasks {
		items = append(items, apiv1.BatchItem{Task: &tasks[i], Created: i%2 == 0})
		// The handler never answers created with an error; the encoder
		// writes what it is given, as encoding/json does.
		items = append(items, apiv1.BatchItem{Error: &apiv1.ErrorDetail{Code: apiv1.CodeInvalid, Field: awkward[i%len(awkward)], Message: awkward[(i+3)%len(awkward)]}, Created: i%3 == 0})
	}
	values := []any{
		apiv1.BatchResponse{Tasks: items}, apiv1.BatchResponse{}, apiv1.BatchResponse{Tasks: []apiv1.BatchItem{}},
		apiv1.ListPage{Tasks: tasks, NextCursor: "c<1>"}, apiv1.ListPage{}, apiv1.ListPage{Tasks: []apiv1.Task{}},
		apiv1.ErrorBody{Error: apiv1.ErrorDetail{Code: apiv1.CodeNotFound, Message: "no task has this id"}},
	}
	for _, tk := range tasks {
		values = append(values, tk)
	}
	for i, v := range values {
		got, ok := appendReply(nil, v)
		if !ok {
			t.Fatalf("value %d (%T): appendReply declined", i, v)
		}
		if want := stdJSON(t, v); !bytes.Equal(got, want) {
			t.Errorf("value %d (%T):\n got %s\nwant %s", i, v, got, want)
		}
	}
}

// Values the appenders do not vouch for go to encoding/json, with its
// answer: the same bytes, or (an invalid payload) the status and no body.
func TestWriteJSONFallsBackToEncodingJSON(t *testing.T) {
	far := apiv1.Task{ID: "x", DueAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}
	zoned := apiv1.Task{ID: "x", DueAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("X", 3600))}
	for _, v := range []any{zoned, map[string]string{"status": "ok"}, apiv1.BatchResponse{Tasks: []apiv1.BatchItem{{}}}} {
		w := httptest.NewRecorder()
		writeJSON(w, 200, v)
		if want := stdJSON(t, v); !bytes.Equal(w.Body.Bytes(), want) {
			t.Errorf("%T:\n got %s\nwant %s", v, w.Body.Bytes(), want)
		}
	}
	for _, v := range []any{far, apiv1.Task{ID: "x", Payload: json.RawMessage(`{bad`)}} {
		w := httptest.NewRecorder()
		writeJSON(w, 201, v)
		if w.Code != 201 || w.Body.Len() != 0 {
			t.Errorf("%v: got %d %q, want 201 and no body (as encoding/json)", v, w.Code, w.Body.String())
		}
	}
}

func TestWriteJSONHeaders(t *testing.T) {
	w := httptest.NewRecorder()
	writeJSON(w, 201, sampleTasks()[1])
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	if cl := w.Header().Get("Content-Length"); cl != strconv.Itoa(w.Body.Len()) {
		t.Errorf("Content-Length %q for %d bytes", cl, w.Body.Len())
	}
}

// FuzzFastDecodeTask holds the fast decoder to encoding/json's: when it
// takes a body, encoding/json (DisallowUnknownFields) takes it too and
// decodes the same task.
func FuzzFastDecodeTask(f *testing.F) {
	for _, s := range []string{`{}`, `{"topic":"t"}`, ` { "topic" : "t" , "payload" : {"a":[1,"}"]} } `,
		`{"topic":"t","key":"k","due_at":"2030-01-01T00:00:00Z","delay":"5s","target":"http://x","max_attempts":7,"if_exists":"replace","payload":null}`,
		`{"max_attempts":-0}`, `{"max_attempts":01}`, `{"max_attempts":1.5}`, `{"max_attempts":1e3}`, `{"max_attempts":99999999999999999999}`,
		`{"Topic":"t"}`, `{"topic":"t\n"}`, `{"topic":null}`, `{"colour":"red"}`, `{"payload":tru}`, `{"payload":"a\"b"}`,
		`{"payload":1,"payload":2}`, `{"topic":"a"}x`, `[1]`, `"s"`, `{"payload":[}`, `{"topic":"t",}`, `{"payload":"\u2028"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if checkUTF8(raw) != nil {
			return
		}
		var fast apiv1.TaskRequest
		// valid=true only where the caller's promise holds.
		if !fastDecodeTask(raw, &fast, json.Valid(raw)) {
			return
		}
		var std apiv1.TaskRequest
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&std); err != nil {
			t.Fatalf("%q: fast took it, encoding/json says %v", raw, err)
		}
		if dec.More() {
			t.Fatalf("%q: fast took trailing data", raw)
		}
		if fj, sj := stdJSON(t, fast), stdJSON(t, std); !bytes.Equal(fj, sj) || !bytes.Equal(fast.Payload, std.Payload) {
			t.Fatalf("%q:\nfast %s (payload %q)\n std %s (payload %q)", raw, fj, fast.Payload, sj, std.Payload)
		}
	})
}

// FuzzFastBatch holds fastBatch to readBatch's decoder: the same tasks,
// byte for byte, whenever it takes a body.
func FuzzFastBatch(f *testing.F) {
	for _, s := range []string{`{"tasks":[]}`, `{"tasks":[{"topic":"a"}, 1 ,"x",null,[1,2],{"p":"]"}]}`, ` {"tasks" : [ {} ] } `,
		`{"tasks":null}`, `{"tasks":[],"tasks":[]}`, `{"Tasks":[]}`, `{"tasks":[1,]}`, `{"tasks":[1]}x`, `{"tasks":[1]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fast, ok := fastBatch(body)
		if !ok {
			return
		}
		var std struct{ Tasks []json.RawMessage }
		dec := json.NewDecoder(bytes.NewReader(body))
		if err := dec.Decode(&std); err != nil {
			t.Fatalf("%q: fast took it, encoding/json says %v", body, err)
		}
		if len(fast) != len(std.Tasks) {
			t.Fatalf("%q: %d tasks, encoding/json %d", body, len(fast), len(std.Tasks))
		}
		for i := range fast {
			if !bytes.Equal(fast[i], std.Tasks[i]) {
				t.Fatalf("%q: task %d %q, encoding/json %q", body, i, fast[i], std.Tasks[i])
			}
		}
	})
}

// TestFastBatchChecksEveryTask: a batch large enough to be checked on two
// cores is declined when any one task, in either half, is not JSON, and
// taken whole otherwise.
func TestFastBatchChecksEveryTask(t *testing.T) {
	const n = 2*halves.From + 3
	body := func(bad int) []byte {
		var b bytes.Buffer
		b.WriteString(`{"tasks":[`)
		for i := range n {
			if i > 0 {
				b.WriteString(" , ")
			}
			if i == bad {
				b.WriteString(`{"topic":"t","payload":{"a":tru}}`) // jsonr finds its end; JSON it is not
			} else {
				fmt.Fprintf(&b, `{"topic":"t","payload":{"i":%d,"s":"x\"y"}}`, i)
			}
		}
		b.WriteString("]}")
		return b.Bytes()
	}
	if tasks, ok := fastBatch(body(-1)); !ok || len(tasks) != n {
		t.Fatalf("a valid batch of %d: ok %v, %d tasks", n, ok, len(tasks))
	}
	for _, bad := range []int{0, n/2 - 1, n / 2, n - 1} {
		raw := body(bad)
		if json.Valid(raw) {
			t.Fatal("the bad task is valid JSON")
		}
		if _, ok := fastBatch(raw); ok {
			t.Errorf("task %d of %d not JSON, and the batch was taken", bad, n)
		}
	}
}
