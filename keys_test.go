package ontime_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ontimehq/ontime"
)

// TestNodeByKeyAndUpdate: the Go API by key and Update on an embedded
// node: a task moved earlier is delivered at its new time with its new
// payload, one moved later is not delivered before it, Replace updates the
// live task, and final tasks are conflicts.
func TestNodeByKeyAndUpdate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := newTestNode(t)
	var mu sync.Mutex
	got := map[string]time.Time{}
	payloads := map[string]string{}
	if err := node.Handle("k", func(_ context.Context, d *ontime.Delivery) error {
		mu.Lock()
		defer mu.Unlock()
		got[d.Key], payloads[d.Key] = time.Now(), string(d.Payload)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Stop(context.Background()) })

	early, _, err := node.Submit(ctx, ontime.TaskSpec{Topic: "k", Key: "early", Delay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	moved, err := node.UpdateByKey(ctx, "k", "early", ontime.TaskPatch{Delay: 200 * time.Millisecond, Payload: json.RawMessage(`"v2"`)})
	if err != nil || moved.ID != early.ID || !moved.DueAt.Before(early.DueAt) {
		t.Fatalf("update by key: %v %+v", err, moved)
	}
	late, _, err := node.Submit(ctx, ontime.TaskSpec{Topic: "k", Key: "late", Delay: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// Due seconds ahead, not milliseconds: under -race on a loaded CI
	// machine the update can come after a short due time, when the task is
	// already running (a conflict, rightly).
	later, err := node.Update(ctx, late.ID, ontime.TaskPatch{Delay: 4 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("delivered %v", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	if got["early"].Before(moved.DueAt) || payloads["early"] != `"v2"` {
		t.Errorf("moved earlier: delivered at %s (due %s) with %s", got["early"], moved.DueAt, payloads["early"])
	}
	if got["late"].Before(later.DueAt) {
		t.Errorf("moved later: delivered %s before its new due time", later.DueAt.Sub(got["late"]))
	}
	mu.Unlock()

	v, err := node.GetByKey(ctx, "k", "late")
	if err != nil || v.ID != late.ID {
		t.Fatalf("get by key: %v %+v", err, v)
	}
	for v.Status != "done" {
		time.Sleep(20 * time.Millisecond)
		if v, err = node.GetByKey(ctx, "k", "late"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := node.Update(ctx, late.ID, ontime.TaskPatch{MaxAttempts: 2}); !errors.Is(err, ontime.ErrConflict) {
		t.Fatalf("update of a done task: %v", err)
	}
	if _, err := node.CancelByKey(ctx, "k", "late"); !errors.Is(err, ontime.ErrConflict) {
		t.Fatalf("cancel by key of a done task: %v", err)
	}
	if _, err := node.GetByKey(ctx, "k", "nobody"); !errors.Is(err, ontime.ErrNotFound) {
		t.Fatalf("unknown key: %v", err)
	}
	var fe *ontime.FieldError
	if _, err := node.Update(ctx, late.ID, ontime.TaskPatch{}); !errors.As(err, &fe) {
		t.Fatalf("empty patch: %v", err)
	}
	if _, err := node.UpdateByKey(ctx, "k", strings.Repeat("x", 300), ontime.TaskPatch{MaxAttempts: 2}); !errors.As(err, &fe) || fe.Field != "key" {
		t.Fatalf("long key: %v", err)
	}

	// Replace: the live task takes the new spec; cancel by key ends it.
	first, _, err := node.Submit(ctx, ontime.TaskSpec{Topic: "k", Key: "r", Delay: time.Hour, MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	rep, created, err := node.Submit(ctx, ontime.TaskSpec{Topic: "k", Key: "r", Delay: 2 * time.Hour, MaxAttempts: 9, Replace: true})
	if err != nil || created || rep.ID != first.ID || rep.MaxAttempts != 9 || !rep.DueAt.After(first.DueAt) {
		t.Fatalf("replace: %v created %v %+v", err, created, rep)
	}
	c, err := node.CancelByKey(ctx, "k", "r")
	if err != nil || c.ID != first.ID || c.Status != "cancelled" {
		t.Fatalf("cancel by key: %v %+v", err, c)
	}
	// Within the key hold a keep submit returns the final task untouched;
	// a replace makes a new task (the caller asked for it), and the same
	// replace again finds that task.
	kept, created, err := node.Submit(ctx, ontime.TaskSpec{Topic: "k", Key: "r"})
	if err != nil || created || kept.ID != first.ID || kept.Status != "cancelled" {
		t.Fatalf("keep within the key hold: %v %v %+v", err, created, kept)
	}
	rep, created, err = node.Submit(ctx, ontime.TaskSpec{Topic: "k", Key: "r", Delay: time.Hour, Replace: true})
	if err != nil || !created || rep.ID == first.ID || rep.Status == "cancelled" {
		t.Fatalf("replace within the key hold: %v %v %+v", err, created, rep)
	}
	again, created, err := node.Submit(ctx, ontime.TaskSpec{Topic: "k", Key: "r", Delay: time.Hour, Replace: true})
	if err != nil || created || again.ID != rep.ID {
		t.Fatalf("replace again: %v %v %+v", err, created, again)
	}
}

// TestRetentionConfig: defaults, bounds naming the key, environment
// overrides.
func TestRetentionConfig(t *testing.T) {
	t.Parallel()
	c := ontime.DefaultConfig()
	if r := c.Retention; time.Duration(r.Done) != 24*time.Hour || time.Duration(r.Cancelled) != 24*time.Hour ||
		time.Duration(r.Dead) != 720*time.Hour || time.Duration(r.KeyHold) != 10*time.Minute {
		t.Fatalf("defaults: %+v", r)
	}
	for key, set := range map[string]func(*ontime.Config){
		"retention.done":      func(c *ontime.Config) { c.Retention.Done = 0 },
		"retention.cancelled": func(c *ontime.Config) { c.Retention.Cancelled = ontime.Duration(time.Millisecond) },
		"retention.dead":      func(c *ontime.Config) { c.Retention.Dead = -1 },
		"retention.key_hold":  func(c *ontime.Config) { c.Retention.KeyHold = -1 },
	} {
		c := ontime.DefaultConfig()
		c.Store.Databases = []string{"x.db"}
		set(&c)
		if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), key+":") {
			t.Errorf("%s: %v, want an error naming it", key, err)
		}
	}
	c, err := ontime.LoadConfig("", []string{"ONTIME_RETENTION_DONE=5s", "ONTIME_RETENTION_KEY_HOLD=0s"})
	if err != nil || time.Duration(c.Retention.Done) != 5*time.Second || c.Retention.KeyHold != 0 {
		t.Fatalf("env: %v %+v", err, c.Retention)
	}
	var cfg ontime.Config
	if err := ontime.ParseConfig([]byte("retention:\n  dead: 1h\n  hold: 1m\n"), &cfg); err == nil || !strings.Contains(err.Error(), "retention.hold") {
		t.Fatalf("unknown key: %v", err)
	}
}
