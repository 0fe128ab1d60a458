// Package apiv1 defines the JSON bodies of ontime's HTTP API v1: what a
// client sends, what the server answers, and the error codes. The server,
// the Go client (package client), the CLI and the tests all use these types,
// so the wire format has one definition.
//
// The package holds data only and imports nothing of ontime's internals:
// programs that talk to ontime over HTTP may import it without pulling in
// the scheduler.
package apiv1

import (
	"encoding/json"
	"time"
)

// MaxBatch is the most tasks one POST /v1/tasks:batch may carry.
const MaxBatch = 1000

// TaskRequest is a task to submit: the body of POST /v1/tasks and an entry
// of BatchRequest.
type TaskRequest struct {
	Topic       string          `json:"topic"`
	Key         string          `json:"key,omitempty"`
	DueAt       string          `json:"due_at,omitempty"` // RFC 3339
	Delay       string          `json:"delay,omitempty"`  // a Go duration: "30s", "1h30m"
	Payload     json.RawMessage `json:"payload,omitempty"`
	Target      string          `json:"target,omitempty"`
	MaxAttempts int             `json:"max_attempts,omitempty"`
	IfExists    string          `json:"if_exists,omitempty"` // IfExistsKeep (default) or IfExistsReplace
	// Retry is the task's own retry policy; absent: its topic's, else the
	// node's.
	Retry *Retry `json:"retry,omitempty"`
	// Priority, 0 (lowest) to 9, orders the task among those due at once
	// (docs/topics.md, "Priorities"); absent: its topic's, else 0.
	Priority *int `json:"priority,omitempty"`
}

// Task is a stored task's view, the answer of every task route.
type Task struct {
	ID          string          `json:"id"`
	Topic       string          `json:"topic"`
	Key         string          `json:"key,omitempty"`
	DueAt       time.Time       `json:"due_at"`             // of the next attempt
	FirstDueAt  time.Time       `json:"first_due_at"`       // as submitted; retries move due_at only
	MovedBy     string          `json:"moved_by,omitempty"` // what last set due_at: MovedByRetry, …Update, …Requeue; "" when nothing did
	Payload     json.RawMessage `json:"payload"`
	Target      string          `json:"target,omitempty"`
	MaxAttempts int             `json:"max_attempts"`
	Priority    int             `json:"priority"`
	Status      string          `json:"status"`
	Attempts    int             `json:"attempts"`
	CreatedAt   time.Time       `json:"created_at"`
	UpdatedAt   time.Time       `json:"updated_at"` // a final task's: when it ended
	LastError   string          `json:"last_error,omitempty"`
	// Result: what the delivery that made the task done answered — a
	// webhook's 2xx JSON body, a Go handler's Delivery.SetResult — kept
	// with the task until retention.done; absent when none.
	Result json.RawMessage `json:"result,omitempty"`
	// Retry is the task's own retry policy, when it was given one.
	Retry *Retry `json:"retry,omitempty"`
	// NextAttemptAt and NextAttemptReason say when and why the task's
	// next attempt is due: set for a pending or claimed task that was
	// attempted or moved (a retry, a deferral, an update, a requeue);
	// absent for a new task, due at due_at as submitted, and for one
	// running or final.
	NextAttemptAt     *time.Time `json:"next_attempt_at,omitempty"`
	NextAttemptReason string     `json:"next_attempt_reason,omitempty"`
	// KeyHeldUntil: only in a submit's answer (alone or in a batch), when
	// the key was held by this task although it is final (it ended less
	// than retention.key_hold ago): nothing was written and nothing will
	// be delivered for that submit. The key takes a new task from then
	// on; if_exists: replace makes one at once.
	KeyHeldUntil *time.Time `json:"key_held_until,omitempty"`
	// Outbox: only in GET /v1/tasks/{id}, for a task relayed from an
	// outbox message (config outboxes:) whose row is still in its table.
	Outbox *TaskOutbox `json:"outbox,omitempty"`
}

// TaskOutbox is the outbox message a task was relayed from. Messages of a
// key go one at a time: the key's later messages stay in the table, not
// tasks yet, until this task ends (done, dead, cancelled). HoldsBack
// counts them; while the task fails and retries, they wait with it.
type TaskOutbox struct {
	Outbox    string `json:"outbox"`
	Database  int    `json:"database"` // index in the outbox's databases
	Table     string `json:"table"`
	MessageID int64  `json:"message_id"`
	Key       string `json:"key"` // the message's key ("": none)
	HoldsBack int64  `json:"holds_back"`
}

// The values of Task.MovedBy: what last moved a task's due time.
const (
	// MovedByRetry: a delivery failed, was deferred (its destination's
	// breaker open, the node stopping) or was snoozed by its handler;
	// due_at is the retry's. last_error says which.
	MovedByRetry = "retry"
	// MovedByUpdate: an update set the due time (PATCH, ontime update,
	// a submit with if_exists: replace).
	MovedByUpdate = "update"
	// MovedByRequeue: the task was dead and was requeued (by its ID or
	// its topic), due at the requeue.
	MovedByRequeue = "requeue"
)

// BatchRequest is the body of POST /v1/tasks:batch. The tasks stay raw so
// that one malformed entry fails alone instead of the whole batch.
type BatchRequest struct {
	Tasks []json.RawMessage `json:"tasks"`
}

// BatchResponse answers POST /v1/tasks:batch: one item per submitted task,
// in order.
type BatchResponse struct {
	Tasks []BatchItem `json:"tasks"`
}

// BatchItem is one answer of a batch: the task (created or found by its
// key), or the error that kept it from being written.
type BatchItem struct {
	*Task
	Error *ErrorDetail `json:"error,omitempty"`
	// Created tells a task written by this submit (a single submit's 201)
	// from one its topic and key named already (200: nothing was written,
	// or, with if_exists: replace, the live task was updated). False on an
	// error. Nodes before it was added did not send it.
	Created bool `json:"created"`
}

// PreferMinimal is the Prefer header (RFC 7240) that asks POST
// /v1/tasks:batch for a BatchMinimalResponse: each task's ID and status
// instead of its whole view. A node that applied it says so in the
// answer's Preference-Applied header.
const PreferMinimal = "return=minimal"

// BatchMinimalResponse answers POST /v1/tasks:batch sent with Prefer:
// return=minimal: one item per submitted task, in order, naming the task
// instead of showing it. Writing and reading 1,000 whole views was about
// a tenth of a batch call's time (the answer is ~500 KB; this one ~60 KB).
type BatchMinimalResponse struct {
	Tasks []BatchRef `json:"tasks"`
}

// BatchRef is one answer of a minimal batch: the task's ID and status
// (created, or found by its key), or the error that kept it from being
// written.
type BatchRef struct {
	ID     string       `json:"id,omitempty"`
	Status string       `json:"status,omitempty"`
	Error  *ErrorDetail `json:"error,omitempty"`
	// Created as in BatchItem.
	Created bool `json:"created"`
}

// ListPage answers GET /v1/tasks; NextCursor, when set, asks for the next
// page (?cursor=).
type ListPage struct {
	Tasks      []Task `json:"tasks"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// ErrorBody is the body of every 4xx and 5xx answer:
// {"error": {"code": …, "field": …, "message": …}}.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail says what went wrong. Programs branch on Code; Field names the
// input at fault when one is (a JSON field, a query parameter, "id");
// Message is for people.
type ErrorDetail struct {
	Code    Code   `json:"code"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

// Code classifies an error answer. The set is closed: a client that handles
// these handles every error the API gives.
type Code string

// The error codes, with the HTTP status each comes with.
const (
	// CodeInvalid (400, and 405 for a method the path does not take): the
	// request is wrong as sent; sending it again will fail again.
	CodeInvalid Code = "invalid"
	// CodeTooLarge (413): the body or the payload is over the limit.
	CodeTooLarge Code = "too_large"
	// CodeNotFound (404): no task has this ID, or no route has this path.
	CodeNotFound Code = "not_found"
	// CodeConflict (409): the task's state forbids the change (cancel of a
	// running task, requeue of a task that is not dead).
	CodeConflict Code = "conflict"
	// CodeUnauthorized (401): no or bad credentials.
	CodeUnauthorized Code = "unauthorized"
	// CodeForbidden (403): the credentials do not allow this.
	CodeForbidden Code = "forbidden"
	// CodeUnavailable (503): the node is starting, stopping, cannot reach
	// its store, or is reading as many request bodies as its budget allows;
	// retry later or on another node.
	CodeUnavailable Code = "unavailable"
	// CodeInternal (500): a failure on the server's side; the node's log has
	// the cause.
	CodeInternal Code = "internal"
)

// ClusterView answers GET /v1/cluster: the cluster as the asked node sees it.
type ClusterView struct {
	Node        string            `json:"node"`
	Coordinator string            `json:"coordinator"`
	Leader      string            `json:"leader"`
	Term        int64             `json:"term"`
	Nodes       []ClusterNodeView `json:"nodes"`
	Items       []ClusterItemView `json:"items"`
}

// ClusterNodeView is one node of the cluster.
type ClusterNodeView struct {
	ID        string    `json:"id"`
	Addr      string    `json:"addr"`
	Heartbeat time.Time `json:"heartbeat"`
	Live      bool      `json:"live"`
	Items     int       `json:"items"`
	// Topics are those the node has Go handlers for: tasks without a
	// target of these topics are accepted while it is live.
	Topics []string `json:"topics,omitempty"`
	// Started is when the node's process started, from its registration
	// (ontime_nodes.started_at, etcd's member value); nil when unknown.
	Started *time.Time `json:"started,omitempty"`
	// Version is the node's build version (as ontime_build_info labels
	// it), from its registration (ontime_nodes.version, etcd's member
	// value); empty for a node of an earlier version.
	Version string `json:"version,omitempty"`
	// Zone is the node's cluster.zone (empty: none).
	Zone string `json:"zone,omitempty"`
}

// ClusterItemView is one sharding item: its owner and scan lag (how far
// past due its oldest pending task is; 0 when none is overdue).
type ClusterItemView struct {
	Item    string  `json:"item"`
	Owner   string  `json:"owner"`
	LagSecs float64 `json:"lag_seconds"`
	// Zone is the item's database's zone (store.zones; empty: none): the
	// item goes to a live node of that zone while there is one.
	Zone string `json:"zone,omitempty"`
}

// OperationRequest is the body of POST /v1/operations: one change applied
// to every task the filter matches (a bulk operation).
type OperationRequest struct {
	Action string          `json:"action"` // cancel, requeue, reschedule, delete
	Filter OperationFilter `json:"filter"`
	// DueAt (RFC 3339) or Delay (a Go duration from now): reschedule's new
	// due time (one of them, or Shift), requeue's (optional; default now).
	DueAt string `json:"due_at,omitempty"`
	Delay string `json:"delay,omitempty"`
	// Shift (a Go duration, may be negative) moves each task's due time
	// by it: reschedule only.
	Shift string `json:"shift,omitempty"`
	// DryRun counts what would change and changes nothing.
	DryRun bool `json:"dry_run,omitempty"`
}

// OperationFilter selects tasks: every field set must hold; at least one
// must be set. Only tasks created before the operation are ever touched.
type OperationFilter struct {
	Topic         string   `json:"topic,omitempty"`
	Status        []string `json:"status,omitempty"`         // any of these statuses
	KeyPrefix     string   `json:"key_prefix,omitempty"`     // keys that start with it
	DueAfter      string   `json:"due_after,omitempty"`      // RFC 3339: due at or after
	DueBefore     string   `json:"due_before,omitempty"`     // RFC 3339: due before
	ErrorContains string   `json:"error_contains,omitempty"` // last_error contains it (case-sensitive)
}

// Operation is a bulk operation's view and progress: the answer of
// POST /v1/operations and GET /v1/operations/{id}.
type Operation struct {
	ID     string          `json:"id"`
	Action string          `json:"action"`
	Filter OperationFilter `json:"filter"`
	DueAt  *time.Time      `json:"due_at,omitempty"`
	Shift  string          `json:"shift,omitempty"`
	DryRun bool            `json:"dry_run"`
	// Status: pending (not started), running, done, failed (Error says
	// why; what it changed stays changed).
	Status string `json:"status"`
	// Matched: tasks the filter selected so far; Changed: those the action
	// changed (a dry run: would change). A matching task in a status the
	// action does not apply to is matched, not changed.
	Matched    int64 `json:"matched"`
	Changed    int64 `json:"changed"`
	TablesDone int   `json:"tables_done"`
	Tables     int   `json:"tables"`
	// Cursor is where the walk was when last recorded: DB/TABLE/last ID.
	Cursor     string     `json:"cursor,omitempty"`
	Error      string     `json:"error,omitempty"`
	Owner      string     `json:"owner,omitempty"` // the node that runs (or ran) it
	CreatedAt  time.Time  `json:"created_at"`
	StartedAt  *time.Time `json:"started_at,omitempty"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
}

// OperationList is the answer of GET /v1/operations: newest first.
type OperationList struct {
	Operations []Operation `json:"operations"`
}
