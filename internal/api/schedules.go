package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/internal/schedule"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// ScheduleService is what the schedule routes need (*schedule.Service).
type ScheduleService interface {
	Create(ctx context.Context, d store.ScheduleDef) (store.Schedule, error)
	Put(ctx context.Context, d store.ScheduleDef) (store.Schedule, bool, error)
	Get(ctx context.Context, name string) (store.Schedule, error)
	List(ctx context.Context) ([]store.Schedule, error)
	Delete(ctx context.Context, name string) (store.Schedule, error)
	Pause(ctx context.Context, name string) (store.Schedule, error)
	Resume(ctx context.Context, name string) (store.Schedule, error)
	Trigger(ctx context.Context, name string) (*task.Task, bool, error)
	NextFire(r store.Schedule) time.Time
}

// scheduleHandler serves /v1/schedules… over svc.
type scheduleHandler struct {
	svc ScheduleService
	h   *handler
}

// ScheduleView converts a stored schedule to its JSON view.
func ScheduleView(r store.Schedule, next time.Time) apiv1.Schedule {
	v := apiv1.Schedule{Name: r.Name, Cron: r.Cron, TimeZone: r.TimeZone, Misfire: string(r.Misfire), Paused: r.Paused,
		Task: apiv1.ScheduleTask{Topic: r.Task.Topic, Payload: json.RawMessage(r.Task.Payload), Target: r.Task.Target,
			MaxAttempts: r.Task.MaxAttempts},
		ScheduledUntil: r.Cursor.UTC(), CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC()}
	if !next.IsZero() {
		n := next.UTC()
		v.NextFireAt = &n
	}
	return v
}

func (s *scheduleHandler) view(r store.Schedule) apiv1.Schedule {
	return ScheduleView(r, s.svc.NextFire(r))
}

// fail answers err; the schedule errors get their own words here, since
// the shared classification speaks of tasks.
func (s *scheduleHandler) fail(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, store.ErrScheduleNotFound):
		err = &httpError{status: http.StatusNotFound, code: apiv1.CodeNotFound, field: "name", message: "no schedule has this name"}
	case errors.Is(err, store.ErrScheduleExists):
		err = &httpError{status: http.StatusConflict, code: apiv1.CodeConflict, field: "name",
			message: "a schedule with this name exists; PUT /v1/schedules/{name} replaces it"}
	}
	s.h.fail(w, r, err)
}

// scheduleBody is a ScheduleRequest with its task left raw, so that errors
// inside it can be named "task.…".
type scheduleBody struct {
	Name     string          `json:"name"`
	Cron     string          `json:"cron"`
	TimeZone string          `json:"time_zone"`
	Task     json.RawMessage `json:"task"`
	Misfire  string          `json:"misfire"`
	Paused   bool            `json:"paused"`
}

// strictDecode decodes raw into v, rejecting unknown fields; errors name
// the field, under prefix.
func strictDecode(raw []byte, v any, prefix string) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		return nil
	}
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &te):
		field := prefix + te.Field
		if te.Field == "" {
			field = strings.TrimSuffix(prefix, ".")
		}
		return badRequest(field, "want a %s, got a JSON %s", te.Type, te.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		f := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return badRequest(prefix+f, "unknown field")
	default:
		return badRequest(strings.TrimSuffix(prefix, "."), "malformed JSON: %v", err)
	}
}

// readSchedule reads a schedule body: one JSON object under the single
// task's byte limit, nothing after it, UTF-8 throughout.
func (s *scheduleHandler) readSchedule(w http.ResponseWriter, r *http.Request) (store.ScheduleDef, error) {
	raw, err := s.h.readJSON(w, r, s.h.taskLimit(), "task.payload")
	if err != nil {
		return store.ScheduleDef{}, err
	}
	if err := checkUTF8(raw); err != nil {
		// Name the field inside the task when the bad bytes are there.
		var top map[string]json.RawMessage
		if json.Unmarshal(raw, &top) == nil && !utf8.Valid(top["task"]) {
			var he *httpError
			if inner := checkUTF8(top["task"]); errors.As(inner, &he) && he.field != "" {
				he.field = "task." + he.field
				return store.ScheduleDef{}, he
			}
		}
		return store.ScheduleDef{}, err
	}
	var b scheduleBody
	if err := strictDecode(raw, &b, ""); err != nil {
		return store.ScheduleDef{}, err
	}
	var t apiv1.ScheduleTask
	if len(b.Task) > 0 && !bytes.Equal(b.Task, []byte("null")) {
		if err := strictDecode(b.Task, &t, "task."); err != nil {
			return store.ScheduleDef{}, err
		}
	}
	return store.ScheduleDef{Name: b.Name, Cron: b.Cron, TimeZone: b.TimeZone, Misfire: store.Misfire(b.Misfire), Paused: b.Paused,
		Task: store.ScheduleTask{Topic: t.Topic, Payload: t.Payload, Target: t.Target, MaxAttempts: t.MaxAttempts}}, nil
}

func (s *scheduleHandler) create(w http.ResponseWriter, r *http.Request) {
	d, err := s.readSchedule(w, r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	noteTarget(w, d.Name) // the audit's target is in the body
	rec, err := s.svc.Create(r.Context(), d)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, s.view(rec))
}

func (s *scheduleHandler) put(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := schedule.ValidateName(name); err != nil {
		s.fail(w, r, err)
		return
	}
	d, err := s.readSchedule(w, r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	switch d.Name {
	case "":
		d.Name = name
	case name:
	default:
		s.fail(w, r, badRequest("name", "%q differs from the name in the path, %q", d.Name, name))
		return
	}
	rec, created, err := s.svc.Put(r.Context(), d)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	code := http.StatusOK
	if created {
		code = http.StatusCreated
	}
	writeJSON(w, code, s.view(rec))
}

func (s *scheduleHandler) get(w http.ResponseWriter, r *http.Request) {
	rec, err := s.svc.Get(r.Context(), r.PathValue("name"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.view(rec))
}

func (s *scheduleHandler) list(w http.ResponseWriter, r *http.Request) {
	if r.URL.RawQuery != "" {
		q, _ := parseQuery(r.URL.RawQuery) // routed has checked it parses
		for k := range q {
			s.fail(w, r, badRequest(k, "unknown query parameter (this route takes none)"))
			return
		}
	}
	recs, err := s.svc.List(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := apiv1.ScheduleList{Schedules: make([]apiv1.Schedule, len(recs))}
	for i, rec := range recs {
		out.Schedules[i] = s.view(rec)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *scheduleHandler) delete(w http.ResponseWriter, r *http.Request) {
	rec, err := s.svc.Delete(r.Context(), r.PathValue("name"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	v := ScheduleView(rec, time.Time{}) // deleted: it fires no more
	writeJSON(w, http.StatusOK, v)
}

func (s *scheduleHandler) op(w http.ResponseWriter, r *http.Request) {
	name, op, ok := strings.Cut(r.PathValue("nameop"), ":")
	var rec store.Schedule
	var err error
	switch {
	case !ok:
		s.fail(w, r, notFound("no such endpoint; POST /v1/schedules/{name}:pause, :resume or :trigger"))
		return
	case op == "pause":
		rec, err = s.svc.Pause(r.Context(), name)
	case op == "resume":
		rec, err = s.svc.Resume(r.Context(), name)
	case op == "trigger":
		t, created, err := s.svc.Trigger(r.Context(), name)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		code := http.StatusCreated
		if !created {
			code = http.StatusOK
		}
		writeJSON(w, code, View(t))
		return
	default:
		s.fail(w, r, notFound("no such endpoint; POST /v1/schedules/{name}:pause, :resume or :trigger"))
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.view(rec))
}
