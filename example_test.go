package ontime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/ontimehq/ontime"
)

// A node embedded in a Go program: a handler per topic, tasks submitted
// with a delay, delivered at their due time.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "ontime-example")
	defer os.RemoveAll(dir)

	cfg := ontime.DefaultConfig()
	cfg.DataDir = dir
	node, err := ontime.NewNode(ctx, cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	// The handler reports through a channel, so the output's order does
	// not depend on whether Submit returns before the delivery.
	done := make(chan string, 1)
	node.Handle("order.cancel", func(ctx context.Context, d *ontime.Delivery) error {
		var p struct{ Order int }
		_ = json.Unmarshal(d.Payload, &p)
		done <- fmt.Sprintf("cancel order %d (attempt %d, on time: %v)", p.Order, d.Attempt, !time.Now().Before(d.DueAt))
		return nil
	})
	if err := node.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer node.Stop(ctx)

	t, created, err := node.Submit(ctx, ontime.TaskSpec{
		Topic:   "order.cancel",
		Key:     "order-42",
		Delay:   200 * time.Millisecond,
		Payload: json.RawMessage(`{"order":42}`),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("submitted:", created, t.Status)
	fmt.Println(<-done)
	// Output:
	// submitted: true claimed
	// cancel order 42 (attempt 1, on time: true)
}

// A handler's result: kept with the done task, shown as result by
// GET /v1/tasks/{id}, until retention.done.
func ExampleDelivery_SetResult() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "ontime-example")
	defer os.RemoveAll(dir)
	cfg := ontime.DefaultConfig()
	cfg.DataDir = dir
	node, err := ontime.NewNode(ctx, cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	node.Handle("report.build", func(ctx context.Context, d *ontime.Delivery) error {
		return d.SetResult(map[string]int{"rows": 3})
	})
	if err := node.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer node.Stop(ctx)
	t, _, err := node.Submit(ctx, ontime.TaskSpec{Topic: "report.build"})
	if err != nil {
		fmt.Println(err)
		return
	}
	for t.Status != "done" {
		time.Sleep(10 * time.Millisecond)
		if t, err = node.Get(ctx, t.ID); err != nil {
			fmt.Println(err)
			return
		}
	}
	fmt.Println(t.Status, string(t.Result))
	// Output: done {"rows":3}
}
