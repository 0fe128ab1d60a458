package ontime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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

// A task whose topic has no handler (and no target) uses an attempt each
// time it fires, ends dead after max_attempts instead of circling for
// ever, and its death is logged at WARN with its ID, topic and last error.
func TestNoHandlerEndsDeadWithWarn(t *testing.T) {
	t.Parallel()
	var logs lockedBuffer
	node := fastNode(t, nil, nil, ontime.WithLogger(ontime.NewLogger(&logs, "warn")))
	tk, _, err := node.Submit(context.Background(), ontime.TaskSpec{Topic: "h.nobody", MaxAttempts: 2})
	must(t, err)
	dead := statusIs(t, node, tk.ID, "dead")
	if dead.Attempts != 2 || !strings.Contains(dead.LastError, "no handler registered") {
		t.Fatalf("dead task: attempts %d, last_error %q", dead.Attempts, dead.LastError)
	}
	var found map[string]any
	waitUntil(t, "the WARN line", func() bool {
		for _, line := range strings.Split(logs.String(), "\n") {
			var r map[string]any
			if json.Unmarshal([]byte(line), &r) == nil && r["msg"] == "task dead" && r["id"] == tk.ID {
				found = r
				return true
			}
		}
		return false
	})
	if found["level"] != "WARN" || found["topic"] != "h.nobody" || !strings.Contains(found["err"].(string), "no handler registered") {
		t.Fatalf("task-dead line: %v", found)
	}
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
