package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/deliver"
)

// batchCall is one batch call as a receiver saw it.
type batchCall struct {
	path  string
	hdr   http.Header
	body  []byte
	tasks []map[string]any
}

// batchReceiver records batch calls and answers with answer.
type batchReceiver struct {
	mu     sync.Mutex
	calls  []batchCall
	answer func(c batchCall, w http.ResponseWriter)
}

func (r *batchReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	c := batchCall{path: req.URL.Path, hdr: req.Header.Clone(), body: b}
	var env struct {
		Tasks []map[string]any `json:"tasks"`
	}
	if err := json.Unmarshal(b, &env); err != nil {
		w.WriteHeader(400)
		return
	}
	c.tasks = env.Tasks
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
	if r.answer != nil {
		r.answer(c, w)
	}
}

func batchOf(target string, n int) []deliver.Delivery {
	ds := make([]deliver.Delivery, n)
	for i := range ds {
		ds[i] = deliver.Delivery{ID: fmt.Sprintf("id%02d", i), Topic: "t.b", Key: fmt.Sprint("k", i), Target: target,
			Payload: []byte(fmt.Sprintf(`{"n":%d}`, i)), DueAt: time.Date(2026, 11, 23, 10, 0, 0, i*1000, time.UTC), Attempt: 1 + i%3}
	}
	return ds
}

// A batch of N answered 2xx: one call, {"tasks":[…]} of the single-call
// bodies in order, signed over the whole body, all delivered.
func TestBatchAllDelivered(t *testing.T) {
	t.Parallel()
	rcv := &batchReceiver{}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	s, err := New(Config{Secret: "k"})
	if err != nil {
		t.Fatal(err)
	}
	ds := batchOf(srv.URL+"/hook", 25)
	for i, err := range s.DeliverBatch(context.Background(), ds) {
		if err != nil {
			t.Fatalf("delivery %d: %v", i, err)
		}
	}
	if len(rcv.calls) != 1 {
		t.Fatalf("%d calls; want 1", len(rcv.calls))
	}
	c := rcv.calls[0]
	if c.hdr.Get("Ontime-Batch") != "25" || c.hdr.Get("Content-Type") != "application/json" || len(c.tasks) != 25 || c.path != "/hook" {
		t.Fatalf("call: %v, %d tasks", c.hdr, len(c.tasks))
	}
	if c.hdr.Get("Ontime-Target") != ds[0].Target {
		t.Fatalf("Ontime-Target %q; want %q", c.hdr.Get("Ontime-Target"), ds[0].Target)
	}
	if err := Verify(c.hdr.Get("Ontime-Signature"), c.hdr.Get("Ontime-Target"), c.body, time.Now(), time.Minute, "k"); err != nil {
		t.Fatalf("batch signature: %v", err)
	}
	want := []byte(`{"tasks":[`)
	for i := range ds {
		if i > 0 {
			want = append(want, ',')
		}
		single, err := appendBody(nil, &ds[i])
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, single...)
	}
	want = append(want, "]}"...)
	if string(c.body) != string(want) {
		t.Fatalf("body\n%s\nwant\n%s", c.body, want)
	}
	if c.tasks[3]["id"] != "id03" || c.tasks[3]["attempt"] != 1.0 || c.tasks[4]["payload"].(map[string]any)["n"] != 4.0 {
		t.Fatalf("task 3: %v", c.tasks[3])
	}
}

// The answer decides each task's outcome: "failed" ids fail (unknown ids
// are ignored), a non-2xx fails them all (410: for good), unreadable JSON
// fails them all, a non-JSON 2xx delivers them all.
func TestBatchAnswers(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		answer func(w http.ResponseWriter)
		failed map[string]bool // nil: all fail
		perm   bool
	}{
		{"failed list", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			_, _ = io.WriteString(w, `{"failed":["id02","id07","nobody"]}`)
		}, map[string]bool{"id02": true, "id07": true}, false},
		{"empty failed", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"failed":[]}`)
		}, map[string]bool{}, false},
		{"json empty body", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(202)
		}, map[string]bool{}, false},
		{"problem+json unreadable", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/problem+json")
			_, _ = io.WriteString(w, `{"failed": "id02"}`)
		}, nil, false},
		{"json garbage", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `ok`)
		}, nil, false},
		{"text 200", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/plain")
			_, _ = io.WriteString(w, `{"failed":["id02"]} is not read`)
		}, map[string]bool{}, false},
		{"503", func(w http.ResponseWriter) { w.WriteHeader(503) }, nil, false},
		{"410", func(w http.ResponseWriter) { w.WriteHeader(410) }, nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(&batchReceiver{answer: func(_ batchCall, w http.ResponseWriter) { tc.answer(w) }})
			defer srv.Close()
			s, err := New(Config{})
			if err != nil {
				t.Fatal(err)
			}
			ds := batchOf(srv.URL, 10)
			errs := s.DeliverBatch(context.Background(), ds)
			for i, err := range errs {
				fail := tc.failed == nil || tc.failed[ds[i].ID]
				switch {
				case fail != (err != nil):
					t.Errorf("%s: %v; want failed %v", ds[i].ID, err, fail)
				case tc.failed != nil && fail && !errors.Is(err, ErrFailedInBatch):
					t.Errorf("%s: %v; want ErrFailedInBatch", ds[i].ID, err)
				case err != nil && deliver.IsPermanent(err) != tc.perm:
					t.Errorf("%s: %v; permanent %v", ds[i].ID, err, deliver.IsPermanent(err))
				}
			}
		})
	}
}

// Tasks of one batch with different targets, or topics signed with
// different secrets, go in separate calls, each signed for its target.
func TestBatchSplitsByTargetAndSecret(t *testing.T) {
	t.Parallel()
	rcv := &batchReceiver{}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	keys := &Keyring{Global: []string{"g"}, Entries: []KeyEntry{{Topics: "secret.*", Secrets: []string{"s"}}}}
	s, err := New(Config{Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	ds := batchOf(srv.URL+"/a", 9)
	ds[1].Target, ds[4].Target = srv.URL+"/b", srv.URL+"/b"
	ds[7].Topic = "secret.x"
	for i, err := range s.DeliverBatch(context.Background(), ds) {
		if err != nil {
			t.Fatalf("delivery %d: %v", i, err)
		}
	}
	if len(rcv.calls) != 3 {
		t.Fatalf("%d calls; want 3 (/a with g, /b with g, /a with s)", len(rcv.calls))
	}
	n := 0
	for _, c := range rcv.calls {
		n += len(c.tasks)
		secret := "g"
		if c.tasks[0]["topic"] == "secret.x" {
			secret = "s"
		}
		if err := Verify(c.hdr.Get("Ontime-Signature"), srv.URL+c.path, c.body, time.Now(), time.Minute, secret); err != nil {
			t.Errorf("call to %s: %v", c.path, err)
		}
	}
	if n != 9 {
		t.Fatalf("%d tasks posted; want 9", n)
	}
}

// A destination's settings pick its timeout; the others keep the default.
func TestDestinationTimeout(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	dest := deliver.Destination(srv.URL)
	s, err := New(Config{Timeout: time.Hour, Destinations: map[string]Destination{dest: {Concurrency: 2, Timeout: 50 * time.Millisecond, Batch: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Deliver(context.Background(), deliver.Delivery{ID: "x", Target: srv.URL, DueAt: time.Now(), Attempt: 1})
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v; want the destination's 50ms timeout", err)
	}
}

// The hand-written body is what encoding/json writes for the same fields.
func TestBodyMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, d := range []deliver.Delivery{
		{ID: "01J", Topic: "a.b", Key: "plain", Payload: []byte(`{"x": [1, 2]}`), DueAt: time.Date(2026, 1, 2, 3, 4, 5, 600, time.FixedZone("x", 3600)), Attempt: 7},
		{ID: "01K", Topic: "a.b", Key: "k\"<é>\n\x01&\\", DueAt: time.Unix(0, 0), Attempt: 1},
	} {
		got, err := appendBody(nil, &d)
		if err != nil {
			t.Fatal(err)
		}
		payload := d.Payload
		if payload == nil {
			payload = []byte("null")
		}
		want, _ := json.Marshal(struct {
			ID      string          `json:"id"`
			Topic   string          `json:"topic"`
			Key     string          `json:"key"`
			Payload json.RawMessage `json:"payload"`
			DueAt   string          `json:"due_at"`
			Attempt int             `json:"attempt"`
		}{d.ID, d.Topic, d.Key, payload, d.DueAt.UTC().Format(time.RFC3339Nano), d.Attempt})
		var a, b any
		if json.Unmarshal(got, &a) != nil || json.Unmarshal(want, &b) != nil || fmt.Sprint(a) != fmt.Sprint(b) {
			t.Errorf("body %s\nwant %s", got, want)
		}
	}
	if _, err := appendBody(nil, &deliver.Delivery{Payload: []byte("{")}); !deliver.IsPermanent(err) {
		t.Errorf("invalid payload: %v", err)
	}
}

// The pooled signer writes exactly what Sign writes, for one secret, a
// rotation and v1, again and again (states reused).
func TestSignerMatchesSign(t *testing.T) {
	t.Parallel()
	var sg signer
	now := time.Now()
	for i := range 50 {
		for _, secrets := range [][]string{{"a"}, {"new", "old"}, nil} {
			body := []byte(fmt.Sprintf(`{"n":%d}`, i))
			target := fmt.Sprintf("https://h/%d", i)
			v1 := i%2 == 0
			if got, want := sg.sign(secrets, now, target, body, v1), Sign(secrets, now, target, body, v1); got != want {
				t.Fatalf("%v: %s; want %s", secrets, got, want)
			}
		}
	}
}

// A batch call with tracing on: no traceparent header (one call, many
// traces); each element carries its own task's traceparent after the
// single-call body's fields, and an element without one has none.
func TestBatchTraceparentPerElement(t *testing.T) {
	t.Parallel()
	rcv := &batchReceiver{}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	s, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	ds := batchOf(srv.URL+"/hook", 3)
	tps := []string{
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
	}
	for i := range ds {
		ds[i].Traceparent = tps[i]
	}
	for i, err := range s.DeliverBatch(context.Background(), ds) {
		if err != nil {
			t.Fatalf("delivery %d: %v", i, err)
		}
	}
	if len(rcv.calls) != 1 {
		t.Fatalf("%d calls; want 1", len(rcv.calls))
	}
	c := rcv.calls[0]
	if v := c.hdr.Values("Traceparent"); len(v) != 0 {
		t.Errorf("batch call carries traceparent header %v", v)
	}
	for i, task := range c.tasks {
		got, has := task["traceparent"]
		if tps[i] == "" {
			if has {
				t.Errorf("element %d: traceparent %v, want none", i, got)
			}
		} else if got != tps[i] {
			t.Errorf("element %d: traceparent %v, want %s", i, got, tps[i])
		}
		if task["id"] != ds[i].ID || task["attempt"] != float64(ds[i].Attempt) {
			t.Errorf("element %d: %v", i, task)
		}
	}
}
