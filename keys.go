package ontime

import (
	"context"
	"encoding/json"
	"time"

	"github.com/ontimehq/ontime/internal/task"
)

// TaskPatch changes a pending or claimed task: set the fields to change,
// leave the others zero. DueAt and Delay are exclusive; Payload nil keeps
// the payload (json.RawMessage("null") sets null); Target nil keeps the
// target (a pointer to "" switches to the topic's Go handler).
type TaskPatch struct {
	DueAt       time.Time
	Delay       time.Duration // from now; a zero Delay is "not given", use DueAt: time.Now() for now
	Payload     json.RawMessage
	Target      *string
	MaxAttempts int // 0: unchanged
	// Retry replaces the task's own retry policy (&Retry{} removes it);
	// nil: unchanged.
	Retry *Retry
}

func (p TaskPatch) spec() task.PatchSpec {
	var s task.PatchSpec
	s.DueAt, s.Delay = dueSpec(p.DueAt, p.Delay)
	s.Payload, s.Target = p.Payload, p.Target
	if p.MaxAttempts != 0 {
		n := p.MaxAttempts
		s.MaxAttempts = &n
	}
	if p.Retry != nil {
		r := task.RetrySpec(*p.Retry)
		s.Retry = &r
	}
	return s
}

// Update changes a pending or claimed task and returns it; ErrConflict
// once it is running or final, ErrNotFound for an unknown ID. A task moved
// later is never delivered at its old time, one moved earlier is delivered
// at its new time, never before, whichever node holds it.
func (n *Node) Update(ctx context.Context, id string, p TaskPatch) (*Task, error) {
	return viewed(n.submit.Update(ctx, id, p.spec()))
}

// GetByKey returns the task a key names in a topic: its live task
// (pending, claimed, running), else the one that ended last; ErrNotFound
// when none.
func (n *Node) GetByKey(ctx context.Context, topic, key string) (*Task, error) {
	return viewed(n.submit.GetByKey(ctx, topic, key))
}

// UpdateByKey is Update of the task a key names.
func (n *Node) UpdateByKey(ctx context.Context, topic, key string, p TaskPatch) (*Task, error) {
	return viewed(n.submit.UpdateByKey(ctx, topic, key, p.spec()))
}

// CancelByKey cancels the live task a key names; a key whose task is
// cancelled already returns it; ErrConflict once the task is running,
// done or dead.
func (n *Node) CancelByKey(ctx context.Context, topic, key string) (*Task, error) {
	return viewed(n.submit.CancelByKey(ctx, topic, key))
}

// viewed is viewOf of a call's answer: nil and the error when it failed.
func viewed(t *task.Task, err error) (*Task, error) {
	if err != nil {
		return nil, err
	}
	return viewOf(t), nil
}

// dueSpec is a due time and a delay as the specs hold them: nil when zero.
func dueSpec(at time.Time, delay time.Duration) (*time.Time, *time.Duration) {
	var a *time.Time
	var d *time.Duration
	if !at.IsZero() {
		a = &at
	}
	if delay != 0 {
		d = &delay
	}
	return a, d
}
