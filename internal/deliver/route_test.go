package deliver_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/complete"
	"github.com/ontimehq/ontime/internal/deliver"
	"github.com/ontimehq/ontime/internal/stagetest"
	"github.com/ontimehq/ontime/internal/task"
)

const nodeID = "node-7"

// outcomes records every Finish; a second Finish of a task is an error.
type outcomes struct {
	t    *testing.T
	mu   sync.Mutex
	errs map[string]error
}

func (o *outcomes) Finish(tk *task.Task, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, dup := o.errs[tk.ID]; dup {
		o.t.Errorf("task %s: outcome reported twice (%v)", tk.ID, err)
	}
	o.errs[tk.ID] = err
}

func (o *outcomes) len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.errs)
}

func (o *outcomes) of(id string) (error, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	err, ok := o.errs[id]
	return err, ok
}

// wait waits until n tasks have their outcome.
func (o *outcomes) wait(t *testing.T, n int) {
	t.Helper()
	stagetest.Eventually(t, fmt.Sprintf("%d outcomes", n), func() bool { return o.len() >= n })
}

type fixture struct {
	disp *deliver.Dispatcher
	out  *outcomes
	r    *deliver.Router
}

// setup builds a router over a started dispatcher (concurrency 1 per lane)
// reporting to a recorder; webhook may be nil.
func setup(t *testing.T, webhook deliver.Sink) *fixture {
	t.Helper()
	t.Parallel()
	disp, err := deliver.NewDispatcher(deliver.DispatcherConfig{PerDestConcurrency: 1, ShutdownGrace: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := disp.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(disp.Stop)
	x := &fixture{disp: disp, out: &outcomes{t: t, errs: map[string]error{}}}
	x.r, err = deliver.NewRouter(deliver.RouterConfig{Dispatcher: disp, Webhook: webhook, Outcomes: x.out, NodeID: nodeID})
	if err != nil {
		t.Fatal(err)
	}
	return x
}

var seq struct {
	sync.Mutex
	n int
}

// due builds a started task of topic (target "" for its Go handler).
func due(topic, target string) *task.Task {
	seq.Lock()
	seq.n++
	n := seq.n
	seq.Unlock()
	return &task.Task{ID: fmt.Sprintf("task-%04d", n), Topic: topic, Key: fmt.Sprintf("key-%d", n), Target: target,
		Payload: []byte(fmt.Sprintf(`{"n":%d}`, n)), DueAt: time.Now().Add(-time.Millisecond).Truncate(time.Microsecond),
		Status: task.StatusRunning, Attempts: 1, MaxAttempts: 3, Token: int64(n)}
}

// recorder is a Go handler that records deliveries and answers err.
type recorder struct {
	mu  sync.Mutex
	got []deliver.Delivery
	err error
}

func (h *recorder) Deliver(_ context.Context, d deliver.Delivery) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.got = append(h.got, d)
	return h.err
}

func (h *recorder) deliveries() []deliver.Delivery {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]deliver.Delivery(nil), h.got...)
}

// A task without target goes to its topic's Go handler, whose answer is
// the task's outcome.
func TestHandlerByTopic(t *testing.T) {
	x := setup(t, nil)
	orders, audit := &recorder{}, &recorder{err: errors.New("audit down")}
	if err := x.r.Handle("orders", orders); err != nil {
		t.Fatal(err)
	}
	if err := x.r.Handle("audit", audit); err != nil {
		t.Fatal(err)
	}
	if err := x.r.Handle("bad topic", orders); err == nil {
		t.Fatal("Handle accepted an invalid topic")
	}
	if err := x.r.Handle("x", nil); err == nil {
		t.Fatal("Handle accepted a nil handler")
	}
	o, a := due("orders", ""), due("audit", "")
	o.Attempts = 2
	x.r.Send([]*task.Task{o, a})
	x.out.wait(t, 2)

	got := orders.deliveries()
	if len(got) != 1 {
		t.Fatalf("orders handler got %d deliveries; want 1", len(got))
	}
	d := got[0]
	if d.ID != o.ID || d.Topic != o.Topic || d.Key != o.Key || string(d.Payload) != string(o.Payload) || !d.DueAt.Equal(o.DueAt) || d.Attempt != 2 || d.Target != "" {
		t.Fatalf("delivery %+v does not carry task %+v", d, o)
	}
	if err, _ := x.out.of(o.ID); err != nil {
		t.Fatalf("outcome of a delivered task: %v", err)
	}
	if n := len(audit.deliveries()); n != 1 {
		t.Fatalf("audit handler got %d deliveries; want 1", n)
	}
	if err, _ := x.out.of(a.ID); err == nil || err.Error() != "audit down" {
		t.Fatalf("outcome of a failed delivery: %v; want the handler's error", err)
	}
}

// A task of a topic this node has no handler for fails with ErrNoHandler
// (not permanent: another node may have the handler), naming topic and
// node; Topics and Handles say what the node handles.
func TestNoHandlerForTopic(t *testing.T) {
	x := setup(t, nil)
	tk := due("unknown.topic", "")
	x.r.Send([]*task.Task{tk})
	x.out.wait(t, 1)
	err, _ := x.out.of(tk.ID)
	var nh *deliver.NoHandlerError
	if err == nil || deliver.IsPermanent(err) || !errors.Is(err, deliver.ErrNoHandler) || !errors.As(err, &nh) || nh.Topic != "unknown.topic" {
		t.Fatalf("outcome %v; want a NoHandlerError", err)
	}
	if err := x.r.Handle("audit", &recorder{}); err != nil {
		t.Fatal(err)
	}
	if x.r.Handles("unknown.topic") || !slices.Equal(x.r.Topics(), []string{"audit"}) || !x.r.Handles("audit") {
		t.Fatalf("Handles/Topics: %v", x.r.Topics())
	}
	if !strings.Contains(err.Error(), "unknown.topic") || !strings.Contains(err.Error(), nodeID) {
		t.Fatalf("outcome %q does not name the topic and the node", err)
	}
}

// A task with a target on a node without a webhook sink fails permanently.
func TestNoWebhookSinkIsPermanent(t *testing.T) {
	x := setup(t, nil)
	tk := due("hooks", "https://receiver.example/hook")
	x.r.Send([]*task.Task{tk})
	x.out.wait(t, 1)
	if err, _ := x.out.of(tk.ID); !deliver.IsPermanent(err) {
		t.Fatalf("outcome %v; want a permanent error", err)
	}
}

// webhook is a fake webhook sink: targets on host "hang.example" block
// until released, those with "/fail" fail, others succeed.
type webhook struct {
	release chan struct{}
	once    sync.Once
	mu      sync.Mutex
	hanging int
	got     map[string]int // deliveries per task ID
}

func newWebhook() *webhook { return &webhook{release: make(chan struct{}), got: map[string]int{}} }

func (w *webhook) Deliver(_ context.Context, d deliver.Delivery) error {
	w.mu.Lock()
	w.got[d.ID]++
	hang := strings.Contains(d.Target, "hang.example")
	if hang {
		w.hanging++
	}
	w.mu.Unlock()
	if hang {
		<-w.release
	}
	if strings.HasSuffix(d.Target, "/fail") {
		return errors.New("500")
	}
	return nil
}

// unblock releases the hanging deliveries.
func (w *webhook) unblock() { w.once.Do(func() { close(w.release) }) }

func (w *webhook) hangingNow() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.hanging
}

// Every task of a mixed batch gets exactly one outcome, of the right kind.
func TestEachOutcomeExactlyOnce(t *testing.T) {
	wh := newWebhook()
	x := setup(t, wh)
	if err := x.r.Handle("ok", deliver.HandlerFunc(func(context.Context, deliver.Delivery) error { return nil })); err != nil {
		t.Fatal(err)
	}
	if err := x.r.Handle("boom", deliver.HandlerFunc(func(context.Context, deliver.Delivery) error { panic("boom") })); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]func(error) bool{
		"ok":       func(err error) bool { return err == nil },
		"boom":     func(err error) bool { return err != nil && strings.Contains(err.Error(), "panicked") },
		"nobody":   func(err error) bool { return err != nil && !deliver.IsPermanent(err) },
		"hook-ok":  func(err error) bool { return err == nil },
		"hook-bad": func(err error) bool { return err != nil && err.Error() == "500" },
	}
	var tasks []*task.Task
	kindOf := map[string]string{}
	for i := range 40 {
		var tk *task.Task
		switch i % 5 {
		case 0:
			tk = due("ok", "")
			kindOf[tk.ID] = "ok"
		case 1:
			tk = due("boom", "")
			kindOf[tk.ID] = "boom"
		case 2:
			tk = due("nobody", "")
			kindOf[tk.ID] = "nobody"
		case 3:
			tk = due("hooks", fmt.Sprintf("http://a.example/%d", i))
			kindOf[tk.ID] = "hook-ok"
		case 4:
			tk = due("hooks", "http://b.example/fail")
			kindOf[tk.ID] = "hook-bad"
		}
		tasks = append(tasks, tk)
	}
	// In two Sends, as the firer releases tasks due at different instants.
	x.r.Send(tasks[:17])
	x.r.Send(tasks[17:])
	x.out.wait(t, len(tasks))
	x.disp.Stop() // every lane worker has exited: no outcome can follow
	if n := x.out.len(); n != len(tasks) {
		t.Fatalf("%d outcomes for %d tasks", n, len(tasks))
	}
	for _, tk := range tasks {
		err, _ := x.out.of(tk.ID)
		if k := kindOf[tk.ID]; !kinds[k](err) {
			t.Errorf("task %s (%s): outcome %v", tk.ID, k, err)
		}
	}
	wh.mu.Lock()
	defer wh.mu.Unlock()
	for id, n := range wh.got {
		if n != 1 {
			t.Errorf("task %s delivered %d times", id, n)
		}
	}
}

// Tasks for two destinations land in two lanes: while one destination
// hangs, every task of the other is delivered; paths of one host share
// its lane.
func TestDestinationsInOwnLanes(t *testing.T) {
	wh := newWebhook()
	x := setup(t, wh)
	t.Cleanup(wh.unblock) // before the dispatcher's Stop, should the test fail
	var tasks, fast []*task.Task
	for i := range 2 {
		tasks = append(tasks, due("hooks", fmt.Sprintf("http://hang.example/p%d", i)))
	}
	for i := range 20 {
		tk := due("hooks", fmt.Sprintf("http://fast.example/p%d", i))
		tasks, fast = append(tasks, tk), append(fast, tk)
	}
	x.r.Send(tasks) // hanging ones first, in one batch
	stagetest.Eventually(t, "every fast delivery done while the other destination hangs", func() bool {
		for _, tk := range fast {
			if _, ok := x.out.of(tk.ID); !ok {
				return false
			}
		}
		return true
	})
	for _, tk := range fast {
		if err, _ := x.out.of(tk.ID); err != nil {
			t.Fatalf("fast delivery failed: %v", err)
		}
	}
	if n := x.out.len(); n != len(fast) {
		t.Fatalf("%d outcomes while hanging; want only the %d fast ones", n, len(fast))
	}
	stagetest.Eventually(t, "a hanging delivery under way", func() bool { return wh.hangingNow() >= 1 })
	stats := x.disp.Stats()
	hang, ok := stats["http://hang.example"]
	if !ok {
		t.Fatalf("no lane for the hanging host; lanes %v", stats)
	}
	// Concurrency 1: one path of the host in flight, the other queued
	// behind it in the same lane.
	if hang.InFlight != 1 || hang.Queued != 1 || wh.hangingNow() != 1 {
		t.Fatalf("hanging lane %+v, %d hanging; want 1 in flight and 1 queued", hang, wh.hangingNow())
	}
	wh.unblock()
	x.out.wait(t, len(tasks))
}

// With the dispatcher stopped, every task is refused with ErrStopped (it
// is retried without using an attempt), exactly once.
func TestSendWhileStopped(t *testing.T) {
	x := setup(t, newWebhook())
	if err := x.r.Handle("ok", &recorder{}); err != nil {
		t.Fatal(err)
	}
	x.disp.Stop()
	tasks := []*task.Task{due("ok", ""), due("hooks", "http://a.example/x")}
	x.r.Send(tasks)
	x.out.wait(t, len(tasks))
	for _, tk := range tasks {
		if err, _ := x.out.of(tk.ID); !errors.Is(err, deliver.ErrStopped) {
			t.Fatalf("outcome %v; want ErrStopped", err)
		}
	}
}

// Wired to the real completer, the router's outcomes reach the store: a
// handled task is done, one without handler waits for a retry, one with
// a target on a node without webhook sink is dead.
func TestOutcomesReachStore(t *testing.T) {
	t.Parallel()
	st := stagetest.Store(t)
	comp, err := complete.New(complete.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	disp, err := deliver.NewDispatcher(deliver.DispatcherConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := comp.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := disp.Start(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := deliver.NewRouter(deliver.RouterConfig{Dispatcher: disp, Outcomes: comp, NodeID: nodeID})
	if err != nil {
		t.Fatal(err)
	}
	h := &recorder{}
	if err := r.Handle("handled", h); err != nil {
		t.Fatal(err)
	}
	hook := stagetest.NewTask(t, "hooks", "k3", time.Now())
	hook.Target = "http://receiver.example/hook"
	tasks := stagetest.Running(t, st,
		stagetest.NewTask(t, "handled", "k1", time.Now()),
		stagetest.NewTask(t, "unhandled", "k2", time.Now()),
		hook)
	comp.Expect(tasks, time.Now().Add(time.Minute))
	r.Send(tasks)
	disp.Stop()
	comp.Stop() // returns once every expected outcome is written
	want := []task.Status{task.StatusDone, task.StatusPending, task.StatusDead}
	for i, tk := range tasks {
		if row := stagetest.Get(t, st, tk.ID); row.Status != want[i] {
			t.Errorf("task %s (%s): %s, last_error %q; want %s", tk.ID, tk.Topic, row.Status, row.LastError, want[i])
		}
	}
	if d := h.deliveries(); len(d) != 1 || d[0].ID != tasks[0].ID || d[0].Attempt != 1 {
		t.Fatalf("handler got %+v", d)
	}
}
