// Package e2e tests ontime end to end: real HTTP API, real webhook
// receivers, real databases, and real `ontime serve` processes that are
// stopped and killed.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/client"
	"github.com/ontimehq/ontime/internal/testdb"
)

// apiClient is the Go client in a test: the helpers fail the test when a
// call that must succeed does not.
type apiClient struct {
	t *testing.T
	*client.Client
}

func newAPIClient(t *testing.T, base string) apiClient {
	t.Helper()
	c, err := client.New(base)
	if err != nil {
		t.Fatal(err)
	}
	return apiClient{t: t, Client: c}
}

func (c apiClient) submit(r apiv1.TaskRequest) *apiv1.Task {
	c.t.Helper()
	v, _, err := c.Submit(c.t.Context(), r)
	if err != nil {
		c.t.Fatalf("submit: %v", err)
	}
	return v
}

func (c apiClient) get(id string) *apiv1.Task {
	c.t.Helper()
	v, err := c.Get(c.t.Context(), id)
	if err != nil {
		c.t.Fatalf("get %s: %v", id, err)
	}
	return v
}

// payload is v as a task's JSON payload.
func payload(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// startNode runs an in-process node on engine with its API on a real
// socket; mod adjusts the config.
func startNode(t *testing.T, engine string, mod func(*ontime.Config)) (apiClient, *ontime.Node) {
	t.Helper()
	cfg := nodeConfig(t, engine)
	if mod != nil {
		mod(&cfg)
	}
	url, node := runNode(t, cfg)
	return newAPIClient(t, url), node
}

// nodeConfig is startNode's config of a node on engine.
func nodeConfig(t *testing.T, engine string) ontime.Config {
	t.Helper()
	cfg := ontime.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Store.Driver = engine
	cfg.Store.Tables = 4
	cfg.Store.Segments = 2
	if engine != "sqlite" {
		cfg.Store.Databases = testdb.DSNs(t, engine, 2)
	}
	cfg.Hot.Window = ontime.Duration(time.Second)
	cfg.Delivery.LeaseTTL = ontime.Duration(2 * time.Second)
	cfg.Delivery.RetryBase = ontime.Duration(20 * time.Millisecond)
	cfg.Delivery.RetryMax = ontime.Duration(100 * time.Millisecond)
	cfg.Delivery.WebhookSecret = "s3cret"
	return cfg
}

// runNode starts an in-process node on cfg with its API on a real socket,
// stopped at the test's end, and returns the API's base URL.
func runNode(t *testing.T, cfg ontime.Config) (string, *ontime.Node) {
	t.Helper()
	ctx := context.Background()
	node, err := ontime.NewNode(ctx, cfg)
	if err != nil {
		t.Fatalf("NewNode: %v", err)
	}
	if err := node.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	srv := httptest.NewServer(node.HTTPHandler())
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := node.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return srv.URL, node
}

// TestDeliveredOnTimeNeverEarly submits tasks due from now to a few seconds
// ahead — some within the preheat window (claimed at submit), most beyond it
// (found by the scanner) — and checks every webhook call: delivered once,
// never before its due time, body, headers and signature as specified.
func TestDeliveredOnTimeNeverEarly(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			rcv := newReceiver(t)
			c, _ := startNode(t, engine, nil)
			const n = 120
			want := map[string]*apiv1.Task{}
			for i := range n {
				delay := time.Duration(i%40) * 75 * time.Millisecond // 0 .. 2.9 s
				v := c.submit(apiv1.TaskRequest{
					Topic: "e2e.ontime", Key: fmt.Sprintf("k-%d", i), Delay: delay.String(),
					Payload: payload(t, map[string]any{"i": i}), Target: rcv.srv.URL + "/hook",
				})
				want[v.ID] = v
			}
			waitFor(t, 60*time.Second, "all tasks delivered", func() bool { return len(rcv.delivered()) == n })
			for _, cl := range rcv.allCalls() {
				v, ok := want[cl.ID]
				if !ok {
					t.Fatalf("delivery of unknown task %q", cl.ID)
				}
				if cl.At.Before(v.DueAt) {
					t.Errorf("task %s delivered %s early", cl.ID, v.DueAt.Sub(cl.At))
				}
				if cl.HeaderID != cl.ID || cl.Header.Get("Ontime-Attempt") != "1" || cl.Attempt != 1 {
					t.Errorf("headers/attempt: id %q attempt %q body attempt %d", cl.HeaderID, cl.Header.Get("Ontime-Attempt"), cl.Attempt)
				}
				if cl.Header.Get("Content-Type") != "application/json" {
					t.Errorf("content type %q", cl.Header.Get("Content-Type"))
				}
				if err := ontime.VerifySignature(cl.Header.Get("Ontime-Signature"), rcv.srv.URL+"/hook", cl.RawBody, time.Now(), time.Minute, "s3cret"); err != nil {
					t.Errorf("signature: %v", err)
				}
				if cl.Body["topic"] != "e2e.ontime" || cl.Body["key"] != v.Key || !cl.DueAt.Equal(v.DueAt) {
					t.Errorf("body %v does not match task %+v", cl.Body, v)
				}
				if p, _ := json.Marshal(cl.Body["payload"]); !bytes.Equal(p, v.Payload) {
					t.Errorf("payload %s, want %s", p, v.Payload)
				}
			}
			for id, cnt := range rcv.delivered() {
				if cnt != 1 {
					t.Errorf("task %s delivered %d times", id, cnt)
				}
			}
			// Outcomes are written in batches; they land shortly after.
			for id := range want {
				waitFor(t, 10*time.Second, "status done", func() bool { return c.get(id).Status == "done" })
			}
		})
	}
}

func TestRetryDeadAndRequeue(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t)
	var fail sync.Map
	rcv.status = func(cl call) int {
		if _, ok := fail.Load("on"); ok {
			return 500
		}
		return 200
	}
	fail.Store("on", true)
	c, _ := startNode(t, "sqlite", nil)
	v := c.submit(apiv1.TaskRequest{Topic: "e2e.retry", Target: rcv.srv.URL, MaxAttempts: 3})
	waitFor(t, 30*time.Second, "task dead", func() bool { return c.get(v.ID).Status == "dead" })
	got := c.get(v.ID)
	if got.Attempts != 3 || !strings.Contains(got.LastError, "500") {
		t.Fatalf("dead task: attempts %d last_error %q; want 3 and the 500", got.Attempts, got.LastError)
	}
	calls := rcv.allCalls()
	if len(calls) != 3 {
		t.Fatalf("receiver saw %d calls, want 3", len(calls))
	}
	for i, cl := range calls {
		if cl.Attempt != i+1 {
			t.Errorf("call %d carried attempt %d", i, cl.Attempt)
		}
	}
	// Cancel of a dead task is a conflict; requeue brings it back.
	if _, err := c.Cancel(t.Context(), v.ID); !client.HasCode(err, apiv1.CodeConflict) {
		t.Fatalf("cancel dead: %v, want a conflict", err)
	}
	fail.Delete("on")
	if _, err := c.Requeue(t.Context(), v.ID); err != nil {
		t.Fatalf("requeue: %v", err)
	}
	waitFor(t, 30*time.Second, "requeued task done", func() bool { return c.get(v.ID).Status == "done" })
}

// TestHangingDestinationDoesNotBlockOthers: one endpoint never answers; the
// tasks of another endpoint are all delivered meanwhile.
func TestHangingDestinationDoesNotBlockOthers(t *testing.T) {
	t.Parallel()
	slow, fast := newReceiver(t), newReceiver(t)
	slow.gate = make(chan struct{})
	c, _ := startNode(t, "sqlite", func(cfg *ontime.Config) {
		cfg.Delivery.Concurrency = 4
		cfg.Delivery.Timeout = ontime.Duration(time.Minute)
	})
	for i := range 40 {
		c.submit(apiv1.TaskRequest{Topic: "e2e.slow", Key: fmt.Sprint(i), Target: slow.srv.URL})
	}
	var fastIDs []string
	for i := range 40 {
		fastIDs = append(fastIDs, c.submit(apiv1.TaskRequest{Topic: "e2e.fast", Key: fmt.Sprint(i), Target: fast.srv.URL}).ID)
	}
	waitFor(t, 30*time.Second, "fast endpoint served while slow hangs", func() bool { return len(fast.delivered()) == 40 })
	got := fast.delivered()
	for _, id := range fastIDs {
		if got[id] == 0 {
			t.Fatalf("fast task %s not delivered", id)
		}
	}
	if n := len(slow.delivered()); n != 0 {
		t.Fatalf("slow endpoint answered %d calls while gated", n)
	}
	close(slow.gate)
	waitFor(t, 60*time.Second, "slow endpoint catches up", func() bool { return len(slow.delivered()) == 40 })
}

func TestCancelAndIdempotentResubmit(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t)
	// A window of seconds so a task within it is claimed well before it is
	// due, however slow the machine: the cancels below must find far pending
	// and near claimed, not delivered.
	c, _ := startNode(t, "sqlite", func(cfg *ontime.Config) { cfg.Hot.Window = ontime.Duration(5 * time.Second) })
	// Cancel before due, both beyond the window (pending) and within it (claimed).
	far := c.submit(apiv1.TaskRequest{Topic: "e2e.cancel", Key: "far", Delay: "8s", Target: rcv.srv.URL})
	if _, err := c.Cancel(t.Context(), far.ID); err != nil {
		t.Fatalf("cancel pending: %v", err)
	}
	near := c.submit(apiv1.TaskRequest{Topic: "e2e.cancel", Key: "near", Delay: "4s", Target: rcv.srv.URL})
	waitFor(t, 30*time.Second, "near claimed", func() bool { return c.get(near.ID).Status != "pending" })
	if _, err := c.Cancel(t.Context(), near.ID); err != nil {
		t.Fatalf("cancel claimed: %v", err)
	}
	// Resubmit of the same topic+key returns the existing task with 200.
	again, created, err := c.Submit(t.Context(), apiv1.TaskRequest{Topic: "e2e.cancel", Key: "far", Delay: "10s", Target: rcv.srv.URL})
	if err != nil || created || again.ID != far.ID || again.Status != "cancelled" {
		t.Fatalf("resubmit: %v created %v task %+v, want the cancelled %s", err, created, again, far.ID)
	}
	done := c.submit(apiv1.TaskRequest{Topic: "e2e.cancel", Key: "done", Target: rcv.srv.URL})
	waitFor(t, 30*time.Second, "task done", func() bool { return c.get(done.ID).Status == "done" })
	if _, err := c.Cancel(t.Context(), done.ID); !client.HasCode(err, apiv1.CodeConflict) {
		t.Fatalf("cancel after delivery: %v, want a conflict", err)
	}
	time.Sleep(time.Until(far.DueAt) + time.Second) // past both cancelled tasks' due times
	if d := rcv.delivered(); d[far.ID]+d[near.ID] != 0 {
		t.Fatalf("cancelled tasks were delivered: %v", d)
	}
	if _, err := c.Get(t.Context(), strings.Repeat("0", 26)); !client.HasCode(err, apiv1.CodeNotFound) {
		t.Fatalf("unknown id: %v, want not found", err)
	}
	if _, err := c.Get(t.Context(), "not-an-id"); !client.HasCode(err, apiv1.CodeInvalid) {
		t.Fatalf("malformed id: %v, want invalid", err)
	}
}

func TestGoHandlerAndBadInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := ontime.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Delivery.RetryBase = ontime.Duration(10 * time.Millisecond)
	cfg.Delivery.RetryMax = ontime.Duration(10 * time.Millisecond)
	node, err := ontime.NewNode(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *ontime.Delivery, 10)
	if err := node.Handle("e2e.go", func(ctx context.Context, d *ontime.Delivery) error {
		if d.Attempt == 1 {
			return errors.New("first attempt fails on purpose")
		}
		got <- d
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer node.Stop(ctx)
	tk, created, err := node.Submit(ctx, ontime.TaskSpec{Topic: "e2e.go", Key: "x", Delay: 100 * time.Millisecond, Payload: json.RawMessage(`{"a":1}`)})
	if err != nil || !created {
		t.Fatalf("submit: %v created=%v", err, created)
	}
	select {
	case d := <-got:
		if d.ID != tk.ID || d.Attempt != 2 || string(d.Payload) != `{"a":1}` || time.Now().Before(tk.DueAt) {
			t.Fatalf("delivery %+v for task %+v", d, tk)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("handler never succeeded")
	}
	for _, bad := range []struct {
		spec  ontime.TaskSpec
		field string
	}{
		{ontime.TaskSpec{}, "topic"},
		{ontime.TaskSpec{Topic: "a b"}, "topic"},
		{ontime.TaskSpec{Topic: "t", Key: strings.Repeat("k", 256)}, "key"},
		{ontime.TaskSpec{Topic: "t", Payload: json.RawMessage(`{`)}, "payload"},
		{ontime.TaskSpec{Topic: "t", Target: "ftp://x"}, "target"},
		{ontime.TaskSpec{Topic: "t", MaxAttempts: -1}, "max_attempts"},
		{ontime.TaskSpec{Topic: "t", Delay: -time.Second}, "delay"},
		{ontime.TaskSpec{Topic: "t", Delay: time.Second, DueAt: time.Now()}, "due_at"},
	} {
		_, _, err := node.Submit(ctx, bad.spec)
		var fe *ontime.FieldError
		if !errors.As(err, &fe) || fe.Field != bad.field || !errors.Is(err, ontime.ErrInvalid) {
			t.Errorf("spec %+v: err %v, want a FieldError on %q", bad.spec, err, bad.field)
		}
	}
}

// TestRedisTierLosesNothing: a node on PostgreSQL with the Redis tier; Redis
// is flushed, then killed and restarted empty, while tasks wait in it. The
// store is the truth: every task is delivered, none early.
func TestRedisTierLosesNothing(t *testing.T) {
	t.Parallel()
	r := testdb.StartRedis(t)
	rcv := newReceiver(t)
	c, node := startNode(t, "postgres", func(cfg *ontime.Config) {
		cfg.Hot.Tier = "redis"
		cfg.Hot.RedisAddrs = []string{r.Addr()}
		cfg.Delivery.LeaseTTL = ontime.Duration(time.Second)
	})
	const n = 150
	due := map[string]time.Time{}
	for i := range n {
		delay := time.Duration(i%50) * 60 * time.Millisecond // 0 .. 3 s
		v := c.submit(apiv1.TaskRequest{Topic: "e2e.redis", Key: fmt.Sprint(i), Delay: delay.String(), Target: rcv.srv.URL})
		due[v.ID] = v.DueAt
	}
	waitFor(t, 30*time.Second, "first deliveries", func() bool { return len(rcv.delivered()) >= 10 })
	admin := redisClient(r.Addr())
	if err := admin.FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	admin.Close()
	time.Sleep(500 * time.Millisecond)
	r.Stop()
	time.Sleep(300 * time.Millisecond)
	r.Start()
	waitFor(t, 90*time.Second, "every task delivered", func() bool { return len(rcv.delivered()) == n })
	var maxLate time.Duration
	for _, cl := range rcv.allCalls() {
		if cl.At.Before(due[cl.ID]) {
			t.Fatalf("task %s delivered early", cl.ID)
		}
		maxLate = max(maxLate, cl.At.Sub(due[cl.ID]))
	}
	// The node noticed the loss (epoch key) and claimed its tasks again at
	// once instead of waiting for their leases.
	srv := httptest.NewServer(node.HTTPHandler())
	defer srv.Close()
	ended := counter(t, srv.URL, `ontime_leases_ended_total{reason="tier_lost"}`)
	t.Logf("Redis flushed and restarted: %v claims taken again, max lateness %s", ended, maxLate.Round(time.Millisecond))
	if ended == 0 {
		t.Fatal("the lost entries were not claimed again: they waited for their leases")
	}
}
