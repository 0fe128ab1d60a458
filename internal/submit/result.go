package submit

import (
	"errors"
	"time"

	"github.com/ontimehq/ontime/internal/task"
)

// ErrNotReady is returned while the node is not started or is stopping.
// The HTTP layer answers it with 503.
var ErrNotReady = errors.New("node not ready")

// Result is the outcome of one submitted task: the stored task, or the
// validation error of its spec (nothing of it was written).
type Result struct {
	Task     *task.Task
	Existing bool // a task with the same topic and key existed; nothing was written
	// HeldUntil, when Existing and Task is final: the key is held from a
	// new task until then (retention.key_hold after Task ended). A submit
	// with Replace never meets a final task: it makes a new one.
	HeldUntil time.Time
	Err       error
}
