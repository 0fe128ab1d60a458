package ontime_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ontimehq/ontime"
)

func newTestNode(t *testing.T) *ontime.Node {
	t.Helper()
	cfg := ontime.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Store.Tables = 2
	node, err := ontime.NewNode(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return node
}

// Stop from many goroutines at once: every call returns after the node has
// stopped, all with the same result, and the handler's delivery that was in
// flight finished first (run under -race this also checks Stop's
// bookkeeping).
func TestNodeConcurrentStop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := newTestNode(t)
	entered, finished := make(chan struct{}), make(chan struct{})
	var once sync.Once
	if err := node.Handle("t", func(ctx context.Context, d *ontime.Delivery) error {
		once.Do(func() { close(entered) })
		time.Sleep(200 * time.Millisecond)
		close(finished)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	task, _, err := node.Submit(ctx, ontime.TaskSpec{Topic: "t"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatalf("task %s never delivered", task.ID)
	}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = node.Stop(ctx)
			select {
			case <-finished:
			default:
				errs[i] = errors.New("Stop returned while a delivery was in flight")
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Stop #%d: %v", i, err)
		}
	}
	if err := node.Stop(ctx); err != nil {
		t.Fatalf("Stop after stop: %v", err)
	}
	if err := node.Start(ctx); err == nil {
		t.Fatal("Start after Stop succeeded; the store is closed")
	}
}

// Before Start and after Stop the node refuses submits with the not-ready
// error the HTTP layer answers with 503; a second Start is refused.
func TestNodeNotReadyOutsideStartStop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := newTestNode(t)
	if _, _, err := node.Submit(ctx, ontime.TaskSpec{Topic: "t"}); !errors.Is(err, ontime.ErrNotReady) {
		t.Fatalf("submit before Start: %v, want ErrNotReady", err)
	}
	if err := node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := node.Start(ctx); err == nil {
		t.Fatal("a second Start succeeded")
	}
	if _, _, err := node.Submit(ctx, ontime.TaskSpec{Topic: "t", Delay: time.Hour, Target: "http://127.0.0.1:9/t"}); err != nil {
		t.Fatalf("submit while running: %v", err)
	}
	if err := node.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := node.Submit(ctx, ontime.TaskSpec{Topic: "t"}); !errors.Is(err, ontime.ErrNotReady) {
		t.Fatalf("submit after Stop: %v, want ErrNotReady", err)
	}
}

// A node built but never started stops cleanly and closes its store.
func TestNodeStopWithoutStart(t *testing.T) {
	t.Parallel()
	node := newTestNode(t)
	if err := node.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := node.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// /metrics reports the pipeline's levels: tasks by status (counted by the
// gauges' worker once a scrape finds the count stale) and the hot tier's
// size.
func TestNodeLevelGauges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := newTestNode(t)
	if err := node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Stop(ctx) })
	for i := range 3 {
		if _, _, err := node.Submit(ctx, ontime.TaskSpec{Topic: "t", Key: fmt.Sprint(i), Delay: time.Hour, Target: "http://127.0.0.1:9/t"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := node.Submit(ctx, ontime.TaskSpec{Topic: "t", Key: "soon", Delay: 20 * time.Second, Target: "http://127.0.0.1:9/t"}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(node.HTTPHandler())
	t.Cleanup(srv.Close)
	scrape := func() string {
		resp, err := http.Get(srv.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		m := scrape()
		if strings.Contains(m, `ontime_tasks{status="pending"} 3`) && strings.Contains(m, `ontime_tasks{status="claimed"} 1`) &&
			strings.Contains(m, "ontime_hot_entries 1") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics never showed 3 pending, 1 claimed and 1 hot entry:\n%s", grepLines(m, "ontime_tasks", "ontime_hot"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func grepLines(s string, prefixes ...string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				out = append(out, l)
			}
		}
	}
	return strings.Join(out, "\n")
}
