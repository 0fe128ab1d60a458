package store

import (
	"context"
	"fmt"
	"time"

	"github.com/ontimehq/ontime/internal/task"
)

// Keys is the part of the store contract that addresses tasks by their
// (topic, key), changes pending tasks in place, and deletes final rows
// once their retention has passed.
//
// A key names at most one live task (pending, claimed, running) in its
// topic: the engines keep a unique index over live rows only, so a final
// task does not hold its key for ever. Insert honours a key hold (see
// sqlstore.Config.KeyHold): a final task whose row ended less than the hold
// ago is returned as Existing, so a client retrying a submit never causes a
// second delivery. A final row's updated_at is when it ended: no write
// touches a final row except a requeue, which makes it live again.
type Keys interface {
	// GetByKey returns the task the key names: its live task if it has
	// one, else the final task that ended last; ErrNotFound when no row
	// has the key. It reads through an index on (topic, task_key).
	GetByKey(ctx context.Context, topic, key string) (*task.Task, error)

	// Update changes a pending or claimed task and returns it. Running and
	// final tasks give a *ConflictError, unknown IDs ErrNotFound. When
	// p.DueAt is set the task's claim is replaced: it ends claimed under
	// p.Claim (the caller puts it in its hot tier) or, with p.Claim nil,
	// pending; either way the old claim token is void, so whoever held the
	// task can no longer start it.
	Update(ctx context.Context, id string, p Patch) (*task.Task, error)

	// DeleteExpired deletes up to limit rows of item with status st (done,
	// dead or cancelled) that ended before before, through an index, and
	// returns how many it deleted.
	DeleteExpired(ctx context.Context, item Item, st task.Status, before time.Time, limit int) (int64, error)
}

// Patch is a change to a pending or claimed task. Nil fields stay as they
// are.
type Patch struct {
	DueAt       *time.Time
	Payload     []byte // a validated JSON value; nil: unchanged
	Target      *string
	MaxAttempts *int
	Retry       *string // the task's own retry policy, stored form; "": none
	// Claim, with DueAt: the task is claimed under this lease afterwards
	// (its new due time is within the caller's preheat window).
	Claim *Lease
}

// Empty reports whether p changes nothing.
func (p Patch) Empty() bool {
	return p.DueAt == nil && p.Payload == nil && p.Target == nil && p.MaxAttempts == nil && p.Retry == nil
}

// KeyConflictError: a change would give a key a second live task (a
// requeue of a dead task whose key has been reused meanwhile).
// errors.Is(err, ErrConflict) matches it.
type KeyConflictError struct {
	ID    string
	Topic string
	Key   string
	Op    string
}

func (e *KeyConflictError) Error() string {
	return fmt.Sprintf("%s %s: key %q of topic %s names another live task", e.Op, e.ID, e.Key, e.Topic)
}
func (e *KeyConflictError) Is(target error) bool { return target == ErrConflict }

// FinalStatuses are the statuses retention deletes.
var FinalStatuses = [...]task.Status{task.StatusDone, task.StatusDead, task.StatusCancelled}

// Live reports whether a task in status st holds its key.
func Live(st task.Status) bool { return st < task.StatusDone }
