package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/internal/scanjob"
	"github.com/ontimehq/ontime/internal/store"
)

// JobService is what the scan-job routes need of the node.
type JobService interface {
	List() []scanjob.Info
	Get(ctx context.Context, name string) (scanjob.Info, error)
	Runs(ctx context.Context, name, item string, limit int) ([]store.JobRun, error)
	Trigger(ctx context.Context, name string) (scanjob.Info, error)
	SetPaused(ctx context.Context, name string, paused bool) (scanjob.Info, error)
}

// jobsHandler serves GET /v1/jobs, GET /v1/jobs/{name}, GET
// /v1/jobs/{name}/runs?item=&limit= and POST /v1/jobs/{name}:trigger,
// :pause, :resume over svc.
type jobsHandler struct {
	svc JobService
	h   *handler
}

func (j *jobsHandler) fail(w http.ResponseWriter, r *http.Request, err error) {
	writeError(w, r, j.h.log, jobError(err))
}

func (j *jobsHandler) list(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r); err != nil {
		j.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apiv1.JobList{Jobs: jobViews(j.svc.List())})
}

func (j *jobsHandler) get(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r); err != nil {
		j.fail(w, r, err)
		return
	}
	v, err := j.svc.Get(r.Context(), r.PathValue("name"))
	if err != nil {
		j.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, jobView(v))
}

func (j *jobsHandler) runs(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r.URL.RawQuery)
	if err != nil {
		j.fail(w, r, err)
		return
	}
	limit := 100
	for k, v := range q {
		switch {
		case k != "item" && k != "limit":
			j.fail(w, r, badRequest(k, "unknown query parameter (want item, limit)"))
			return
		case len(v) > 1:
			j.fail(w, r, badRequest(k, "given %d times; give it once", len(v)))
			return
		case v[0] == "":
			j.fail(w, r, badRequest(k, "is empty; leave the parameter out for no filter"))
			return
		}
	}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 1000 {
			j.fail(w, r, badRequest("limit", "%q is not a number from 1 to 1000", l))
			return
		}
		limit = n
	}
	runs, err := j.svc.Runs(r.Context(), r.PathValue("name"), q.Get("item"), limit)
	if err != nil {
		j.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apiv1.JobRunList{Runs: jobRunViews(runs)})
}

func (j *jobsHandler) op(w http.ResponseWriter, r *http.Request) {
	name, op, _ := strings.Cut(r.PathValue("nameop"), ":")
	var v scanjob.Info
	var err error
	switch op {
	case "trigger":
		v, err = j.svc.Trigger(r.Context(), name)
	case "pause":
		v, err = j.svc.SetPaused(r.Context(), name, true)
	case "resume":
		v, err = j.svc.SetPaused(r.Context(), name, false)
	default:
		err = notFound("no such endpoint; POST /v1/jobs/{name}:trigger, :pause or :resume")
	}
	if err != nil {
		j.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, jobView(v))
}

func noQuery(r *http.Request) error {
	q, err := parseQuery(r.URL.RawQuery)
	if err != nil {
		return err
	}
	for k := range q {
		return badRequest(k, "unknown query parameter (this route takes none)")
	}
	return nil
}

// jobError maps the job service's errors to answers.
func jobError(err error) error {
	switch {
	case errors.Is(err, scanjob.ErrNotFound):
		return &httpError{status: http.StatusNotFound, code: apiv1.CodeNotFound, field: "name", message: err.Error()}
	case errors.Is(err, scanjob.ErrBadRequest):
		msg := strings.TrimPrefix(err.Error(), scanjob.ErrBadRequest.Error()+": ")
		field, _, _ := strings.Cut(msg, ":")
		return badRequest(field, "%s", strings.TrimSpace(strings.TrimPrefix(msg, field+":")))
	}
	return err
}
