package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/internal/task"
)

// Services are what the API serves, one member per group of routes. Tasks
// is required; a nil member's routes are not registered, so they answer
// 404 like any unknown path (a node gives them all; tests may give fewer).
type Services struct {
	Tasks     Service          // /v1/tasks…, /readyz
	Keys      KeyService       // PATCH /v1/tasks/{id}, /v1/topics/{topic}/keys/…, GET /v1/tasks?key=
	Topics    Topics           // /v1/topics…
	Schedules ScheduleService  // /v1/schedules…
	Jobs      JobService       // /v1/jobs…
	Cluster   ClusterService   // GET /v1/cluster
	Outboxes  OutboxService    // GET /v1/outboxes
	Ops       OperationService // /v1/operations… (bulk operations)
	Store     StoreService     // GET /v1/store, POST /v1/store:expand
	Metrics   http.Handler     // GET /metrics
}

// OutboxService is what GET /v1/outboxes needs: every outbox's tables as
// their databases show them (ontime.Node); and GET /v1/tasks/{id}, the
// outbox message a task was relayed from (nil when none).
type OutboxService interface {
	Outboxes(ctx context.Context) (*apiv1.OutboxList, error)
	TaskOutbox(ctx context.Context, t *task.Task) (*apiv1.TaskOutbox, error)
}

// StoreService is what GET /v1/store needs: the store's recorded
// databases and expansion (ontime.Node).
type StoreService interface {
	StoreStatus(ctx context.Context) (*apiv1.StoreStatus, error)
	// StoreExpand begins (or resumes) an expansion run by the node and
	// answers the store's view; a refusal wraps ErrInvalid (400) or
	// ErrStoreConflict (409).
	StoreExpand(ctx context.Context, req apiv1.StoreExpandRequest) (*apiv1.StoreStatus, error)
}

// ErrStoreConflict is wrapped by a StoreExpand refused for the store's
// state (an expansion under way, none to resume, no expander): 409.
var ErrStoreConflict = errors.New("store conflict")

// ClusterService is what GET /v1/cluster needs: the cluster as the node
// sees it (ontime.Node).
type ClusterService interface {
	Cluster(ctx context.Context) (*apiv1.ClusterView, error)
}

// route is one line of the route table.
type route struct {
	pattern string // ServeMux pattern: "METHOD /path"
	on      bool   // the service it serves was given (Services)
	serve   http.HandlerFunc
	change  change // what the audit log records of it (audit.go)
}

// routes is every route the API serves: NewHandler registers this table
// and nothing else. A new group of routes (the console's GET /ui/, the
// outbox, resharding) is a Services member and its lines here.
//
// The last column marks the routes that change state: each request to one
// of them is an audit line (audit.go); submits are a class of their own,
// audited only with audit.submits (they are the data plane, thousands a
// second, not an operator's act).
//
// The role a token needs is not a column: RouteRole derives it from the
// method and path (auth.go), so that an op after the colon can need more
// than its pattern's other ops (:requeue is admin, the task's other POSTs
// write) and an unknown path needs a token too.
func (h *handler) routes(s Services) []route {
	keys, topics, schedules, jobs := s.Keys != nil, s.Topics != nil, s.Schedules != nil, s.Jobs != nil
	th := &topicsHandler{handler: h, svc: s.Topics}
	sh := &scheduleHandler{h: h, svc: s.Schedules}
	jh := &jobsHandler{h: h, svc: s.Jobs}
	oh := &opsHandler{h: h, svc: s.Ops}
	// A wildcard cannot share its path segment with a literal, so
	// "{id}:requeue" and the other ":op" routes are one segment split on
	// the colon (IDs, names and topics have none).
	return []route{
		// Probes and the API's description: no token needed.
		{"GET /healthz", true, healthz, readOnly},
		{"GET /readyz", true, h.ready, readOnly},
		{"GET /v1/openapi.json", true, serveOpenAPI, readOnly},
		{"GET /metrics", s.Metrics != nil, h.metrics, readOnly},

		// Tasks (handler.go).
		{"POST /v1/tasks", true, h.submit, changeSubmit},
		{"POST /v1/tasks:batch", true, h.batch, changeSubmit},
		{"POST /v1/tasks/{idop}", true, h.postTaskOp, changeState}, // :requeue, :purge
		{"GET /v1/tasks/{id}", true, h.get, readOnly},
		{"DELETE /v1/tasks/{id}", true, h.cancel, changeState},
		{"GET /v1/tasks", true, h.list, readOnly}, // ?key= needs Keys

		// Tasks by key, and PATCH (keys.go). The key is the rest of the
		// path, so a key may hold slashes; the topic is one segment.
		{"PATCH /v1/tasks/{id}", keys, h.patch, changeState},
		{"GET /v1/topics/{topic}/keys/{key...}", keys, h.getByKey, readOnly},
		{"DELETE /v1/topics/{topic}/keys/{key...}", keys, h.cancelByKey, changeState},
		{"PATCH /v1/topics/{topic}/keys/{key...}", keys, h.patchByKey, changeState},

		// Topics (topics.go).
		{"GET /v1/topics", topics, th.list, readOnly},
		{"GET /v1/topics/{topic}", topics, th.get, readOnly},
		{"PUT /v1/topics/{topic}", topics, th.put, changeState},   // the topic's settings
		{"POST /v1/topics/{topicop}", topics, th.op, changeState}, // :pause, :resume, :requeue

		// Schedules (schedules.go).
		{"POST /v1/schedules", schedules, sh.create, changeState},
		{"GET /v1/schedules", schedules, sh.list, readOnly},
		{"GET /v1/schedules/{name}", schedules, sh.get, readOnly},
		{"PUT /v1/schedules/{name}", schedules, sh.put, changeState},
		{"DELETE /v1/schedules/{name}", schedules, sh.delete, changeState},
		{"POST /v1/schedules/{nameop}", schedules, sh.op, changeState}, // :pause, :resume, :trigger

		// Scan jobs (jobs.go).
		{"GET /v1/jobs", jobs, jh.list, readOnly},
		{"GET /v1/jobs/{name}", jobs, jh.get, readOnly},
		{"GET /v1/jobs/{name}/runs", jobs, jh.runs, readOnly}, // ?item=&limit=
		{"POST /v1/jobs/{nameop}", jobs, jh.op, changeState},  // :trigger, :pause, :resume

		// Bulk operations (operations.go).
		{"POST /v1/operations", s.Ops != nil, oh.create, changeState},
		{"GET /v1/operations", s.Ops != nil, oh.list, readOnly},
		{"GET /v1/operations/{id}", s.Ops != nil, oh.get, readOnly},

		// The cluster.
		{"GET /v1/cluster", s.Cluster != nil, h.cluster, readOnly},

		// Outboxes (config outboxes:).
		{"GET /v1/outboxes", s.Outboxes != nil, func(w http.ResponseWriter, r *http.Request) { h.outboxes(w, r, s.Outboxes) }, readOnly},

		// The store's databases and their growth (ontime store).
		{"GET /v1/store", s.Store != nil, func(w http.ResponseWriter, r *http.Request) { h.storeStatus(w, r, s.Store) }, readOnly},
		{"POST /v1/store:expand", s.Store != nil, func(w http.ResponseWriter, r *http.Request) { h.storeExpand(w, r, s.Store) }, changeState},
	}
}

func (h *handler) outboxes(w http.ResponseWriter, r *http.Request, svc OutboxService) {
	if r.URL.RawQuery != "" {
		q, err := parseQuery(r.URL.RawQuery)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		for k := range q {
			h.fail(w, r, badRequest(k, "unknown query parameter (GET /v1/outboxes takes none)"))
			return
		}
	}
	v, err := svc.Outboxes(r.Context())
	if err != nil {
		h.fail(w, r, fmt.Errorf("outboxes: %w", err))
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (h *handler) storeStatus(w http.ResponseWriter, r *http.Request, svc StoreService) {
	if r.URL.RawQuery != "" {
		h.fail(w, r, badRequest("query", "GET /v1/store takes no query parameters"))
		return
	}
	v, err := svc.StoreStatus(r.Context())
	if err != nil {
		h.fail(w, r, fmt.Errorf("store status: %w", err))
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// storeExpand begins an expansion run by the node (admin): 202 with the
// store's view; the progress is GET /v1/store's.
func (h *handler) storeExpand(w http.ResponseWriter, r *http.Request, svc StoreService) {
	if r.URL.RawQuery != "" {
		h.fail(w, r, badRequest("query", "POST /v1/store:expand takes no query parameters"))
		return
	}
	var req apiv1.StoreExpandRequest
	if err := h.decodeJSON(w, r, 64<<10, &req); err != nil {
		h.fail(w, r, err)
		return
	}
	for i, d := range req.Databases {
		if d == "" {
			h.fail(w, r, badRequest(fmt.Sprintf("databases[%d]", i), "empty DSN"))
			return
		}
	}
	if !(req.Nice >= 0 && req.Nice <= 100) {
		h.fail(w, r, badRequest("nice", "%g is out of range 0..100", req.Nice))
		return
	}
	if req.Rate < 0 || req.Rate > 10_000_000 {
		h.fail(w, r, badRequest("rate", "%d is out of range 0..10000000 rows per second", req.Rate))
		return
	}
	v, err := svc.StoreExpand(r.Context(), req)
	switch {
	case errors.Is(err, ErrStoreConflict):
		h.fail(w, r, &httpError{status: http.StatusConflict, code: apiv1.CodeConflict, field: "databases", message: err.Error()})
		return
	case err != nil:
		h.fail(w, r, fmt.Errorf("store expand: %w", err))
		return
	}
	writeJSON(w, http.StatusAccepted, v)
}

func healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (h *handler) ready(w http.ResponseWriter, r *http.Request) {
	// Any failure means "not ready" here, a store that does not answer
	// included: a load balancer only needs to know to look elsewhere.
	if err := h.svc.Ready(r.Context()); err != nil {
		h.fail(w, r, &httpError{status: http.StatusServiceUnavailable, code: apiv1.CodeUnavailable, message: readyMessage(h.opts.Auth, err)})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func (h *handler) metrics(w http.ResponseWriter, r *http.Request) { h.metricsHandler.ServeHTTP(w, r) }

func (h *handler) cluster(w http.ResponseWriter, r *http.Request) {
	v, err := h.clusterSvc.Cluster(r.Context())
	if err != nil {
		h.fail(w, r, fmt.Errorf("cluster view: %w", err))
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// serveOpenAPI answers GET /v1/openapi.json.
func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(apiv1.OpenAPI())
}

// patternMux is a ServeMux that remembers the patterns it was given, so the
// OpenAPI test can check that every route is in the spec.
type patternMux struct {
	*http.ServeMux
	patterns []string
}

func newPatternMux() *patternMux { return &patternMux{ServeMux: http.NewServeMux()} }

func (m *patternMux) HandleFunc(pattern string, f func(http.ResponseWriter, *http.Request)) {
	m.patterns = append(m.patterns, pattern)
	m.ServeMux.HandleFunc(pattern, f)
}

// Routes lists the ServeMux patterns served ("GET /v1/tasks/{id}").
func (h routed) Routes() []string { return append([]string(nil), h.patterns...) }

// Route returns the pattern that serves r, "" when none does.
func (h routed) Route(r *http.Request) string {
	_, pattern := h.mux.Handler(r)
	return pattern
}
