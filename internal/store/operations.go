package store

import (
	"errors"
	"time"

	"github.com/ontimehq/ontime/internal/task"
)

// Bulk operations (POST /v1/operations): one change — cancel, requeue,
// reschedule, delete — applied to every task a filter matches, walked
// table by table in small transactions. The operation's record is a row in
// the first database (sqlstore's ontime_operations); its progress is a row
// per task table in that table's database, written in the same transaction
// as the page it records, so a page is applied exactly once whatever
// happens to the process (internal/operation runs them).

// ErrOperationNotFound: no operation has this ID.
var ErrOperationNotFound = errors.New("operation not found")

// OpAction is what an operation does to each matching task.
type OpAction string

const (
	// OpCancel cancels pending and claimed tasks, as DELETE /v1/tasks/{id}.
	OpCancel OpAction = "cancel"
	// OpRequeue moves dead tasks back to pending, attempts reset, as
	// POST /v1/tasks/{id}:requeue. A dead task whose key a live task holds
	// now is passed over.
	OpRequeue OpAction = "requeue"
	// OpReschedule moves the due time of pending tasks: to DueAt, or by
	// Shift.
	OpReschedule OpAction = "reschedule"
	// OpDelete deletes tasks that are pending or final (claimed and running
	// ones are being delivered: cancel those).
	OpDelete OpAction = "delete"
)

// Eligible are the statuses action changes; a matching task in another
// status is counted as matched, not changed.
func (a OpAction) Eligible() []task.Status {
	switch a {
	case OpCancel:
		return []task.Status{task.StatusPending, task.StatusClaimed}
	case OpRequeue:
		return []task.Status{task.StatusDead}
	case OpReschedule:
		return []task.Status{task.StatusPending}
	case OpDelete:
		return []task.Status{task.StatusPending, task.StatusDone, task.StatusDead, task.StatusCancelled}
	}
	return nil
}

// OpFilter selects tasks. Zero fields do not filter; a filter must have
// at least one set (operation.Validate).
type OpFilter struct {
	Topic    string
	Statuses []task.Status
	// KeyPrefix: tasks whose key starts with it (byte-wise).
	KeyPrefix string
	// DueAfter, DueBefore: tasks due in [DueAfter, DueBefore).
	DueAfter, DueBefore time.Time
	// ErrorContains: tasks whose last_error contains it (case-sensitive).
	ErrorContains string
}

// OpState is where an operation is.
type OpState string

const (
	OpPending OpState = "pending" // stored, not started yet
	OpRunning OpState = "running"
	OpDone    OpState = "done"
	OpFailed  OpState = "failed" // Error says why; what it changed stays changed
)

// Operation is a stored bulk operation and its progress.
type Operation struct {
	ID     string
	Action OpAction
	Filter OpFilter
	// DueAt (reschedule to an instant, or requeue's due time: zero means
	// when the page runs) or Shift (reschedule by a duration).
	DueAt time.Time
	Shift time.Duration
	// DryRun counts what would change and changes nothing.
	DryRun bool

	State OpState
	Error string
	// Matched: tasks the filter selected so far; Changed: those the action
	// changed (a dry run: would change).
	Matched, Changed int64
	// TablesDone of Tables task tables (databases × tables) are walked.
	TablesDone, Tables int
	// Cursor is where the walk is: "DB/TABLE/ID" of the last page written
	// ("" before the first).
	Cursor string

	// Owner and LeaseUntil: the node running it, until when (a lease on
	// the row: another node takes over once it has run out).
	Owner      string
	LeaseUntil time.Time

	CreatedAt, StartedAt, FinishedAt time.Time
}

// OpPage is one page's outcome (sqlstore's OperationPage).
type OpPage struct {
	Matched, Changed int64
	// Cursor is the last ID of the page; Done: the table has no more rows.
	Cursor string
	Done   bool
}
