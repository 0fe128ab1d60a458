// Package task holds the task model shared by every stage of the pipeline:
// the row a store keeps, its state machine, and the validation of what users
// submit. It has no dependencies on the stages themselves.
package task

import (
	"fmt"
	"time"
)

// Status is a task's place in the state machine (see docs/tasks.md, "Task states").
//
//	pending ──claim──► claimed ──start──► running ──► done
//	   ▲                  │                  │
//	   │     lease expiry │ release          ├──fail (attempts left)──► pending (later due_at)
//	   └──────────────────┘                  └──fail (no attempts)───► dead ──requeue──► pending
//	pending | claimed ──cancel──► cancelled
//
// A claimed or running task whose lease expired is claimable again; done,
// dead and cancelled are final (dead leaves only by an explicit requeue).
type Status int8

const (
	StatusPending   Status = 0
	StatusClaimed   Status = 1
	StatusRunning   Status = 2
	StatusDone      Status = 3
	StatusDead      Status = 4
	StatusCancelled Status = 5
)

var statusNames = [...]string{"pending", "claimed", "running", "done", "dead", "cancelled"}

// Statuses lists every status in order (metrics report each, 0 included).
func Statuses() []Status {
	out := make([]Status, len(statusNames))
	for i := range out {
		out[i] = Status(i)
	}
	return out
}

func (s Status) String() string {
	if s < 0 || int(s) >= len(statusNames) {
		return fmt.Sprintf("status(%d)", int(s))
	}
	return statusNames[s]
}

// ParseStatus maps a status name to its value.
func ParseStatus(name string) (Status, error) {
	for i, n := range statusNames {
		if n == name {
			return Status(i), nil
		}
	}
	return 0, &FieldError{Field: "status", Message: fmt.Sprintf("unknown status %q (want one of pending, claimed, running, done, dead, cancelled)", name)}
}

// Task is one delayed task, as a store keeps it.
type Task struct {
	ID          string
	Topic       string
	Key         string // empty when the submitter gave none
	ShardHash   uint32 // routes the task: see router.Topology
	Seg         int    // scan segment ("house number") within its table
	DueAt       time.Time
	Payload     []byte // a JSON value; never nil once validated ("null" at least)
	Target      string // "" means a Go handler registered for Topic
	MaxAttempts int
	Attempts    int // deliveries started so far
	Status      Status
	LastError   string
	CreatedAt   time.Time
	UpdatedAt   time.Time
	// Owner and LeaseUntil are set while the task is claimed or running.
	Owner      string
	LeaseUntil time.Time
	// Token identifies one claim of the task. Start, Complete, Fail and
	// Release must present it, so a holder whose claim was superseded (its
	// lease expired and another node claimed the task) can change nothing.
	Token int64
	// FirstDueAt is the due time the task was submitted with: retries
	// move DueAt to the next attempt's, not this.
	FirstDueAt time.Time
	// MovedBy is what last set DueAt since the submit: a retry, an update
	// or a requeue; MovedNone when nothing did.
	MovedBy Move
	// Traceparent is the W3C trace context of the submit that made the
	// task ('' when it was not traced); deliveries continue that trace.
	Traceparent string
	// Result is what the delivery that made the task done answered: a
	// webhook's 2xx JSON body, a Go handler's Delivery.SetResult (a JSON
	// value, at most delivery.max_result_bytes); nil when none.
	Result []byte
	// Retry is the task's own retry policy in its stored form
	// (Retry.Encode; DecodeRetry reads it), "" when it has none: its
	// topic's applies, else the node's.
	Retry string
	// Priority orders the task among those ready at once (see Rank):
	// 0 (the default) to MaxPriority.
	Priority int
}

// Move is what last moved a task's due time away from the one it was
// submitted with. The store keeps it beside due_at, so that a view can say
// why the two differ instead of guessing from attempts and errors.
type Move int8

const (
	MovedNone    Move = 0 // as submitted (or a row from before the store kept it)
	MovedRetry   Move = 1 // a failed, deferred or snoozed delivery: the retry's time
	MovedUpdate  Move = 2 // an update of the due time (PATCH, submit with if_exists: replace)
	MovedRequeue Move = 3 // a requeue of the dead task, by its ID or its topic
)

var moveNames = [...]string{"", "retry", "update", "requeue"}

// String is the move's name in the API's moved_by ("" for MovedNone).
func (m Move) String() string {
	if m < 0 || int(m) >= len(moveNames) {
		return fmt.Sprintf("move(%d)", int(m))
	}
	return moveNames[m]
}

// NextAttemptReason says why a pending or claimed task is due when it is
// (its DueAt): "" for one as submitted (its due time says it all),
// running or final. A retry's says which attempt comes and what became of
// the last one (its last_error: the receiver's answer and a Retry-After,
// a breaker's or a lane's deferral, a snooze).
func (t *Task) NextAttemptReason() string {
	if t.Status != StatusPending && t.Status != StatusClaimed || (t.MovedBy == MovedNone && t.Attempts == 0) {
		return "" // as submitted: the common answer, which costs nothing here
	}
	next := fmt.Sprintf("attempt %d of %d", t.Attempts+1, t.MaxAttempts)
	switch t.MovedBy {
	case MovedRetry:
		if t.LastError == "" {
			return "retry: " + next
		}
		return "retry: " + next + " after: " + t.LastError
	case MovedUpdate:
		return "due time set by an update: " + next
	case MovedRequeue:
		return "requeued: " + next
	}
	return next // attempted, in a row from before moved_by was kept
}
