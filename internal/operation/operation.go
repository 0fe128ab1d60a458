// Package operation runs bulk operations (POST /v1/operations): cancel,
// requeue, reschedule or delete every task a filter matches.
//
// An operation is a row in the store's first database; every node runs an
// executor, and the one that takes the row's lease (a compare-and-set on
// the row, renewed as pages go) runs it, so one node at a time walks it
// and another takes over within the lease once the runner is gone. The
// walk is in pages of a few hundred rows, one small transaction each,
// table by table (sqlstore's OperationPage): millions of rows never lock a
// table, and a page commits together with its cursor, so a runner killed
// at any point leaves every matching row changed exactly once once the
// next runner has finished.
package operation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"

	"github.com/ontimehq/ontime/internal/router"
	"github.com/ontimehq/ontime/internal/startstop"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// Store keeps and applies operations (*sqlstore.Store).
type Store interface {
	CreateOperation(ctx context.Context, op *store.Operation) error
	Operation(ctx context.Context, id string) (*store.Operation, error)
	Operations(ctx context.Context, limit int) ([]*store.Operation, error)
	TakeOperation(ctx context.Context, owner string, now, until time.Time) (*store.Operation, error)
	RenewOperation(ctx context.Context, id, owner string, until time.Time, cursor string) (bool, error)
	EndOperation(ctx context.Context, id, owner string, state store.OpState, why string, now time.Time) (bool, error)
	OperationTables() (databases, tables int)
	OperationPage(ctx context.Context, op *store.Operation, db, table, limit int, now time.Time) (store.OpPage, error)
	DeleteOperations(ctx context.Context, before time.Time) (int64, error)
}

// Spec is an operation as asked for (the API's body, the CLI's flags).
type Spec struct {
	Action string
	Filter store.OpFilter
	// DueAt or Delay: reschedule's new due time (one of them, or Shift),
	// requeue's (optional: now by default).
	DueAt time.Time
	Delay time.Duration
	// Shift moves each task's due time by it (reschedule only).
	Shift  time.Duration
	DryRun bool
}

// Limits of a spec's fields.
const (
	MaxErrorContains = store.MaxErrorBytes
	DefaultPageSize  = 500
	MaxPageSize      = 10000
	DefaultListLimit = 50
	MaxListLimit     = 500
)

func fieldErr(field, format string, args ...any) error {
	return &task.FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// Validate checks sp and makes the operation it asks for at now: an ID,
// its due time made absolute. Errors are *task.FieldError naming the
// field as the API spells it.
func Validate(sp Spec, now time.Time) (*store.Operation, error) {
	op := &store.Operation{Action: store.OpAction(sp.Action), Filter: sp.Filter, DryRun: sp.DryRun, State: store.OpPending,
		CreatedAt: now.Truncate(time.Microsecond)}
	switch op.Action {
	case store.OpCancel, store.OpRequeue, store.OpReschedule, store.OpDelete:
	case "":
		return nil, fieldErr("action", "is required: one of cancel, requeue, reschedule, delete")
	default:
		return nil, fieldErr("action", "%q is not one of cancel, requeue, reschedule, delete", sp.Action)
	}
	f := sp.Filter
	if f.Topic == "" && len(f.Statuses) == 0 && f.KeyPrefix == "" && f.DueAfter.IsZero() && f.DueBefore.IsZero() && f.ErrorContains == "" {
		return nil, fieldErr("filter", "is required: at least one of topic, status, key_prefix, due_after, due_before, error_contains (an operation never applies to every task by default)")
	}
	if f.Topic != "" {
		if err := task.ValidateTopic(f.Topic); err != nil {
			var fe *task.FieldError
			if errors.As(err, &fe) {
				return nil, fieldErr("filter.topic", "%s", fe.Message)
			}
			return nil, err
		}
	}
	for _, st := range f.Statuses {
		if st < task.StatusPending || st > task.StatusCancelled {
			return nil, fieldErr("filter.status", "%d is not a status", int(st))
		}
	}
	if len(f.KeyPrefix) > task.MaxKeyLen || !utf8.ValidString(f.KeyPrefix) {
		return nil, fieldErr("filter.key_prefix", "must be valid UTF-8 of at most %d bytes", task.MaxKeyLen)
	}
	if !f.DueAfter.IsZero() && !f.DueBefore.IsZero() && !f.DueAfter.Before(f.DueBefore) {
		return nil, fieldErr("filter.due_before", "%s is not after filter.due_after %s", f.DueBefore.Format(time.RFC3339Nano), f.DueAfter.Format(time.RFC3339Nano))
	}
	if len(f.ErrorContains) > MaxErrorContains || !utf8.ValidString(f.ErrorContains) {
		return nil, fieldErr("filter.error_contains", "must be valid UTF-8 of at most %d bytes", MaxErrorContains)
	}
	when := 0
	for _, set := range []bool{!sp.DueAt.IsZero(), sp.Delay != 0, sp.Shift != 0} {
		if set {
			when++
		}
	}
	switch op.Action {
	case store.OpReschedule:
		if when != 1 {
			return nil, fieldErr("due_at", "reschedule takes exactly one of due_at, delay, shift")
		}
	case store.OpRequeue:
		if sp.Shift != 0 {
			return nil, fieldErr("shift", "only reschedule takes a shift; requeue takes due_at or delay")
		}
		if when > 1 {
			return nil, fieldErr("due_at", "requeue takes at most one of due_at, delay")
		}
	default:
		switch {
		case !sp.DueAt.IsZero():
			return nil, fieldErr("due_at", "%s takes no due time (only reschedule and requeue do)", op.Action)
		case sp.Delay != 0:
			return nil, fieldErr("delay", "%s takes no delay (only reschedule and requeue do)", op.Action)
		case sp.Shift != 0:
			return nil, fieldErr("shift", "%s takes no shift (only reschedule does)", op.Action)
		}
	}
	switch {
	case sp.Delay < 0 || sp.Delay > task.MaxHorizon:
		return nil, fieldErr("delay", "%s is out of range 0..%s", sp.Delay, task.MaxHorizon)
	case sp.Shift < -task.MaxHorizon || sp.Shift > task.MaxHorizon:
		return nil, fieldErr("shift", "%s is out of range ±%s", sp.Shift, task.MaxHorizon)
	case !sp.DueAt.IsZero() && sp.DueAt.After(now.Add(task.MaxHorizon)):
		return nil, fieldErr("due_at", "%s is more than %s ahead", sp.DueAt.Format(time.RFC3339), task.MaxHorizon)
	}
	switch {
	case !sp.DueAt.IsZero():
		op.DueAt = sp.DueAt.Truncate(time.Microsecond)
	case sp.Delay > 0:
		op.DueAt = now.Add(sp.Delay).Truncate(time.Microsecond)
	}
	op.Shift = sp.Shift.Truncate(time.Microsecond)
	if op.Action == store.OpReschedule && op.Shift == 0 && op.DueAt.IsZero() {
		return nil, fieldErr("shift", "%s rounds to 0 (the store keeps microseconds)", sp.Shift)
	}
	id, _ := router.NewID(now, 0, false)
	op.ID = id
	return op, nil
}

// Config configures a Service. Store and NodeID are required.
type Config struct {
	Store  Store
	NodeID string
	// PageSize is the rows one transaction walks (operations.page_size);
	// default 500.
	PageSize int
	// PagePause is a rest between pages (operations.page_pause): room for
	// the delivery path's writes on a busy store; default none.
	PagePause time.Duration
	// LeaseTTL is how long a runner holds an operation without renewing
	// it: another node takes over that long after it is gone. Default 10s.
	LeaseTTL time.Duration
	// Poll is how often an idle executor looks for work; default 1s.
	Poll time.Duration
	// Keep is how long a finished operation stays listed (retention.done):
	// an idle executor deletes older ones. 0: for ever.
	Keep   time.Duration
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Service creates, shows and runs operations.
type Service struct {
	startstop.Base
	cfg  Config
	st   Store
	log  *slog.Logger
	wake chan struct{}
}

// New checks cfg and builds the service.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil || cfg.NodeID == "" {
		return nil, errors.New("operation: Store and NodeID are required")
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = DefaultPageSize
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 10 * time.Second
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Service{cfg: cfg, st: cfg.Store, log: cfg.Logger, wake: make(chan struct{}, 1)}, nil
}

// Create validates sp and stores the operation; an executor (this node's,
// woken now, or another's) runs it.
func (s *Service) Create(ctx context.Context, sp Spec) (*store.Operation, error) {
	op, err := Validate(sp, s.cfg.Now())
	if err != nil {
		return nil, err
	}
	if err := s.st.CreateOperation(ctx, op); err != nil {
		return nil, err
	}
	s.Wake()
	return s.st.Operation(ctx, op.ID)
}

// Get returns one operation with its progress.
func (s *Service) Get(ctx context.Context, id string) (*store.Operation, error) {
	if _, err := router.ParseID(id); err != nil {
		return nil, fmt.Errorf("%w: %s", store.ErrOperationNotFound, id)
	}
	return s.st.Operation(ctx, id)
}

// List returns the newest operations first.
func (s *Service) List(ctx context.Context, limit int) ([]*store.Operation, error) {
	if limit == 0 {
		limit = DefaultListLimit
	}
	if limit < 1 || limit > MaxListLimit {
		return nil, fieldErr("limit", "%d is out of range 1..%d", limit, MaxListLimit)
	}
	return s.st.Operations(ctx, limit)
}

// Wake makes the executor look for work now.
func (s *Service) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Start runs the executor until Stop.
func (s *Service) Start(ctx context.Context) error { return s.Go(ctx, s.loop) }

func (s *Service) loop(ctx context.Context) {
	var cleaned time.Time
	for ctx.Err() == nil {
		if s.RunOnce(ctx) {
			continue // there may be more
		}
		// Old operations go once a minute at most: a small table, but a
		// statement per node per poll would be a steady load for nothing.
		if now := s.cfg.Now(); s.cfg.Keep > 0 && now.Sub(cleaned) >= time.Minute {
			cleaned = now
			if _, err := s.st.DeleteOperations(ctx, s.cfg.Now().Add(-s.cfg.Keep)); err != nil && ctx.Err() == nil {
				s.log.Warn("operations: cannot delete old operations", "err", err)
			}
		}
		t := time.NewTimer(s.cfg.Poll)
		select {
		case <-ctx.Done():
		case <-s.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// RunOnce takes one operation whose lease is free and runs it to its end
// (or until ctx ends, or the lease is lost); false when there was none.
func (s *Service) RunOnce(ctx context.Context) bool {
	now := s.cfg.Now()
	op, err := s.st.TakeOperation(ctx, s.cfg.NodeID, now, now.Add(s.cfg.LeaseTTL))
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("operations: cannot look for work", "err", err)
		}
		return false
	}
	if op == nil {
		return false
	}
	s.run(ctx, op)
	return true
}

// run walks every table of every database in order, page by page.
func (s *Service) run(ctx context.Context, op *store.Operation) {
	log := s.log.With("operation", op.ID, "action", op.Action, "dry_run", op.DryRun)
	log.Info("operation running")
	dbs, tables := s.st.OperationTables()
	renewed := s.cfg.Now()
	var cursor string
	for db := range dbs {
		for t := range tables {
			for {
				if ctx.Err() != nil {
					return // stopping: the lease runs out, or this node takes it again
				}
				pg, err := s.page(ctx, op, db, t)
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					log.Error("operation failed", "err", err)
					s.end(ctx, op, store.OpFailed, err.Error())
					return
				}
				cursor = fmt.Sprintf("%d/%d/%s", db, t, pg.Cursor)
				if now := s.cfg.Now(); now.Sub(renewed) >= s.cfg.LeaseTTL/3 {
					ok, err := s.st.RenewOperation(ctx, op.ID, s.cfg.NodeID, now.Add(s.cfg.LeaseTTL), cursor)
					if err == nil && !ok {
						log.Warn("operation: lease lost to another node; stopping here")
						return
					}
					if err == nil {
						renewed = now
					}
				}
				if pg.Done {
					break
				}
				if s.cfg.PagePause > 0 {
					startstop.Sleep(ctx, s.cfg.PagePause)
				}
			}
		}
	}
	_, _ = s.st.RenewOperation(ctx, op.ID, s.cfg.NodeID, s.cfg.Now().Add(s.cfg.LeaseTTL), cursor)
	s.end(ctx, op, store.OpDone, "")
	if cur, err := s.st.Operation(ctx, op.ID); err == nil {
		log.Info("operation done", "matched", cur.Matched, "changed", cur.Changed)
	}
}

// page runs one page, again after transient errors (a store briefly
// unreachable) for up to a lease's time: the page is idempotent.
func (s *Service) page(ctx context.Context, op *store.Operation, db, table int) (store.OpPage, error) {
	deadline := s.cfg.Now().Add(s.cfg.LeaseTTL)
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		pg, err := s.st.OperationPage(ctx, op, db, table, s.cfg.PageSize, s.cfg.Now())
		if err == nil || !errors.Is(err, store.ErrUnavailable) || s.cfg.Now().After(deadline) || ctx.Err() != nil {
			return pg, err
		}
		startstop.Sleep(ctx, wait)
	}
}

func (s *Service) end(ctx context.Context, op *store.Operation, state store.OpState, why string) {
	if _, err := s.st.EndOperation(ctx, op.ID, s.cfg.NodeID, state, why, s.cfg.Now()); err != nil {
		s.log.Warn("operation: cannot record its end", "operation", op.ID, "err", err)
	}
}
