package submit

import (
	"errors"

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
	Err      error
}
