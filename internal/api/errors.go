package api

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/internal/router"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/submit"
	"github.com/ontimehq/ontime/internal/task"
)

// httpError is a failure the HTTP layer finds on its own (a malformed body,
// an unknown query parameter, no such route), before the engine is asked.
type httpError struct {
	status  int
	code    apiv1.Code
	field   string
	message string
}

func (e *httpError) Error() string {
	if e.field != "" {
		return e.field + ": " + e.message
	}
	return e.message
}

func badRequest(field, format string, args ...any) error {
	return &httpError{status: http.StatusBadRequest, code: apiv1.CodeInvalid, field: field, message: fmt.Sprintf(format, args...)}
}

func notFound(message string) error {
	return &httpError{status: http.StatusNotFound, code: apiv1.CodeNotFound, message: message}
}

// classify is the one map from errors to answers. Errors arrive wrapped from
// any layer, so it matches with errors.Is/As, never by comparison. internal
// reports an error the client cannot act on, whose cause only the log gets.
func classify(err error) (status int, d apiv1.ErrorDetail, internal bool) {
	var he *httpError
	var fe *task.FieldError
	switch {
	case errors.As(err, &he):
		return he.status, apiv1.ErrorDetail{Code: he.code, Field: he.field, Message: he.message}, false
	case errors.As(err, &fe):
		if fe.TooLarge {
			return http.StatusRequestEntityTooLarge, apiv1.ErrorDetail{Code: apiv1.CodeTooLarge, Field: fe.Field, Message: fe.Message}, false
		}
		return http.StatusBadRequest, apiv1.ErrorDetail{Code: apiv1.CodeInvalid, Field: fe.Field, Message: fe.Message}, false
	case errors.Is(err, router.ErrBadID):
		return http.StatusBadRequest, apiv1.ErrorDetail{Code: apiv1.CodeInvalid, Field: "id", Message: badIDMessage(err)}, false
	case errors.Is(err, store.ErrNotFound):
		return http.StatusNotFound, apiv1.ErrorDetail{Code: apiv1.CodeNotFound, Field: "id", Message: "no task has this id"}, false
	case errors.Is(err, store.ErrConflict):
		return http.StatusConflict, apiv1.ErrorDetail{Code: apiv1.CodeConflict, Message: conflictMessage(err)}, false
	case errors.Is(err, submit.ErrNotReady):
		return http.StatusServiceUnavailable, apiv1.ErrorDetail{Code: apiv1.CodeUnavailable, Message: "node not ready; retry later"}, false
	case errors.Is(err, store.ErrUnavailable):
		// The cause (an address, a driver's words) is for the log; the
		// client only needs to come back later or go to another node.
		return http.StatusServiceUnavailable, apiv1.ErrorDetail{Code: apiv1.CodeUnavailable, Message: "task store unreachable; retry later"}, false
	default:
		return http.StatusInternalServerError, apiv1.ErrorDetail{Code: apiv1.CodeInternal, Message: "internal error"}, true
	}
}

// RetryAfter is the Retry-After of every 503: a node starting or a store
// restarting is usually back within seconds, and clients that wait this
// long do not hammer one that is not.
const RetryAfter = 2 * time.Second

// writeError answers err with its status and the error envelope.
func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	status, d, internal := classify(err)
	noteCode(w, string(d.Code))
	if internal {
		log.Error("api request failed", "request_id", requestIDOf(w), "method", r.Method, "path", r.URL.Path, "err", err)
	}
	if status == http.StatusServiceUnavailable {
		if errors.Is(err, store.ErrUnavailable) {
			log.Debug("api request failed: store unavailable", "request_id", requestIDOf(w), "method", r.Method, "path", r.URL.Path, "err", err)
		}
		w.Header().Set("Retry-After", strconv.Itoa(int(RetryAfter/time.Second)))
	}
	writeJSON(w, status, apiv1.ErrorBody{Error: d})
}

// routed serves mux, replacing ServeMux's plain-text 404 and 405 with the
// envelope: every error answer of the API must be JSON a client can decode.
// Around every request it keeps the request ID (X-Request-Id), logs the
// request (debug; warn past slow) and audits the state changes that auth
// refused; the route table's handlers audit the others (audited).
type routed struct {
	mux      *http.ServeMux
	patterns []string // what mux serves, for Routes
	changes  map[string]change
	log      *slog.Logger
	auth     *Auth
	audit    *Auditor
	slow     time.Duration
	ids      *requestIDs
	tracer   trace.Tracer // nil: tracing off
}

func (h routed) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rw := &respWriter{ResponseWriter: w, id: r.Header.Get(RequestIDHeader)}
	if !validRequestID(rw.id) {
		rw.id = h.ids.next()
	}
	w.Header()[RequestIDHeader] = []string{rw.id}
	route, served := h.serve(rw, r)
	h.logRequest(served, rw, route, time.Since(start))
}

// serve answers r and returns the pattern of its route ("" for none) and
// the request as served (with its token).
func (h routed) serve(w *respWriter, r *http.Request) (string, *http.Request) {
	ar, err := h.auth.authenticate(w, r)
	if err != nil {
		// The reason and the token's name only: a presented token is
		// never logged (it may be a real one, of another system).
		h.log.Debug("api request refused", "request_id", w.id, "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "why", err.Error())
		writeError(w, r, h.log, err)
		_, pattern := h.mux.Handler(r)
		if ar != nil {
			r = ar
		}
		h.auditOutside(w, r, pattern)
		return pattern, r
	}
	r = ar
	if _, pattern := h.mux.Handler(r); pattern != "" {
		// No route takes a query it cannot read; net/url would drop the
		// malformed parts and answer as if they were not there.
		if _, err := parseQuery(r.URL.RawQuery); err != nil {
			writeError(w, r, h.log, err)
			h.auditOutside(w, r, pattern)
			return pattern, r
		}
		if h.tracer != nil {
			h.traced(w, r, pattern)
			return pattern, r
		}
		h.mux.ServeHTTP(w, r)
		return pattern, r
	}
	// No route matched. ServeMux's answer says which failure it was (404,
	// 405 with Allow, or a redirect to the cleaned path); the body is
	// replaced only for the first two.
	rec := &recorder{header: http.Header{}}
	h.mux.ServeHTTP(rec, r)
	switch rec.status {
	case http.StatusMethodNotAllowed:
		allow := rec.header.Get("Allow")
		w.Header().Set("Allow", allow)
		writeError(w, r, h.log, &httpError{status: http.StatusMethodNotAllowed, code: apiv1.CodeInvalid,
			message: fmt.Sprintf("%s %s is not a route; this path takes %s", r.Method, r.URL.Path, allow)})
	case http.StatusNotFound, 0:
		writeError(w, r, h.log, notFound(fmt.Sprintf("no route %s %s", r.Method, r.URL.Path)))
	default:
		for k, v := range rec.header {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.status)
		_, _ = w.Write(rec.body.Bytes())
	}
	return "", r
}

// auditOutside audits a request to a state-changing route refused before
// its handler ran (its token, its query). No path values outside the mux:
// the path names the target.
func (h routed) auditOutside(w *respWriter, r *http.Request, pattern string) {
	if !h.audit.audits(h.changes[pattern]) {
		return
	}
	h.audit.Record(r.Context(), AuditEntry{Actor: actorOf(r.Context(), h.auth), Method: r.Method, Route: pattern, Path: r.URL.Path,
		Status: w.answered(), Code: w.code, RequestID: w.id, Remote: r.RemoteAddr})
}

// audited wraps the handler of a state-changing route: once it answered,
// one audit line with the actor, the route, the target and the outcome.
func (h routed) audited(pattern string, serve http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		serve(w, r)
		e := AuditEntry{Actor: actorOf(r.Context(), h.auth), Method: r.Method, Route: pattern, Path: r.URL.Path,
			RequestID: requestIDOf(w), Remote: r.RemoteAddr, Duration: time.Since(start)}
		e.TargetKind, e.Target, e.Op = auditTarget(r)
		e.Status = http.StatusOK
		if rw, ok := w.(*respWriter); ok {
			e.Status, e.Code = rw.answered(), rw.code
			if rw.target != "" {
				e.Target = rw.target
			}
		}
		h.audit.Record(r.Context(), e)
	}
}

// recorder keeps ServeMux's answer for an unmatched request.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}

// badIDMessage says why a string is not a task ID, without the layers it
// passed through ("task not found: malformed task id: …").
func badIDMessage(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, router.ErrBadID.Error()+": "); i >= 0 {
		msg = msg[i+len(router.ErrBadID.Error())+2:]
	}
	return "not a task ID: " + msg
}

// conflictMessage says which state refused the change and which states
// allow it.
func conflictMessage(err error) string {
	var ce *store.ConflictError
	if !errors.As(err, &ce) {
		return "the task's state does not allow this"
	}
	switch ce.Op {
	case "cancel":
		return fmt.Sprintf("the task is %s; only a pending or claimed task can be cancelled", ce.Status)
	case "requeue":
		return fmt.Sprintf("the task is %s; only a dead task can be requeued", ce.Status)
	case "purge":
		return fmt.Sprintf("the task is %s; only a done, dead or cancelled task can be purged (cancel it first)", ce.Status)
	}
	return fmt.Sprintf("the task is %s, which does not allow %s", ce.Status, ce.Op)
}

// traced serves r inside a server span named for its route, continuing
// the caller's trace (W3C traceparent header).
func (h routed) traced(w *respWriter, r *http.Request, pattern string) {
	ctx := propagation.TraceContext{}.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, span := h.tracer.Start(ctx, pattern, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
		attribute.String("http.request.method", r.Method), attribute.String("http.route", pattern),
		attribute.String("url.path", r.URL.Path), attribute.String("ontime.request_id", w.id)))
	defer span.End()
	h.mux.ServeHTTP(w, r.WithContext(ctx))
	status := w.answered()
	span.SetAttributes(attribute.Int("http.response.status_code", status))
	if status >= 500 {
		span.SetStatus(codes.Error, http.StatusText(status))
	}
}
