package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/internal/operation"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// OperationService is what the bulk operation routes need
// (*operation.Service).
type OperationService interface {
	Create(ctx context.Context, sp operation.Spec) (*store.Operation, error)
	Get(ctx context.Context, id string) (*store.Operation, error)
	List(ctx context.Context, limit int) ([]*store.Operation, error)
}

// opsHandler serves /v1/operations….
type opsHandler struct {
	h   *handler
	svc OperationService
}

// OperationView converts a stored operation to its JSON view.
func OperationView(op *store.Operation) apiv1.Operation {
	f := op.Filter
	v := apiv1.Operation{ID: op.ID, Action: string(op.Action), DryRun: op.DryRun, Status: string(op.State), Matched: op.Matched, Changed: op.Changed,
		TablesDone: op.TablesDone, Tables: op.Tables, Cursor: op.Cursor, Error: op.Error, Owner: op.Owner, CreatedAt: op.CreatedAt.UTC(),
		Filter: apiv1.OperationFilter{Topic: f.Topic, KeyPrefix: f.KeyPrefix, ErrorContains: f.ErrorContains}}
	for _, st := range f.Statuses {
		v.Filter.Status = append(v.Filter.Status, st.String())
	}
	if !f.DueAfter.IsZero() {
		v.Filter.DueAfter = f.DueAfter.UTC().Format(time.RFC3339Nano)
	}
	if !f.DueBefore.IsZero() {
		v.Filter.DueBefore = f.DueBefore.UTC().Format(time.RFC3339Nano)
	}
	at := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		u := t.UTC()
		return &u
	}
	v.DueAt, v.StartedAt, v.FinishedAt = at(op.DueAt), at(op.StartedAt), at(op.FinishedAt)
	if op.Shift != 0 {
		v.Shift = op.Shift.String()
	}
	return v
}

func (o *opsHandler) fail(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, store.ErrOperationNotFound) {
		err = &httpError{status: http.StatusNotFound, code: apiv1.CodeNotFound, field: "id", message: "no operation has this id"}
	}
	o.h.fail(w, r, err)
}

// OperationSpec parses a request into the spec the service judges; errors
// name the field.
func OperationSpec(req apiv1.OperationRequest) (operation.Spec, error) {
	sp := operation.Spec{Action: req.Action, DryRun: req.DryRun,
		Filter: store.OpFilter{Topic: req.Filter.Topic, KeyPrefix: req.Filter.KeyPrefix, ErrorContains: req.Filter.ErrorContains}}
	for _, name := range req.Filter.Status {
		st, err := task.ParseStatus(name)
		if err != nil {
			return sp, badRequest("filter.status", "unknown status %q (want pending, claimed, running, done, dead, cancelled)", name)
		}
		sp.Filter.Statuses = append(sp.Filter.Statuses, st)
	}
	tm := func(field, s string, dst *time.Time) error {
		if s == "" {
			return nil
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return badRequest(field, "%q is not an RFC 3339 time", s)
		}
		*dst = t
		return nil
	}
	dur := func(field, s string, dst *time.Duration) error {
		if s == "" {
			return nil
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return badRequest(field, "%q is not a Go duration (30s, 1h30m)", s)
		}
		*dst = d
		return nil
	}
	for _, err := range []error{
		tm("filter.due_after", req.Filter.DueAfter, &sp.Filter.DueAfter),
		tm("filter.due_before", req.Filter.DueBefore, &sp.Filter.DueBefore),
		tm("due_at", req.DueAt, &sp.DueAt),
		dur("delay", req.Delay, &sp.Delay),
		dur("shift", req.Shift, &sp.Shift),
	} {
		if err != nil {
			return sp, err
		}
	}
	return sp, nil
}

func (o *opsHandler) create(w http.ResponseWriter, r *http.Request) {
	// The filter decoded apart, so that an unknown field in it is named
	// filter.NAME.
	var body struct {
		Action string          `json:"action"`
		Filter json.RawMessage `json:"filter"`
		DueAt  string          `json:"due_at"`
		Delay  string          `json:"delay"`
		Shift  string          `json:"shift"`
		DryRun bool            `json:"dry_run"`
	}
	if err := o.h.decodeJSON(w, r, 64<<10, &body); err != nil {
		o.fail(w, r, err)
		return
	}
	req := apiv1.OperationRequest{Action: body.Action, DueAt: body.DueAt, Delay: body.Delay, Shift: body.Shift, DryRun: body.DryRun}
	if len(body.Filter) > 0 && string(body.Filter) != "null" {
		if err := strictDecode(body.Filter, &req.Filter, "filter."); err != nil {
			o.fail(w, r, err)
			return
		}
	}
	sp, err := OperationSpec(req)
	if err != nil {
		o.fail(w, r, err)
		return
	}
	op, err := o.svc.Create(r.Context(), sp)
	if err != nil {
		o.fail(w, r, err)
		return
	}
	noteTarget(w, op.ID)
	writeJSON(w, http.StatusAccepted, OperationView(op))
}

func (o *opsHandler) get(w http.ResponseWriter, r *http.Request) {
	op, err := o.svc.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		o.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, OperationView(op))
}

func (o *opsHandler) list(w http.ResponseWriter, r *http.Request) {
	limit := 0
	if r.URL.RawQuery != "" {
		q, err := parseQuery(r.URL.RawQuery)
		if err != nil {
			o.fail(w, r, err)
			return
		}
		for k, v := range q {
			if k != "limit" {
				o.fail(w, r, badRequest(k, "unknown query parameter (GET /v1/operations takes limit)"))
				return
			}
			n, err := strconv.Atoi(v[0])
			if err != nil || n < 1 || n > operation.MaxListLimit {
				o.fail(w, r, badRequest("limit", "%q is not a number in 1..%d", v[0], operation.MaxListLimit))
				return
			}
			limit = n
		}
	}
	ops, err := o.svc.List(r.Context(), limit)
	if err != nil {
		o.fail(w, r, err)
		return
	}
	out := apiv1.OperationList{Operations: make([]apiv1.Operation, len(ops))}
	for i, op := range ops {
		out.Operations[i] = OperationView(op)
	}
	writeJSON(w, http.StatusOK, out)
}
