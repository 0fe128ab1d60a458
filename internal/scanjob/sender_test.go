package scanjob

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontimehq/ontime/internal/deliver/broker"
	"github.com/ontimehq/ontime/internal/deliver/broker/redisstream"
	"github.com/ontimehq/ontime/internal/deliver/policy"
	"github.com/ontimehq/ontime/internal/deliver/webhook"
	"github.com/ontimehq/ontime/internal/testdb"
)

// hook is a receiver: it records each call and answers what reply says.
type hook struct {
	srv   *httptest.Server
	mu    sync.Mutex
	calls []*http.Request
	body  [][]byte
	reply func(w http.ResponseWriter, r *http.Request)
}

func newHook(t *testing.T, reply func(w http.ResponseWriter, r *http.Request)) *hook {
	h := &hook{reply: reply}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		h.calls = append(h.calls, r.Clone(context.Background()))
		h.body = append(h.body, b)
		h.mu.Unlock()
		h.reply(w, r)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hook) call(i int) (*http.Request, []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls[i], h.body[i]
}

func (h *hook) n() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.calls)
}

func testBatch() *Batch {
	return &Batch{Job: "bill", Item: "0.1.0", Keys: []any{int64(1), "b-2"},
		Rows: []map[string]any{{"id": int64(1), "x": "a"}, {"id": "b-2", "x": nil}}}
}

// TestWebhookSenderRequest: one POST per batch, its body the batch
// without the keys, the job and item in headers, signed like task
// webhooks with the job's secrets (topic "job:NAME") over the target.
func TestWebhookSenderRequest(t *testing.T) {
	t.Parallel()
	h := newHook(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	keys := &webhook.Keyring{Global: []string{"global"}, V1: true,
		Entries: []webhook.KeyEntry{{Topics: "job:other", Secrets: []string{"other"}}, {Topics: "job:*", Secrets: []string{"new", "old"}}}}
	w := NewWebhookSender(keys, nil, 5*time.Second)
	target := h.srv.URL + "/bill?x=1"
	failed, err := w.Send(context.Background(), target, testBatch())
	if err != nil || failed != nil {
		t.Fatalf("Send: %v %v", failed, err)
	}
	if h.n() != 1 {
		t.Fatalf("%d calls", h.n())
	}
	r, body := h.call(0)
	if r.Method != http.MethodPost || r.URL.RequestURI() != "/bill?x=1" || r.Header.Get("Content-Type") != "application/json" ||
		!strings.HasPrefix(r.Header.Get("User-Agent"), "ontime/") || r.Header.Get("Ontime-Job") != "bill" || r.Header.Get("Ontime-Item") != "0.1.0" ||
		r.Header.Get("Ontime-Target") != target || r.Header.Get("Ontime-Batch-Id") != batchID(testBatch()) {
		t.Fatalf("request %s %s %v", r.Method, r.URL, r.Header)
	}
	var got map[string]any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"job": "bill", "item": "0.1.0", "batch_id": batchID(testBatch()), "rows": []any{
		map[string]any{"id": float64(1), "x": "a"}, map[string]any{"id": "b-2", "x": nil}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("body %s", body)
	}
	sig := r.Header.Get("Ontime-Signature")
	for _, secret := range []string{"new", "old"} {
		// The receiver verifies over the target the call names.
		if err := webhook.Verify(sig, r.Header.Get("Ontime-Target"), body, time.Now(), time.Minute, secret); err != nil {
			t.Errorf("secret %s: %v", secret, err)
		}
	}
	if err := webhook.Verify(sig, target, body, time.Now(), time.Minute, "global"); err == nil {
		t.Error("signed with the global secret although a job entry matches")
	}
	if !strings.Contains(sig, ",v1=") {
		t.Errorf("no v1 signature: %s", sig)
	}

	// No keyring: unsigned.
	if _, err := NewWebhookSender(nil, nil, 5*time.Second).Send(context.Background(), target, testBatch()); err != nil {
		t.Fatal(err)
	}
	if r, _ := h.call(1); r.Header.Get("Ontime-Signature") != "" {
		t.Fatal("an unsigned call carries a signature")
	}
}

// TestWebhookSenderBatchID: a batch sent again (the same rows of the same
// item: a failed call retried, a page read again) carries the same
// batch_id in its body and Ontime-Batch-Id; other rows, another item or
// another job make another ID. A receiver that keeps the IDs it processed
// drops the repeat.
func TestWebhookSenderBatchID(t *testing.T) {
	t.Parallel()
	seen := map[string]int{}
	var mu sync.Mutex
	fail := true
	h := newHook(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if fail { // the first call fails after the receiver processed it
			fail = false
			seen[r.Header.Get("Ontime-Batch-Id")]++
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		seen[r.Header.Get("Ontime-Batch-Id")]++
		w.WriteHeader(http.StatusNoContent)
	})
	w := NewWebhookSender(nil, nil, 5*time.Second)
	if _, err := w.Send(context.Background(), h.srv.URL, testBatch()); err == nil {
		t.Fatal("a 503 answer is not an error")
	}
	if _, err := w.Send(context.Background(), h.srv.URL, testBatch()); err != nil {
		t.Fatal(err)
	}
	other := testBatch()
	other.Keys, other.Rows = other.Keys[:1], other.Rows[:1]
	otherItem := testBatch()
	otherItem.Item = "0.2.0"
	otherJob := testBatch()
	otherJob.Job = "refund"
	for _, b := range []*Batch{other, otherItem, otherJob} {
		if _, err := w.Send(context.Background(), h.srv.URL, b); err != nil {
			t.Fatal(err)
		}
	}
	id := batchID(testBatch())
	if seen[id] != 2 || len(seen) != 4 {
		t.Fatalf("batch IDs seen %v; want %s twice and 3 others", seen, id)
	}
	for i := range h.n() {
		r, body := h.call(i)
		var b struct {
			ID string `json:"batch_id"`
		}
		if err := json.Unmarshal(body, &b); err != nil || b.ID == "" || b.ID != r.Header.Get("Ontime-Batch-Id") {
			t.Fatalf("call %d: body batch_id %q, header %q (%v)", i, b.ID, r.Header.Get("Ontime-Batch-Id"), err)
		}
	}
}

// TestWebhookSenderAnswers: any 2xx processes the batch save the keys an
// answer lists in {"failed": […]}; another status fails it whole, and a
// redirect is not followed.
func TestWebhookSenderAnswers(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		status int
		body   string
		failed []any
		code   int // of the *webhook.StatusError, 0: none
	}{
		{"empty 204", 204, "", nil, 0},
		{"failed keys", 200, `{"failed": [1, "b-2", 9007199254740993]}`, []any{json.Number("1"), "b-2", json.Number("9007199254740993")}, 0},
		{"no failed list", 200, `{"ok": true}`, nil, 0},
		{"not ours", 200, `<html>fine</html>`, nil, 0},
		{"refused", 503, "  busy  ", nil, 503},
		{"redirect", 302, "", nil, 302},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := newHook(t, func(w http.ResponseWriter, r *http.Request) {
				if c.status == 302 {
					w.Header().Set("Location", "/elsewhere")
				}
				w.WriteHeader(c.status)
				io.WriteString(w, c.body)
			})
			failed, err := NewWebhookSender(nil, nil, 5*time.Second).Send(context.Background(), h.srv.URL+"/hook", testBatch())
			if !reflect.DeepEqual(failed, c.failed) {
				t.Errorf("failed %#v, want %#v", failed, c.failed)
			}
			var se *webhook.StatusError
			switch {
			case c.code == 0 && err != nil:
				t.Errorf("error %v", err)
			case c.code != 0 && (!errors.As(err, &se) || se.Code != c.code):
				t.Errorf("error %v, want HTTP %d", err, c.code)
			case c.code == 503 && se.Body != "busy":
				t.Errorf("excerpt %q", se.Body)
			}
			if h.n() != 1 { // a followed redirect is a second call
				t.Errorf("%d calls", h.n())
			}
		})
	}
}

// TestWebhookSenderLimits: the target policy judges the address dialled,
// and the timeout bounds a call.
func TestWebhookSenderLimits(t *testing.T) {
	t.Parallel()
	h := newHook(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	pol, err := policy.New(policy.Config{Deny: []string{"127.0.0.0/8"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewWebhookSender(nil, pol, 5*time.Second).Send(context.Background(), h.srv.URL, testBatch()); !errors.Is(err, policy.ErrDenied) {
		t.Fatalf("a denied address: %v", err)
	}
	if h.n() != 0 {
		t.Fatal("a denied address was called")
	}
	_, err = NewWebhookSender(nil, nil, 50*time.Millisecond).Send(context.Background(), h.srv.URL, testBatch())
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a receiver that never answers: %v", err)
	}
}

// TestMQSender publishes batches to a real Redis stream: one entry per
// batch with the batch's JSON as payload and the task headers, its ID
// the same when the same batch is sent again and another for other keys.
func TestMQSender(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pub, err := redisstream.New(broker.Options{Name: "r", URL: testdb.RedisURL(), Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pub.Stop)
	set, err := broker.NewSet(map[string]broker.Publisher{"r": pub}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	opt, err := redis.ParseURL(testdb.RedisURL())
	if err != nil {
		t.Fatal(err)
	}
	rc := redis.NewClient(opt)
	t.Cleanup(func() { rc.Close() })
	stream := testdb.Unique("ontime_t_jobs_")
	t.Cleanup(func() { rc.Del(context.Background(), stream) })

	m := MQSender{Brokers: set}
	target := "mq://r/" + stream
	if err := m.Check(target); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"mq://nope/x", "http://x/", "mq://r"} {
		if err := m.Check(bad); err == nil {
			t.Errorf("Check(%q) passed", bad)
		}
	}
	other := testBatch()
	other.Keys = []any{int64(1), "b-3"}
	for _, b := range []*Batch{testBatch(), testBatch(), other} {
		if failed, err := m.Send(ctx, target, b); err != nil || failed != nil {
			t.Fatalf("Send: %v %v", failed, err)
		}
	}
	if _, err := m.Send(ctx, "mq://nope/x", testBatch()); err == nil {
		t.Fatal("sent to a broker that is not configured")
	}

	msgs, err := rc.XRange(ctx, stream, "-", "+").Result()
	if err != nil || len(msgs) != 3 {
		t.Fatalf("stream holds %d entries: %v", len(msgs), err)
	}
	want := testBatch()
	want.ID = batchID(want) // the body carries the batch ID, as the message ID does
	body, _ := json.Marshal(want)
	ids := make([]string, 3)
	for i, e := range msgs {
		v := e.Values
		ids[i], _ = v[broker.HeaderTaskID].(string)
		if i < 2 && v[redisstream.FieldPayload] != string(body) {
			t.Errorf("entry %d payload %v", i, v[redisstream.FieldPayload])
		}
		due, _ := v[broker.HeaderDueAt].(string)
		if _, err := time.Parse(time.RFC3339Nano, due); err != nil || v[broker.HeaderTopic] != "job:bill" ||
			v[broker.HeaderKey] != "0.1.0" || v[broker.HeaderAttempt] != "1" {
			t.Errorf("entry %d headers %v", i, v)
		}
	}
	if ids[0] != ids[1] || ids[0] == ids[2] || !strings.HasPrefix(ids[0], "job-") || !strings.HasSuffix(ids[0], "-2") {
		t.Fatalf("batch IDs %v", ids)
	}
}
