package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/client"
	"github.com/ontimehq/ontime/internal/testdb"
)

// TestServeTargetRequired: `ontime serve` runs no Go handler, so README's
// own example, a task without a target, is refused with 400 naming
// "target" (issue 25 item 1: it was accepted and retried for hours), alone
// and as a batch item; a topic given a default target in the config
// accepts it, shows the target on the task, and delivers it there.
func TestServeTargetRequired(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rcv := newReceiver(t)
	path := writeConfig(t, dir)
	extra := fmt.Sprintf("topics:\n  e2e.default:\n    target: %s/default\n", rcv.srv.URL)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(extra); err != nil {
		t.Fatal(err)
	}
	f.Close()
	addr := freeAddr(t)
	startServe(t, path, addr)
	c := newAPIClient(t, "http://"+addr)

	_, _, err = c.Submit(t.Context(), apiv1.TaskRequest{Topic: "t", Delay: "1m"})
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != 400 || ae.Code != apiv1.CodeInvalid || ae.Field != "target" ||
		!strings.Contains(ae.Message, `no live node has a Go handler for topic "t"`) {
		t.Fatalf("submit without a target to ontime serve: %v; want 400 on field target saying why", err)
	}
	items, err := c.SubmitBatch(t.Context(), []apiv1.TaskRequest{{Topic: "t", Delay: "1m"}, {Topic: "e2e.default"}})
	if err != nil || len(items) != 2 {
		t.Fatalf("batch: %v %+v", err, items)
	}
	if items[0].Error == nil || items[0].Error.Field != "target" || items[0].Error.Code != apiv1.CodeInvalid {
		t.Fatalf("batch item without a target: %+v", items[0])
	}
	if items[1].Task == nil || items[1].Task.Target != rcv.srv.URL+"/default" {
		t.Fatalf("batch item of a topic with a default target: %+v", items[1])
	}
	id := items[1].Task.ID
	waitFor(t, 30*time.Second, "the default target's delivery", func() bool { return rcv.delivered()[id] == 1 && c.get(id).Status == "done" })
	if v := c.get(id); v.Target != rcv.srv.URL+"/default" || v.Attempts != 1 {
		t.Fatalf("delivered task: %+v", v)
	}
}

// handlerNode is an in-process cluster node; with handles set it has a Go
// handler for that topic that records which node delivered what.
type handlerNode struct {
	id   string
	node *ontime.Node
	api  apiClient
	url  string
}

type deliveries struct {
	mu sync.Mutex
	by map[string][]string // task ID → nodes that delivered it
}

func (d *deliveries) add(id, node string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.by[id] = append(d.by[id], node)
}

func (d *deliveries) of(id string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.by[id]...)
}

func startHandlerNode(t *testing.T, engine string, dsns []string, id, handles string, got *deliveries) *handlerNode {
	t.Helper()
	cfg := ontime.DefaultConfig()
	cfg.NodeID = id
	cfg.DataDir = t.TempDir()
	cfg.Store.Driver = engine
	cfg.Store.Databases = dsns
	cfg.Store.Tables = 4
	cfg.Store.Segments = 2
	cfg.Hot.Window = ontime.Duration(time.Second)
	cfg.Cluster.Coordinator = "database"
	cfg.Cluster.LeaseTTL = ontime.Duration(time.Second)
	cfg.Delivery.LeaseTTL = ontime.Duration(2 * time.Second)
	// Quick retries: a task retried for want of a handler would use its
	// attempts up within a second.
	cfg.Delivery.RetryBase = ontime.Duration(20 * time.Millisecond)
	cfg.Delivery.RetryMax = ontime.Duration(100 * time.Millisecond)
	ctx := context.Background()
	node, err := ontime.NewNode(ctx, cfg)
	if err != nil {
		t.Fatalf("NewNode %s: %v", id, err)
	}
	if handles != "" {
		if err := node.Handle(handles, func(_ context.Context, d *ontime.Delivery) error { got.add(d.ID, id); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if err := node.Start(ctx); err != nil {
		t.Fatalf("Start %s: %v", id, err)
	}
	srv := httptest.NewServer(node.HTTPHandler())
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := node.Stop(ctx); err != nil {
			t.Errorf("Stop %s: %v", id, err)
		}
	})
	return &handlerNode{id: id, node: node, api: newAPIClient(t, srv.URL), url: srv.URL}
}

// TestClusterHandlerOnOneNode: two nodes, only B has the Go handler of
// the topic. A accepts tasks without a target (B's topics come with the
// membership) and B delivers them, those A fired included (A hands them
// off). Once B stops, A refuses such a submit; a task already accepted
// that comes due meanwhile is not retried into dead: it waits, unattempted,
// saying why, and a node with the handler that joins delivers it.
func TestClusterHandlerOnOneNode(t *testing.T) {
	for _, engine := range []string{"mysql", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			dsns := testdb.DSNs(t, engine, 1)
			got := &deliveries{by: map[string][]string{}}
			const topic = "e2e.only.b"
			a := startHandlerNode(t, engine, dsns, "a", "", got)
			b := startHandlerNode(t, engine, dsns, "b", topic, got)
			ctx := t.Context()

			// A learns of B's handler with B's first heartbeat.
			var first *ontime.Task
			waitFor(t, 30*time.Second, "a submit at A accepted", func() bool {
				tk, _, err := a.node.Submit(ctx, ontime.TaskSpec{Topic: topic, Key: "first", MaxAttempts: 2})
				if err != nil && !errors.Is(err, ontime.ErrNoHandler) {
					t.Fatal(err)
				}
				first = tk
				return err == nil
			})
			// The cluster view shows who handles what.
			view, err := a.api.Cluster(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, nv := range view.Nodes {
				if want := map[string]string{"a": "", "b": topic}[nv.ID]; strings.Join(nv.Topics, ",") != want {
					t.Fatalf("cluster view: node %s handles %v; want %q", nv.ID, nv.Topics, want)
				}
			}
			// Through A's API too, due now and over the next second: A fires
			// those of its items and of its own submits, and hands them to B.
			var ids []string
			for i := range 20 {
				v := a.api.submit(apiv1.TaskRequest{Topic: topic, Key: fmt.Sprint("k", i), Delay: fmt.Sprint(i*50, "ms"), MaxAttempts: 2})
				ids = append(ids, v.ID)
			}
			ids = append(ids, first.ID)
			for _, id := range ids {
				waitFor(t, 30*time.Second, "task "+id+" delivered by B", func() bool { return len(got.of(id)) > 0 })
				if by := got.of(id); by[0] != "b" {
					t.Fatalf("task %s delivered by %v; want B, the node with the handler", id, by)
				}
				waitFor(t, 30*time.Second, "task "+id+" done", func() bool { return a.api.get(id).Status == "done" })
				if v := a.api.get(id); v.Attempts != 1 {
					t.Fatalf("task %s: %d attempts; want 1 (a handoff uses none)", id, v.Attempts)
				}
			}
			if counter(t, a.url, `ontime_deliveries_total{outcome="handed_off"}`) == 0 {
				t.Fatal("A handed nothing off: the test did not cover a task A fired")
			}

			// Due after B has stopped.
			later, _, err := a.node.Submit(ctx, ontime.TaskSpec{Topic: topic, Key: "later", Delay: 2 * time.Second, MaxAttempts: 2})
			if err != nil {
				t.Fatal(err)
			}
			stopCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			if err := b.node.Stop(stopCtx); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 30*time.Second, "A refuses once B has left", func() bool {
				_, _, err := a.node.Submit(ctx, ontime.TaskSpec{Topic: topic, Key: "refused"})
				return errors.Is(err, ontime.ErrNoHandler)
			})
			// Tried well past its max_attempts (2), without using one.
			waitFor(t, 60*time.Second, "the task tried 4 times without a handler", func() bool {
				return counter(t, a.url, `ontime_tasks_unhandled_total{topic="`+topic+`"}`) >= 4
			})
			var v *apiv1.Task
			waitFor(t, 30*time.Second, "the task between two tries", func() bool {
				v = a.api.get(later.ID)
				return v.Status != "running" // while running, its attempt is counted until the outcome takes it back
			})
			if v.Status == "dead" || v.Status == "done" || v.Attempts != 0 || !strings.Contains(v.LastError, `no live node handles topic "`+topic+`"`) {
				t.Fatalf("a task whose handler left: status %s, attempts %d, last_error %q; want it waiting, unattempted, saying why", v.Status, v.Attempts, v.LastError)
			}
			// A node with the handler joins: it delivers the task.
			startHandlerNode(t, engine, dsns, "c", topic, got)
			waitFor(t, 60*time.Second, "the waiting task delivered by C", func() bool { return len(got.of(later.ID)) > 0 })
			if by := got.of(later.ID); by[0] != "c" {
				t.Fatalf("delivered by %v; want C", by)
			}
			waitFor(t, 30*time.Second, "the waiting task done", func() bool { return a.api.get(later.ID).Status == "done" })
			if v := a.api.get(later.ID); v.Attempts != 1 {
				t.Fatalf("the waiting task took %d attempts; want 1", v.Attempts)
			}
		})
	}
}
