package apiv1

import "encoding/json"

// TaskPatch is the body of PATCH /v1/tasks/{id} and PATCH
// /v1/topics/{topic}/keys/{key}: any of these fields; those left out stay
// as they are. A pending or claimed task only; others answer 409.
type TaskPatch struct {
	DueAt       *string         `json:"due_at,omitempty"` // RFC 3339
	Delay       *string         `json:"delay,omitempty"`  // a Go duration from now
	Payload     json.RawMessage `json:"payload,omitempty"`
	Target      *string         `json:"target,omitempty"`
	MaxAttempts *int            `json:"max_attempts,omitempty"`
	// Retry replaces the task's own retry policy; {} removes it (the
	// task's topic's applies again).
	Retry *Retry `json:"retry,omitempty"`
}

// The values of TaskRequest.IfExists.
const (
	// IfExistsKeep (the default): a submit whose key names a live task
	// returns it unchanged (200); one whose key a final task holds
	// (within retention.key_hold) returns that task with KeyHeldUntil.
	IfExistsKeep = "keep"
	// IfExistsReplace: a submit whose key names a live task updates it
	// like a PATCH with every field of the submit (200); a pending or
	// claimed task only, else 409. A final task does not hold its key
	// against a replace: a new task is made (201).
	IfExistsReplace = "replace"
)
