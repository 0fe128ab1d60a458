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

	"github.com/ontimehq/ontime/internal/router"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// MaxBatch is the most tasks one POST /v1/tasks:batch may carry.
const MaxBatch = 1000

// Options configures the handler.
type Options struct {
	MaxPayloadBytes int                     // default task.DefaultMaxPayloadBytes
	Extra           map[string]http.Handler // more routes, by ServeMux pattern (GET /metrics …)
	Logger          *slog.Logger
}

// TaskIn is a task as submitted.
type TaskIn struct {
	Topic       string          `json:"topic"`
	Key         string          `json:"key,omitempty"`
	DueAt       string          `json:"due_at,omitempty"` // RFC 3339
	Delay       string          `json:"delay,omitempty"`  // a Go duration: "30s", "1h30m"
	Payload     json.RawMessage `json:"payload,omitempty"`
	Target      string          `json:"target,omitempty"`
	MaxAttempts int             `json:"max_attempts,omitempty"`
}

// TaskOut is a task's view.
type TaskOut struct {
	ID          string          `json:"id"`
	Topic       string          `json:"topic"`
	Key         string          `json:"key,omitempty"`
	DueAt       time.Time       `json:"due_at"`
	Payload     json.RawMessage `json:"payload"`
	Target      string          `json:"target,omitempty"`
	MaxAttempts int             `json:"max_attempts"`
	Status      string          `json:"status"`
	Attempts    int             `json:"attempts"`
	CreatedAt   time.Time       `json:"created_at"`
	LastError   string          `json:"last_error,omitempty"`
}

// ErrorBody is every error answer: {"error": {"field": …, "message": …}}.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail names the field at fault, when one is.
type ErrorDetail struct {
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

// View converts a stored task to its JSON view.
func View(t *task.Task) TaskOut {
	return TaskOut{ID: t.ID, Topic: t.Topic, Key: t.Key, DueAt: t.DueAt.UTC(), Payload: json.RawMessage(t.Payload),
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
	// "tasks:batch" and "{id}:requeue" share the path segment; one route
	// splits on the colon.
	mux.HandleFunc("POST /v1/{op}", h.postTasksOp)
	mux.HandleFunc("POST /v1/tasks/{idop}", h.postTaskOp)
	mux.HandleFunc("GET /v1/tasks/{id}", h.get)
	mux.HandleFunc("DELETE /v1/tasks/{id}", h.cancel)
	mux.HandleFunc("GET /v1/tasks", h.list)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := svc.Ready(r.Context()); err != nil {
			writeJSON(w, http.StatusServiceUnavailable, ErrorBody{Error: ErrorDetail{Message: "not ready: " + err.Error()}})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
	for pattern, eh := range opts.Extra {
		mux.Handle(pattern, eh)
	}
	return mux
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, code int, field, msg string) {
	writeJSON(w, code, ErrorBody{Error: ErrorDetail{Field: field, Message: msg}})
}

// fail maps an engine error to its status code.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	var fe *task.FieldError
	switch {
	case errors.As(err, &fe):
		code := http.StatusBadRequest
		if fe.TooLarge {
			code = http.StatusRequestEntityTooLarge
		}
		writeErr(w, code, fe.Field, fe.Message)
	case errors.Is(err, router.ErrBadID):
		writeErr(w, http.StatusBadRequest, "id", err.Error())
	case errors.Is(err, store.ErrNotFound):
		writeErr(w, http.StatusNotFound, "id", "no task has this id")
	case errors.Is(err, store.ErrConflict):
		writeErr(w, http.StatusConflict, "", err.Error())
	default:
		h.log.Error("api request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		writeErr(w, http.StatusInternalServerError, "", "internal error")
	}
}

// readBody reads a JSON body of at most limit bytes into v, rejecting
// unknown fields; errors name the field where the decoder can tell.
func readBody(w http.ResponseWriter, r *http.Request, limit int64, v any) (code int, field, msg string) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return http.StatusRequestEntityTooLarge, "payload", fmt.Sprintf("request body exceeds %d bytes", limit)
		}
		return http.StatusBadRequest, "", "reading body: " + err.Error()
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		var se *json.SyntaxError
		switch {
		case errors.As(err, &te):
			return http.StatusBadRequest, te.Field, fmt.Sprintf("want a %s, got a JSON %s", te.Type, te.Value)
		case errors.As(err, &se):
			return http.StatusBadRequest, "", "malformed JSON: " + err.Error()
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			f := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
			return http.StatusBadRequest, f, "unknown field"
		case errors.Is(err, io.EOF):
			return http.StatusBadRequest, "", "empty body; want a JSON object"
		default:
			return http.StatusBadRequest, "", "malformed JSON: " + err.Error()
		}
	}
	if dec.More() {
		return http.StatusBadRequest, "", "trailing data after the JSON object"
	}
	return 0, "", ""
}

// spec converts a submitted task; the engine validates the values.
func spec(in TaskIn) (task.Spec, error) {
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
	var in TaskIn
	if code, field, msg := readBody(w, r, h.envelope(), &in); code != 0 {
		writeErr(w, code, field, msg)
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

// BatchIn is the body of POST /v1/tasks:batch.
type BatchIn struct {
	Tasks []json.RawMessage `json:"tasks"`
}

// BatchItem is one answer of a batch: a task view or an error.
type BatchItem struct {
	*TaskOut
	Error *ErrorDetail `json:"error,omitempty"`
}

func (h *handler) postTasksOp(w http.ResponseWriter, r *http.Request) {
	if r.PathValue("op") != "tasks:batch" {
		writeErr(w, http.StatusNotFound, "", "no such endpoint")
		return
	}
	var in BatchIn
	if code, field, msg := readBody(w, r, int64(MaxBatch)*h.envelope(), &in); code != 0 {
		writeErr(w, code, field, msg)
		return
	}
	if len(in.Tasks) == 0 {
		writeErr(w, http.StatusBadRequest, "tasks", "is empty")
		return
	}
	if len(in.Tasks) > MaxBatch {
		writeErr(w, http.StatusBadRequest, "tasks", fmt.Sprintf("has %d tasks; at most %d", len(in.Tasks), MaxBatch))
		return
	}
	items := make([]BatchItem, len(in.Tasks))
	var specs []task.Spec
	var pos []int
	for i, raw := range in.Tasks {
		var ti TaskIn
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ti); err != nil {
			items[i].Error = &ErrorDetail{Field: fmt.Sprintf("tasks[%d]", i), Message: "malformed task: " + err.Error()}
			continue
		}
		s, err := spec(ti)
		if err != nil {
			var fe *task.FieldError
			errors.As(err, &fe)
			items[i].Error = &ErrorDetail{Field: fe.Field, Message: fe.Message}
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
				var fe *task.FieldError
				if errors.As(rr.Err, &fe) {
					items[i].Error = &ErrorDetail{Field: fe.Field, Message: fe.Message}
				} else {
					items[i].Error = &ErrorDetail{Message: rr.Err.Error()}
				}
				continue
			}
			v := View(rr.Task)
			items[i].TaskOut = &v
		}
	}
	writeJSON(w, http.StatusOK, map[string][]BatchItem{"tasks": items})
}

func (h *handler) postTaskOp(w http.ResponseWriter, r *http.Request) {
	id, op, ok := strings.Cut(r.PathValue("idop"), ":")
	if !ok || op != "requeue" {
		writeErr(w, http.StatusNotFound, "", "no such endpoint; POST /v1/tasks/{id}:requeue")
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

// ListOut is a page of tasks.
type ListOut struct {
	Tasks      []TaskOut `json:"tasks"`
	NextCursor string    `json:"next_cursor,omitempty"`
}

func (h *handler) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for k := range q {
		switch k {
		case "topic", "status", "limit", "cursor":
		default:
			writeErr(w, http.StatusBadRequest, k, "unknown query parameter (want topic, status, limit, cursor)")
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
			writeErr(w, http.StatusBadRequest, "limit", fmt.Sprintf("%q is not a number from 1 to 1000", l))
			return
		}
		f.Limit = n
	}
	if c := q.Get("cursor"); c != "" {
		if _, err := router.ParseID(c); err != nil {
			writeErr(w, http.StatusBadRequest, "cursor", "not a cursor from a previous page: "+err.Error())
			return
		}
		f.After = c
	}
	ts, err := h.svc.List(r.Context(), f)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := ListOut{Tasks: make([]TaskOut, len(ts))}
	for i, t := range ts {
		out.Tasks[i] = View(t)
	}
	if len(ts) == f.Limit {
		out.NextCursor = ts[len(ts)-1].ID
	}
	writeJSON(w, http.StatusOK, out)
}
