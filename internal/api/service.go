// Package api serves ontime's HTTP API v1 over a Service (the engine); the
// bodies it reads and writes are the types of package apiv1. Status codes
// live here and only here: the engine speaks in errors (task.FieldError,
// store.ErrNotFound, store.ErrConflict, store.ErrUnavailable, router.ErrBadID,
// submit.ErrNotReady) and classify maps them to a status and an apiv1.Code.
package api

import (
	"context"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/submit"
	"github.com/ontimehq/ontime/internal/task"
)

// Service is what the API needs from the engine.
type Service interface {
	// Submit validates and stores tasks; one result per spec, in order. A
	// spec that fails validation gets Err and is not written; the others
	// are. The returned error is for failures of the whole call (store down).
	Submit(ctx context.Context, specs []task.Spec) ([]submit.Result, error)
	Get(ctx context.Context, id string) (*task.Task, error)
	Cancel(ctx context.Context, id string) (*task.Task, error)
	Requeue(ctx context.Context, id string) (*task.Task, error)
	// Purge deletes a final task and returns it as it was.
	Purge(ctx context.Context, id string) (*task.Task, error)
	List(ctx context.Context, f store.ListFilter) ([]*task.Task, error)
	// Ready reports whether the node can serve (store reachable, started).
	Ready(ctx context.Context) error
}
