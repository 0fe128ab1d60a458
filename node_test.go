package ontime_test

import (
	"context"
	"errors"
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
	if _, _, err := node.Submit(ctx, ontime.TaskSpec{Topic: "t", Delay: time.Hour}); err != nil {
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
