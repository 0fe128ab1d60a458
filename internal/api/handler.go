package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/internal/router"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// MaxBatch is the most tasks one POST /v1/tasks:batch may carry.
const MaxBatch = apiv1.MaxBatch

// Options configures the handler.
type Options struct {
	MaxPayloadBytes int                     // default task.DefaultMaxPayloadBytes
	Extra           map[string]http.Handler // more routes, by ServeMux pattern (GET /metrics …)
	Logger          *slog.Logger
}

// View converts a stored task to its JSON view.
func View(t *task.Task) apiv1.Task {
	return apiv1.Task{ID: t.ID, Topic: t.Topic, Key: t.Key, DueAt: t.DueAt.UTC(), Payload: json.RawMessage(t.Payload),
		Target: t.Target, MaxAttempts: t.MaxAttempts, Status: t.Status.String(), Attempts: t.Attempts,
		CreatedAt: t.CreatedAt.UTC(), LastError: t.LastError}
}

type handler struct {
	svc  Service
	opts Options
	log  *slog.Logger
}

// NewHandler serves API v1 over svc.
func NewHandler(svc Service, opts Options) http.Handler {
	if opts.MaxPayloadBytes <= 0 {
		opts.MaxPayloadBytes = task.DefaultMaxPayloadBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	h := &handler{svc: svc, opts: opts, log: opts.Logger}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/tasks", h.submit)
	mux.HandleFunc("POST /v1/tasks:batch", h.batch)
	// A wildcard cannot share its segment with a literal, so "{id}:requeue"
	// is one segment split on the colon.
	mux.HandleFunc("POST /v1/tasks/{idop}", h.postTaskOp)
	mux.HandleFunc("GET /v1/tasks/{id}", h.get)
	mux.HandleFunc("DELETE /v1/tasks/{id}", h.cancel)
	mux.HandleFunc("GET /v1/tasks", h.list)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		// Any failure means "not ready" here, a store that does not answer
		// included: a load balancer only needs to know to look elsewhere.
		if err := svc.Ready(r.Context()); err != nil {
			h.fail(w, r, &httpError{status: http.StatusServiceUnavailable, code: apiv1.CodeUnavailable, message: "not ready: " + err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
	for pattern, eh := range opts.Extra {
		mux.Handle(pattern, eh)
	}
	return routed{mux: mux, log: opts.Logger}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func (h *handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	writeError(w, r, h.log, err)
}

// readBody reads a JSON body of at most limit bytes into v, rejecting
// unknown fields; errors name the field where the decoder can tell.
func readBody(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return &httpError{status: http.StatusRequestEntityTooLarge, code: apiv1.CodeTooLarge, field: "payload",
				message: fmt.Sprintf("request body exceeds %d bytes", limit)}
		}
		return badRequest("", "reading body: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		var se *json.SyntaxError
		switch {
		case errors.As(err, &te):
			return badRequest(te.Field, "want a %s, got a JSON %s", te.Type, te.Value)
		case errors.As(err, &se):
			return badRequest("", "malformed JSON: %v", err)
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			f := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
			return badRequest(f, "unknown field")
		case errors.Is(err, io.EOF):
			return badRequest("", "empty body; want a JSON object")
		default:
			return badRequest("", "malformed JSON: %v", err)
		}
	}
	if dec.More() {
		return badRequest("", "trailing data after the JSON object")
	}
	return nil
}

// spec converts a submitted task; the engine validates the values.
func spec(in apiv1.TaskRequest) (task.Spec, error) {
	s := task.Spec{Topic: in.Topic, Key: in.Key, Payload: in.Payload, Target: in.Target, MaxAttempts: in.MaxAttempts}
	if in.DueAt != "" {
		t, err := time.Parse(time.RFC3339Nano, in.DueAt)
		if err != nil {
			return s, &task.FieldError{Field: "due_at", Message: fmt.Sprintf("%q is not an RFC 3339 time such as 2026-11-23T18:00:00Z", in.DueAt)}
		}
		s.DueAt = &t
	}
	if in.Delay != "" {
		d, err := time.ParseDuration(in.Delay)
		if err != nil {
			return s, &task.FieldError{Field: "delay", Message: fmt.Sprintf("%q is not a duration such as 30s or 1h30m", in.Delay)}
		}
		s.Delay = &d
	}
	return s, nil
}

func (h *handler) envelope() int64 { return int64(h.opts.MaxPayloadBytes) + 64<<10 }

func (h *handler) submit(w http.ResponseWriter, r *http.Request) {
	var in apiv1.TaskRequest
	if err := readBody(w, r, h.envelope(), &in); err != nil {
		h.fail(w, r, err)
		return
	}
	s, err := spec(in)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	res, err := h.svc.Submit(r.Context(), []task.Spec{s})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if res[0].Err != nil {
		h.fail(w, r, res[0].Err)
		return
	}
	code := http.StatusCreated
	if res[0].Existing {
		code = http.StatusOK
	}
	writeJSON(w, code, View(res[0].Task))
}

// itemError is the error of one task of a batch, in the same terms as a
// whole answer's.
func (h *handler) itemError(r *http.Request, err error) *apiv1.ErrorDetail {
	_, d, internal := classify(err)
	if internal {
		h.log.Error("api batch item failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	return &d
}

func (h *handler) batch(w http.ResponseWriter, r *http.Request) {
	var in apiv1.BatchRequest
	if err := readBody(w, r, int64(MaxBatch)*h.envelope(), &in); err != nil {
		h.fail(w, r, err)
		return
	}
	if len(in.Tasks) == 0 {
		h.fail(w, r, badRequest("tasks", "is empty"))
		return
	}
	if len(in.Tasks) > MaxBatch {
		h.fail(w, r, badRequest("tasks", "has %d tasks; at most %d", len(in.Tasks), MaxBatch))
		return
	}
	items := make([]apiv1.BatchItem, len(in.Tasks))
	var specs []task.Spec
	var pos []int
	for i, raw := range in.Tasks {
		var ti apiv1.TaskRequest
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ti); err != nil {
			items[i].Error = h.itemError(r, badRequest(fmt.Sprintf("tasks[%d]", i), "malformed task: %v", err))
			continue
		}
		s, err := spec(ti)
		if err != nil {
			items[i].Error = h.itemError(r, err)
			continue
		}
		specs = append(specs, s)
		pos = append(pos, i)
	}
	if len(specs) > 0 {
		res, err := h.svc.Submit(r.Context(), specs)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		for j, rr := range res {
			i := pos[j]
			if rr.Err != nil {
				items[i].Error = h.itemError(r, rr.Err)
				continue
			}
			v := View(rr.Task)
			items[i].Task = &v
		}
	}
	writeJSON(w, http.StatusOK, apiv1.BatchResponse{Tasks: items})
}

func (h *handler) postTaskOp(w http.ResponseWriter, r *http.Request) {
	id, op, ok := strings.Cut(r.PathValue("idop"), ":")
	if !ok || op != "requeue" {
		h.fail(w, r, notFound("no such endpoint; POST /v1/tasks/{id}:requeue"))
		return
	}
	t, err := h.svc.Requeue(r.Context(), id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, View(t))
}

func (h *handler) get(w http.ResponseWriter, r *http.Request) {
	t, err := h.svc.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, View(t))
}

func (h *handler) cancel(w http.ResponseWriter, r *http.Request) {
	t, err := h.svc.Cancel(r.Context(), r.PathValue("id"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, View(t))
}

func (h *handler) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for k := range q {
		switch k {
		case "topic", "status", "limit", "cursor":
		default:
			h.fail(w, r, badRequest(k, "unknown query parameter (want topic, status, limit, cursor)"))
			return
		}
	}
	f := store.ListFilter{Topic: q.Get("topic"), Limit: 100}
	if f.Topic != "" {
		if err := task.ValidateTopic(f.Topic); err != nil {
			h.fail(w, r, err)
			return
		}
	}
	if s := q.Get("status"); s != "" {
		st, err := task.ParseStatus(s)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		f.Status = &st
	}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 1000 {
			h.fail(w, r, badRequest("limit", "%q is not a number from 1 to 1000", l))
			return
		}
		f.Limit = n
	}
	if c := q.Get("cursor"); c != "" {
		if _, err := router.ParseID(c); err != nil {
			h.fail(w, r, badRequest("cursor", "not a cursor from a previous page: %v", err))
			return
		}
		f.After = c
	}
	ts, err := h.svc.List(r.Context(), f)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := apiv1.ListPage{Tasks: make([]apiv1.Task, len(ts))}
	for i, t := range ts {
		out.Tasks[i] = View(t)
	}
	if len(ts) == f.Limit {
		out.NextCursor = ts[len(ts)-1].ID
	}
	writeJSON(w, http.StatusOK, out)
}
