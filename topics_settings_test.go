package ontime_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ontimehq/ontime"
)

// The Go API of topic settings and retry policies: PutTopicSettings (bad
// values a *FieldError naming the field), a task's own Retry, the view's
// NextAttemptReason, and a topic's timeout bounding its Go handler's call.
func TestNodeTopicSettings(t *testing.T) {
	t.Parallel()
	node := newTestNode(t)
	ctx := context.Background()
	var mu sync.Mutex
	calls := map[string][]time.Time{}
	if err := node.Handle("go.ts", func(ctx context.Context, d *ontime.Delivery) error {
		mu.Lock()
		calls[d.ID] = append(calls[d.ID], time.Now())
		mu.Unlock()
		if d.Attempt == 1 {
			<-ctx.Done() // held until the topic's timeout
			return ctx.Err()
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = node.Stop(context.Background()) })

	_, err := node.PutTopicSettings(ctx, "go.ts", ontime.TopicSettings{Retry: &ontime.Retry{Backoff: "fixed", Max: "1m"}})
	var fe *ontime.FieldError
	if !errors.As(err, &fe) || fe.Field != "retry.max" {
		t.Fatalf("bad settings: %v", err)
	}
	info, err := node.PutTopicSettings(ctx, "go.ts", ontime.TopicSettings{MaxAttempts: 4, Timeout: "200ms"})
	if err != nil || info.Settings.MaxAttempts != 4 || info.Sources.MaxAttempts != "api" || info.Settings.Timeout != "200ms" {
		t.Fatalf("settings: %v %+v", err, info)
	}
	tk, _, err := node.Submit(ctx, ontime.TaskSpec{Topic: "go.ts", Retry: &ontime.Retry{Schedule: []string{"1500ms"}, Jitter: new(float64)}})
	if err != nil || tk.MaxAttempts != 4 || tk.Retry == nil || tk.Retry.Schedule[0] != "1.5s" {
		t.Fatalf("submit: %v %+v", err, tk)
	}
	var v *ontime.Task
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if v, err = node.Get(ctx, tk.ID); err == nil && (v.Status == "pending" || v.Status == "claimed") && v.Attempts == 1 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if v.Attempts != 1 || !strings.Contains(v.NextAttemptReason, "retry: attempt 2 of 4 after: handler of topic \"go.ts\" timed out after 200ms") {
		t.Fatalf("after the first attempt: %+v", v)
	}
	for time.Now().Before(deadline) {
		if v, _ = node.Get(ctx, tk.ID); v.Status == "done" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	c := calls[tk.ID]
	if v.Status != "done" || len(c) != 2 || c[1].Sub(c[0]) < 1700*time.Millisecond {
		t.Fatalf("status %s, calls %v: want attempt 2 1.5s after attempt 1 timed out after 200ms", v.Status, c)
	}
}
