package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/internal/testdb"
	"github.com/ontimehq/ontime/outbox"
)

// TestOutboxFailingHoldsBackItsKey: on each engine, the first message of
// the key "stuck" goes to a destination that always fails; its key's two
// later messages wait, the other keys' are delivered. Where a user looks
// it says so: the failing task's GET /v1/tasks/{id} (outbox.holds_back 2,
// its key and message), its console page, GET /v1/outboxes (held_sample
// names the task) and ontime_outbox_held_keys. Cancelling the task lets
// the key go on: its later messages are delivered, in order.
func TestOutboxFailingHoldsBackItsKey(t *testing.T) {
	t.Parallel()
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			app := newOutboxApp(t, engine)
			rcv := newReceiver(t)
			failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, "coupon service down", http.StatusServiceUnavailable)
			}))
			defer failing.Close()
			cfg := ontime.DefaultConfig()
			cfg.DataDir = t.TempDir()
			cfg.Outboxes = []ontime.OutboxConfig{outboxConfig(engine, app.dsn)}
			node := outboxNode(t, cfg)
			api := httptest.NewServer(node.HTTPHandler())
			defer api.Close()
			ctx := context.Background()
			put := func(key string, seq int, target string) {
				t.Helper()
				p, _ := json.Marshal(seqMsg{K: key, Seq: seq})
				if err := app.register(ctx, key, outbox.Message{Topic: "user.registered", Key: key, Payload: p, Target: target}, true); err != nil {
					t.Fatal(err)
				}
			}
			put("stuck", 0, failing.URL)
			put("stuck", 1, rcv.srv.URL)
			put("stuck", 2, rcv.srv.URL)
			const keys = 3
			for k := range keys {
				put(fmt.Sprintf("acct-%d", k), 0, rcv.srv.URL)
			}
			waitFor(t, 4*time.Minute, "the other keys delivered", func() bool { return len(rcv.delivered()) >= keys })

			// GET /v1/outboxes names the failing message's task.
			var taskID string
			waitFor(t, 2*time.Minute, "the failing message in held_sample with its task", func() bool {
				l, err := node.Outboxes(ctx)
				if err != nil || len(l.Outboxes) != 1 || len(l.Outboxes[0].Tables) != 1 {
					t.Fatalf("outboxes: %v %+v", err, l)
				}
				tv := l.Outboxes[0].Tables[0]
				if tv.HeldKeys != 1 || len(tv.HeldSample) != 1 || tv.HeldSample[0].TaskID == "" {
					return false
				}
				if s := tv.HeldSample[0]; s.Key != "stuck" || s.Error == "" {
					t.Fatalf("held sample %+v", s)
				}
				taskID = tv.HeldSample[0].TaskID
				return true
			})
			// The task view says what it holds back.
			var v apiv1.Task
			if code := getJSON(t, api.URL+"/v1/tasks/"+taskID, &v); code != http.StatusOK {
				t.Fatalf("GET /v1/tasks/%s: %d", taskID, code)
			}
			if v.Outbox == nil || v.Outbox.Outbox != "main" || v.Outbox.Key != "stuck" || v.Outbox.HoldsBack != 2 ||
				v.Outbox.MessageID != 1 || v.Outbox.Table != "outbox" || v.Outbox.Database != 0 {
				t.Fatalf("task %s: outbox %+v, want message 1 of main's outbox holding back 2 of key stuck", taskID, v.Outbox)
			}
			// So does its console page.
			resp, err := http.Get(api.URL + "/ui/tasks/" + taskID)
			if err != nil {
				t.Fatal(err)
			}
			page, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), "2 later messages of key") ||
				!strings.Contains(string(page), "message 1") {
				t.Fatalf("console task page: %d, no holds-back line: %.2000s", resp.StatusCode, page)
			}
			// And the metric (refreshed every 5 s).
			held := `ontime_outbox_held_keys{outbox="main"}`
			waitFor(t, time.Minute, held+" = 1", func() bool { return counter(t, api.URL, held) == 1 })
			for _, c := range rcv.allCalls() {
				if strings.Contains(string(c.RawBody), `"stuck"`) {
					t.Fatalf("a later message of the held key was delivered: %s", c.RawBody)
				}
			}
			// A task that is not an outbox message's has no outbox part,
			// even with a key of the same shape.
			forged, _, err := node.Submit(ctx, ontime.TaskSpec{Topic: "user.forged", Key: "stuck#main/0.0/1",
				DueAt: time.Now().Add(time.Hour), Payload: json.RawMessage(`{}`), Target: rcv.srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			var fv apiv1.Task
			if code := getJSON(t, api.URL+"/v1/tasks/"+forged.ID, &fv); code != http.StatusOK || fv.Outbox != nil {
				t.Fatalf("task %s with an outbox-shaped key: %d, outbox %+v", forged.ID, code, fv.Outbox)
			}

			// Cancelled, the head lets its key go on, in order.
			waitFor(t, 30*time.Second, "the failing task cancelled (not mid-attempt)", func() bool {
				return callJSON(t, http.MethodDelete, api.URL+"/v1/tasks/"+taskID, nil) == http.StatusOK
			})
			waitFor(t, 2*time.Minute, "the held key's later messages delivered", func() bool { return len(rcv.delivered()) >= keys+2 })
			var seqs []int
			for _, c := range rcv.allCalls() {
				raw, _ := json.Marshal(c.Body["payload"])
				var m seqMsg
				if json.Unmarshal(raw, &m) == nil && m.K == "stuck" {
					seqs = append(seqs, m.Seq)
				}
			}
			if len(seqs) < 2 || seqs[0] != 1 || seqs[1] != 2 {
				t.Fatalf("key stuck delivered %v, want 1 then 2", seqs)
			}
			waitFor(t, time.Minute, held+" = 0", func() bool { return counter(t, api.URL, held) == 0 })
		})
	}
}
