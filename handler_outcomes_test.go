package ontime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontimehq/ontime"
)

// waitUntil polls cond for up to 30 s (a loaded 2-core machine under -race).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("not within 30s: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// fastNode is a started SQLite node whose retries and scans are quick;
// mod adjusts the config, handlers are registered by register before Start.
func fastNode(t *testing.T, mod func(*ontime.Config), register func(*ontime.Node), opts ...ontime.NodeOption) *ontime.Node {
	t.Helper()
	cfg := ontime.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Store.Tables = 2
	cfg.Hot.Window = ontime.Duration(time.Second)
	cfg.Delivery.RetryBase = ontime.Duration(50 * time.Millisecond)
	cfg.Delivery.RetryMax = ontime.Duration(200 * time.Millisecond)
	if mod != nil {
		mod(&cfg)
	}
	ctx := context.Background()
	node, err := ontime.NewNode(ctx, cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if register != nil {
		register(node)
	}
	if err := node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Stop(context.Background()) })
	return node
}

func statusIs(t *testing.T, node *ontime.Node, id, status string) *ontime.Task {
	t.Helper()
	var got *ontime.Task
	waitUntil(t, "task "+id+" "+status, func() bool {
		tk, err := node.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		got = tk
		return tk.Status == status
	})
	return got
}

// Snooze delivers again later without using an attempt (a task with one
// attempt snoozed twice is still delivered); Cancel stops the task for
// good, status cancelled, with the handler's reason.
func TestHandlerSnoozeAndCancel(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	attempts := map[string][]int{}
	node := fastNode(t, nil, func(n *ontime.Node) {
		must(t, n.Handle("h.snooze", func(ctx context.Context, d *ontime.Delivery) error {
			mu.Lock()
			attempts[d.ID] = append(attempts[d.ID], d.Attempt)
			calls := len(attempts[d.ID])
			mu.Unlock()
			if calls <= 2 {
				return ontime.Snooze(100 * time.Millisecond)
			}
			return nil
		}))
		must(t, n.Handle("h.cancel", func(ctx context.Context, d *ontime.Delivery) error {
			mu.Lock()
			attempts[d.ID] = append(attempts[d.ID], d.Attempt)
			mu.Unlock()
			return ontime.Cancel(errors.New("order paid meanwhile"))
		}))
	})
	ctx := context.Background()
	sn, _, err := node.Submit(ctx, ontime.TaskSpec{Topic: "h.snooze", MaxAttempts: 1})
	must(t, err)
	cn, _, err := node.Submit(ctx, ontime.TaskSpec{Topic: "h.cancel", MaxAttempts: 5})
	must(t, err)
	done := statusIs(t, node, sn.ID, "done")
	cancelled := statusIs(t, node, cn.ID, "cancelled")
	mu.Lock()
	defer mu.Unlock()
	if got := attempts[sn.ID]; len(got) != 3 || got[0] != 1 || got[1] != 1 || got[2] != 1 || done.Attempts != 1 {
		t.Fatalf("snoozed task: deliveries with attempts %v, stored attempts %d; want [1 1 1] and 1", got, done.Attempts)
	}
	if got := attempts[cn.ID]; len(got) != 1 || !strings.Contains(cancelled.LastError, "order paid meanwhile") {
		t.Fatalf("cancelled task: deliveries %v, last_error %q; want one delivery and the reason", got, cancelled.LastError)
	}
}

// A handler's context ends after the topic's HandlerTimeout: a handler
// that honours it returns a failure naming the timeout, and the task is
// retried. While a handler that ignores it still runs — one and a half
// running leases — nobody claims its task again (the node keeps the lease
// alive): one delivery at a time, and the late result counts.
func TestHandlerTimeoutAndTheLease(t *testing.T) {
	t.Parallel()
	var running, maxRunning, slowCalls, politeCalls atomic.Int32
	var deadlineIn atomic.Int64
	var logs lockedBuffer
	defer func() {
		if t.Failed() {
			t.Log(logs.String())
		}
	}()
	node := fastNode(t, func(c *ontime.Config) {
		c.Hot.MaxFireLead = 0
		// Running lease ≈ 10.2 s: the heartbeat that keeps it gets a
		// quarter of it (2.5 s) per write, enough on a loaded 2-core
		// machine under -race (a 1.2 s lease was not: its extensions timed out).
		c.Delivery.Timeout = ontime.Duration(200 * time.Millisecond)
		c.Delivery.LeaseTTL = ontime.Duration(10 * time.Second)
	}, func(n *ontime.Node) {
		if err := n.Handle("h.slow", func(context.Context, *ontime.Delivery) error { return nil }, ontime.HandlerTimeout(11*time.Second)); err == nil {
			t.Error("a handler timeout longer than the running lease was accepted")
		}
		must(t, n.Handle("h.polite", func(ctx context.Context, d *ontime.Delivery) error {
			if politeCalls.Add(1) > 1 {
				return nil
			}
			<-ctx.Done()
			return ctx.Err()
		}, ontime.HandlerTimeout(50*time.Millisecond)))
		must(t, n.Handle("h.slow", func(ctx context.Context, d *ontime.Delivery) error {
			slowCalls.Add(1)
			r := running.Add(1)
			defer running.Add(-1)
			for {
				m := maxRunning.Load()
				if r <= m || maxRunning.CompareAndSwap(m, r) {
					break
				}
			}
			if dl, ok := ctx.Deadline(); ok {
				deadlineIn.Store(int64(time.Until(dl)))
			}
			<-ctx.Done()                 // the timeout ends the context …
			time.Sleep(15 * time.Second) // … and the handler ignores it for 1.5 leases
			return nil
		}, ontime.HandlerTimeout(100*time.Millisecond)))
	}, ontime.WithLogger(ontime.NewLogger(&logs, "info")))
	polite, _, err := node.Submit(context.Background(), ontime.TaskSpec{Topic: "h.polite"})
	must(t, err)
	slow, _, err := node.Submit(context.Background(), ontime.TaskSpec{Topic: "h.slow"})
	must(t, err)
	done := statusIs(t, node, polite.ID, "done")
	if done.Attempts != 2 || !strings.Contains(done.LastError, `handler of topic "h.polite" timed out after 50ms`) {
		t.Fatalf("a handler that returned at its timeout: %d attempts, last_error %q", done.Attempts, done.LastError)
	}
	done = statusIs(t, node, slow.ID, "done")
	if slowCalls.Load() != 1 || maxRunning.Load() != 1 || done.Attempts != 1 {
		t.Fatalf("%d calls, at most %d at once, %d attempts; want the task delivered once", slowCalls.Load(), maxRunning.Load(), done.Attempts)
	}
	if d := time.Duration(deadlineIn.Load()); d <= 0 || d > 100*time.Millisecond {
		t.Fatalf("the handler's context ended %s after the call began; want within the 100ms timeout", d)
	}
}

// A task without a target is refused when no live node has a handler for
// its topic and the config gives it no default target (issue 25 item 1:
// before, it was accepted and retried into dead for hours): Submit's
// error is ErrNoHandler, an ErrInvalid on field "target"; a batch refuses
// such items one by one; a patch that removes a target is judged alike.
// A handler registered, or a default target, makes the same submit
// accepted, and the default target is stored on the task and delivered.
func TestSubmitWithoutTargetNeedsAHandler(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer rcv.Close()
	var got atomic.Int32
	node := fastNode(t, func(cfg *ontime.Config) {
		cfg.Topics = map[string]ontime.TopicConfig{"t.default": {Target: rcv.URL + "/default"}}
	}, func(n *ontime.Node) {
		must(t, n.Handle("t.handled", func(context.Context, *ontime.Delivery) error { got.Add(1); return nil }))
	})
	_, _, err := node.Submit(ctx, ontime.TaskSpec{Topic: "t.nobody", Delay: time.Minute})
	var fe *ontime.FieldError
	if !errors.Is(err, ontime.ErrNoHandler) || !errors.Is(err, ontime.ErrInvalid) || !errors.As(err, &fe) || fe.Field != "target" ||
		!strings.Contains(fe.Message, `"t.nobody"`) || !strings.Contains(fe.Message, "topics.t.nobody.target") {
		t.Fatalf("submit without a target nobody handles: %v; want ErrNoHandler on field target naming the topic", err)
	}
	res, err := node.SubmitBatch(ctx, []ontime.TaskSpec{
		{Topic: "t.nobody"}, {Topic: "t.handled"}, {Topic: "t.default"}, {Topic: "t.nobody", Target: rcv.URL + "/own"},
	})
	must(t, err)
	if !errors.Is(res[0].Err, ontime.ErrNoHandler) || res[1].Err != nil || res[2].Err != nil || res[3].Err != nil {
		t.Fatalf("batch answers: %v, %v, %v, %v; want only the first refused", res[0].Err, res[1].Err, res[2].Err, res[3].Err)
	}
	if res[1].Task.Target != "" || res[2].Task.Target != rcv.URL+"/default" || res[3].Task.Target != rcv.URL+"/own" {
		t.Fatalf("targets stored: %q, %q, %q", res[1].Task.Target, res[2].Task.Target, res[3].Task.Target)
	}
	statusIs(t, node, res[1].Task.ID, "done")
	statusIs(t, node, res[2].Task.ID, "done") // delivered to the default target
	if got.Load() != 1 {
		t.Fatalf("the handler ran %d times, want 1", got.Load())
	}
	// A patch removing the target of a task nobody could then deliver is
	// refused; one whose topic has a default target takes it.
	none := ""
	_, err = node.Update(ctx, res[3].Task.ID, ontime.TaskPatch{Target: &none})
	if !errors.Is(err, ontime.ErrNoHandler) {
		t.Fatalf("patch target \"\" of a topic nobody handles: %v, want ErrNoHandler", err)
	}
	later, _, err := node.Submit(ctx, ontime.TaskSpec{Topic: "t.default", Delay: time.Hour, Target: rcv.URL + "/own"})
	must(t, err)
	up, err := node.Update(ctx, later.ID, ontime.TaskPatch{Target: &none})
	if err != nil || up.Target != rcv.URL+"/default" {
		t.Fatalf("patch target \"\" of a topic with a default target: %+v %v", up, err)
	}
}

// A task without a target that no live node can deliver when it comes due
// (here a schedule's, accepted without a handler: AwaitHandler) is not
// retried into dead: it waits unattempted, its last_error says why, the
// metric counts it, a WARN line names its topic; once a handler is
// registered it is delivered, on its first attempt.
func TestNoHandlerTaskWaitsUnattempted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var logs lockedBuffer
	node := fastNode(t, nil, nil, ontime.WithLogger(ontime.NewLogger(&logs, "warn")))
	_, err := node.CreateSchedule(ctx, ontime.Schedule{Name: "nobody", Cron: "0 0 1 1 *", Task: ontime.ScheduleTask{Topic: "h.nobody", MaxAttempts: 2}})
	must(t, err)
	tk, err := node.TriggerSchedule(ctx, "nobody")
	must(t, err)
	srv := httptest.NewServer(node.HTTPHandler())
	defer srv.Close()
	waitUntil(t, "three unattempted tries", func() bool {
		return metricValue(t, srv.URL, `ontime_tasks_unhandled_total{topic="h.nobody"}`) >= 3
	})
	var cur *ontime.Task
	waitUntil(t, "the task between two tries", func() bool {
		var err error
		cur, err = node.Get(ctx, tk.ID)
		must(t, err)
		return cur.Status != "running" // while running, its attempt is counted until the outcome takes it back
	})
	if cur.Status == "dead" || cur.Status == "done" || cur.Attempts != 0 || !strings.Contains(cur.LastError, `no live node handles topic "h.nobody"`) {
		t.Fatalf("a task nobody handles: status %s, attempts %d, last_error %q; want it waiting, unattempted, saying why", cur.Status, cur.Attempts, cur.LastError)
	}
	var found map[string]any
	for _, line := range strings.Split(logs.String(), "\n") {
		var r map[string]any
		if json.Unmarshal([]byte(line), &r) == nil && r["topic"] == "h.nobody" && r["level"] == "WARN" {
			found = r
		}
	}
	if found == nil || !strings.Contains(found["msg"].(string), "no live node handles their topic") {
		t.Fatalf("no WARN line names the unhandled topic:\n%s", logs.String())
	}
	var calls atomic.Int32
	must(t, node.Handle("h.nobody", func(context.Context, *ontime.Delivery) error { calls.Add(1); return nil }))
	done := statusIs(t, node, tk.ID, "done")
	if done.Attempts != 1 || calls.Load() != 1 {
		t.Fatalf("delivered after %d attempts, %d calls; want its first attempt", done.Attempts, calls.Load())
	}
}

// metricValue reads one series of a node's /metrics (0 when absent).
func metricValue(t *testing.T, base, series string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f
		}
	}
	return 0
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
