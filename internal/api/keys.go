package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// KeyService is what the by-key and PATCH routes need from the engine
// (Services.Keys); without it the API serves none of them.
type KeyService interface {
	Update(ctx context.Context, id string, p task.PatchSpec) (*task.Task, error)
	GetByKey(ctx context.Context, topic, key string) (*task.Task, error)
	UpdateByKey(ctx context.Context, topic, key string, p task.PatchSpec) (*task.Task, error)
	CancelByKey(ctx context.Context, topic, key string) (*task.Task, error)
}

// patch answers PATCH /v1/tasks/{id}.
func (h *handler) patch(w http.ResponseWriter, r *http.Request) {
	p, err := h.readPatch(w, r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	t, err := h.keys.Update(r.Context(), r.PathValue("id"), p)
	h.answer(w, r, t, err)
}

// byKey answers a route by key, /v1/topics/{topic}/keys/{key...}, with f's
// task; the 404 of a key no task has names the key.
func (h *handler) byKey(w http.ResponseWriter, r *http.Request, f func(ctx context.Context, topic, key string) (*task.Task, error)) {
	topic, key := r.PathValue("topic"), r.PathValue("key")
	t, err := f(r.Context(), topic, key)
	if errors.Is(err, store.ErrNotFound) {
		err = &httpError{status: http.StatusNotFound, code: apiv1.CodeNotFound, field: "key",
			message: fmt.Sprintf("no task has key %q in topic %s", key, topic)}
	}
	h.answer(w, r, t, err)
}

func (h *handler) getByKey(w http.ResponseWriter, r *http.Request) { h.byKey(w, r, h.keys.GetByKey) }

func (h *handler) cancelByKey(w http.ResponseWriter, r *http.Request) {
	h.byKey(w, r, h.keys.CancelByKey)
}

func (h *handler) patchByKey(w http.ResponseWriter, r *http.Request) {
	h.byKey(w, r, func(ctx context.Context, topic, key string) (*task.Task, error) {
		p, err := h.readPatch(w, r)
		if err != nil {
			return nil, err
		}
		return h.keys.UpdateByKey(ctx, topic, key, p)
	})
}

// scopedKeys is the engine's KeyService under the token's topic scope
// (auth.go): a task of a topic the token may not see is not found.
type scopedKeys struct {
	ks KeyService
	sc scoped
}

func (s scopedKeys) Update(ctx context.Context, id string, p task.PatchSpec) (*task.Task, error) {
	if err := s.sc.visible(ctx, id); err != nil {
		return nil, err
	}
	return s.ks.Update(ctx, id, p)
}

func (s scopedKeys) GetByKey(ctx context.Context, topic, key string) (*task.Task, error) {
	if !allowedTopic(ctx, topic) {
		return nil, store.ErrNotFound
	}
	return s.ks.GetByKey(ctx, topic, key)
}

func (s scopedKeys) UpdateByKey(ctx context.Context, topic, key string, p task.PatchSpec) (*task.Task, error) {
	if !allowedTopic(ctx, topic) {
		return nil, store.ErrNotFound
	}
	return s.ks.UpdateByKey(ctx, topic, key, p)
}

func (s scopedKeys) CancelByKey(ctx context.Context, topic, key string) (*task.Task, error) {
	if !allowedTopic(ctx, topic) {
		return nil, store.ErrNotFound
	}
	return s.ks.CancelByKey(ctx, topic, key)
}

func (h *handler) answer(w http.ResponseWriter, r *http.Request, t *task.Task, err error) {
	h.answerTask(w, r, t, err)
}

// readPatch reads a PATCH body: an object of the patchable fields, under
// the single submit's byte limit; unknown fields (topic and key among
// them: they name the task, they are not changed) are refused.
func (h *handler) readPatch(w http.ResponseWriter, r *http.Request) (task.PatchSpec, error) {
	var p task.PatchSpec
	raw, err := h.readJSON(w, r, h.taskLimit(), "payload")
	if err != nil {
		return p, err
	}
	if err := checkUTF8(raw); err != nil {
		return p, err
	}
	var in apiv1.TaskPatch
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(&in); err != nil {
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &te):
			return p, badRequest(te.Field, "want a %s, got a JSON %s", te.Type, te.Value)
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			f := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
			return p, badRequest(f, "unknown field (a PATCH takes due_at, delay, payload, target, max_attempts, retry)")
		default:
			return p, badRequest("", "malformed JSON: %v", err)
		}
	}
	if in.DueAt != nil {
		t, err := time.Parse(time.RFC3339Nano, *in.DueAt)
		if err != nil {
			return p, &task.FieldError{Field: "due_at", Message: fmt.Sprintf("%q is not an RFC 3339 time such as 2026-11-23T18:00:00Z", *in.DueAt)}
		}
		p.DueAt = &t
	}
	if in.Delay != nil {
		d, err := time.ParseDuration(*in.Delay)
		if err != nil {
			return p, &task.FieldError{Field: "delay", Message: fmt.Sprintf("%q is not a duration such as 30s or 1h30m", *in.Delay)}
		}
		p.Delay = &d
	}
	p.Payload, p.Target, p.MaxAttempts = in.Payload, in.Target, in.MaxAttempts
	if in.Retry != nil {
		r := task.RetrySpec(*in.Retry)
		p.Retry = &r
	}
	return p, nil
}

// listByKey answers GET /v1/tasks?topic=&key=: the one task the key names
// (its live task, else the one that ended last), as a page of at most one
// that the other filters apply to.
func (h *handler) listByKey(w http.ResponseWriter, r *http.Request, f store.ListFilter, key string) {
	if h.keys == nil {
		h.fail(w, r, badRequest("key", "this server does not look tasks up by key"))
		return
	}
	if f.Topic == "" {
		h.fail(w, r, badRequest("topic", "is required with key (a key is unique within its topic)"))
		return
	}
	out := apiv1.ListPage{Tasks: []apiv1.Task{}}
	t, err := h.keys.GetByKey(r.Context(), f.Topic, key)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		h.fail(w, r, err)
		return
	case (f.Status == nil || *f.Status == t.Status) && t.ID > f.After:
		out.Tasks = append(out.Tasks, View(t))
	}
	writeJSON(w, http.StatusOK, out)
}
