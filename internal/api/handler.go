package api

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/internal/halves"
	"github.com/ontimehq/ontime/internal/router"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/submit"
	"github.com/ontimehq/ontime/internal/task"
)

// MaxBatch is the most tasks one POST /v1/tasks:batch may carry.
const MaxBatch = apiv1.MaxBatch

// Options configures the handler.
type Options struct {
	// TopicLimits gives a topic's cluster-wide limits for its view in
	// GET /v1/topics; nil, or a nil answer: none shown.
	TopicLimits     func(topic string) *apiv1.TopicLimits
	MaxPayloadBytes int   // default task.DefaultMaxPayloadBytes
	MaxBatchBytes   int64 // body limit of POST /v1/tasks:batch; default DefaultMaxBatchBytes
	Logger          *slog.Logger
	Auth            *Auth // nil: no tokens, every request is served (loopback only; see auth.go)

	// MaxInflightBodyBytes bounds the bytes of the request bodies this
	// handler reads or holds at once (body.go); default
	// DefaultMaxInflightBodyBytes, never below the batch limit.
	MaxInflightBodyBytes int64

	// SlowRequest: a request that takes longer is logged at warn
	// (http.slow_request); default DefaultSlowRequest.
	SlowRequest time.Duration
	// Audit writes the audit line of every state change (audit.go); nil:
	// none are written.
	Audit *Auditor
	// Tracer, when set (tracing on), makes a server span of each request
	// to a route, child of the caller's traceparent header; a submit's
	// tasks keep that trace (internal/submit). nil: no span.
	Tracer trace.Tracer
}

// View converts a stored task to its JSON view.
func View(t *task.Task) apiv1.Task {
	v := apiv1.Task{ID: t.ID, Topic: t.Topic, Key: t.Key, DueAt: t.DueAt.UTC(), FirstDueAt: t.FirstDueAt.UTC(), MovedBy: t.MovedBy.String(), Payload: json.RawMessage(t.Payload),
		Target: t.Target, MaxAttempts: t.MaxAttempts, Priority: t.Priority, Status: t.Status.String(), Attempts: t.Attempts,
		CreatedAt: t.CreatedAt.UTC(), UpdatedAt: t.UpdatedAt.UTC(), LastError: t.LastError, Result: json.RawMessage(t.Result)}
	if t.Retry != "" {
		if r, ok, err := task.DecodeRetry(t.Retry); ok && err == nil {
			w := apiv1.Retry(r.Spec())
			v.Retry = &w
		}
	}
	if reason := t.NextAttemptReason(); reason != "" {
		at := v.DueAt
		v.NextAttemptAt, v.NextAttemptReason = &at, reason
	}
	return v
}

// submitView is a submit's answer: the task's view and, when a final
// task held the key, until when it holds it (nothing was written).
func submitView(r submit.Result) apiv1.Task {
	v := View(r.Task)
	if r.Existing && !r.HeldUntil.IsZero() {
		at := r.HeldUntil.UTC()
		v.KeyHeldUntil = &at
	}
	return v
}

type handler struct {
	svc            Service    // s.Tasks under the token's topic scope (auth.go)
	keys           KeyService // s.Keys, scoped likewise; nil without it
	clusterSvc     ClusterService
	outboxSvc      OutboxService // nil: tasks are shown without their outbox message
	metricsHandler http.Handler
	opts           Options
	log            *slog.Logger
	budget         *bodyBudget // of the request bodies read at once (body.go)
}

// NewHandler serves API v1 over s: every route of the table in routes.go.
func NewHandler(s Services, opts Options) http.Handler {
	if opts.MaxPayloadBytes <= 0 {
		opts.MaxPayloadBytes = task.DefaultMaxPayloadBytes
	}
	if opts.MaxBatchBytes <= 0 {
		opts.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	h := &handler{svc: scoped{s.Tasks}, clusterSvc: s.Cluster, outboxSvc: s.Outboxes, metricsHandler: s.Metrics, opts: opts, log: opts.Logger}
	if opts.MaxInflightBodyBytes <= 0 {
		opts.MaxInflightBodyBytes = DefaultMaxInflightBodyBytes
	}
	h.budget = newBodyBudget(max(opts.MaxInflightBodyBytes, h.batchLimit()))
	if s.Keys != nil {
		h.keys = scopedKeys{ks: s.Keys, sc: scoped{s.Tasks}}
	}
	if opts.SlowRequest <= 0 {
		opts.SlowRequest = DefaultSlowRequest
	}
	mux := newPatternMux()
	rd := routed{log: opts.Logger, auth: opts.Auth, audit: opts.Audit, slow: opts.SlowRequest, ids: newRequestIDs(), changes: map[string]change{},
		tracer: opts.Tracer}
	for _, rt := range h.routes(s) {
		if !rt.on {
			continue
		}
		rd.changes[rt.pattern] = rt.change
		serve := rt.serve
		if opts.Audit.audits(rt.change) {
			serve = rd.audited(rt.pattern, serve)
		}
		mux.HandleFunc(rt.pattern, serve)
	}
	rd.mux, rd.patterns = mux.ServeMux, mux.patterns
	return rd
}

func (h *handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	writeError(w, r, h.log, err)
}

// EnvelopeBytes is what a single submit's body may hold beyond the largest
// payload: the other fields and the JSON around them.
const EnvelopeBytes = 64 << 10

// DefaultMaxBatchBytes is the default byte budget of one POST
// /v1/tasks:batch body: the whole batch is held in memory while it is
// submitted, so this, not MaxBatch × the largest payload (~1 GiB), bounds
// what one request can make the node hold.
const DefaultMaxBatchBytes = 64 << 20

// bodyError turns a failure to tokenize a body read whole (readBody) into
// an answer.
func bodyError(err error) error {
	var se *json.SyntaxError
	switch {
	case errors.Is(err, io.EOF):
		return badRequest("", "empty body; want a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF), errors.As(err, &se):
		return badRequest("", "malformed JSON: %v", err)
	default:
		return badRequest("", "reading body: %v", err)
	}
}

// endOfBody checks that nothing but white space follows the JSON value
// dec has read.
func endOfBody(dec *json.Decoder) error {
	_, err := dec.Token()
	switch {
	case errors.Is(err, io.EOF):
		return nil
	case err == nil:
		return badRequest("", "trailing data after the JSON object")
	default:
		return badRequest("", "trailing data after the JSON object: %v", err)
	}
}

// readJSON reads a body whole (readBody) and splits out its one JSON
// value: what the routes with a single object as their body decode. The
// value is the decoder's copy, so the body's share of the budget goes back
// at once.
// decodeJSON reads a JSON body of at most limit bytes into v: valid
// UTF-8, no unknown fields, errors naming the field (the admin routes'
// bodies, which are small and read whole).
func (h *handler) decodeJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	raw, err := h.readJSON(w, r, limit, "")
	if err != nil {
		return err
	}
	if err := checkUTF8(raw); err != nil {
		return err
	}
	return strictDecode(raw, v, "")
}

func (h *handler) readJSON(w http.ResponseWriter, r *http.Request, limit int64, field string) (json.RawMessage, error) {
	b, err := h.readBody(w, r, limit, field)
	defer b.release()
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b.b))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return nil, bodyError(err)
	}
	if err := endOfBody(dec); err != nil {
		return nil, err
	}
	return raw, nil
}

// decodeTask decodes one task's raw JSON, rejecting unknown fields and
// bytes that are not UTF-8; errors name the field where they can. raw is a
// JSON value as a json.Decoder or fastBatch split it out: valid JSON.
func decodeTask(raw []byte, v *apiv1.TaskRequest) error {
	if err := checkUTF8(raw); err != nil {
		return err
	}
	if fastDecodeTask(raw, v, true) { // decode_fast.go; raw is a decoder's or fastBatch's value
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return taskDecodeError(err)
	}
	return nil
}

// checkUTF8 rejects a task whose JSON holds bytes that are not UTF-8.
// encoding/json would turn them into U+FFFD in strings (so a key would be
// stored as another key) and keep them as is in a raw payload, which
// PostgreSQL then refuses; so the raw bytes are checked, before decoding.
func checkUTF8(raw []byte) error {
	if utf8.Valid(raw) {
		return nil
	}
	// json.RawMessage keeps the bytes as they came: find the field.
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) == nil {
		var bad []string
		for name, v := range fields {
			if !utf8.Valid(v) && utf8.ValidString(name) {
				bad = append(bad, name)
			}
		}
		if len(bad) > 0 {
			sort.Strings(bad) // one answer for one input
			return badRequest(bad[0], "is not valid UTF-8")
		}
	}
	return badRequest("", "the body is not valid UTF-8")
}

// readTask reads the body of POST /v1/tasks: one task, at most limit
// bytes, read whole (readBody) for fastDecodeTask; the decoder below reads
// any body it declines from the same bytes, so its answer is the one it
// always was.
func (h *handler) readTask(w http.ResponseWriter, r *http.Request, limit int64, v *apiv1.TaskRequest) error {
	b, err := h.readBody(w, r, limit, "payload")
	defer b.release()
	if err != nil {
		return err
	}
	if utf8.Valid(b.b) && fastDecodeTask(b.b, v, false) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b.b))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return bodyError(err)
	}
	if err := endOfBody(dec); err != nil {
		return err
	}
	return decodeTask(raw, v)
}

// readBatch reads the body of POST /v1/tasks:batch, {"tasks": [...]}, whole
// (readBody: refused 413 at the byte past limit, which is never buffered).
// A well-formed body is split by fastBatch; any other is read token by
// token by the decoder, which answers as it always did (more than MaxBatch
// tasks, malformed JSON, an unknown field). The tasks stay raw, so that
// one malformed task fails alone; they share the body's bytes, so the
// caller releases its share of the budget once it is done with them.
func (h *handler) readBatch(w http.ResponseWriter, r *http.Request, limit int64) ([]json.RawMessage, func(), error) {
	b, err := h.readBody(w, r, limit, "tasks")
	if err != nil {
		b.release()
		return nil, nil, err
	}
	if tasks, ok := fastBatch(b.b); ok {
		return tasks, b.release, nil
	}
	tasks, err := decodeBatch(b.b)
	b.release() // the decoder's tasks are copies
	return tasks, func() {}, err
}

// decodeBatch is readBatch's decoder, for the bodies fastBatch declines.
func decodeBatch(body []byte) ([]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	tok, err := dec.Token()
	if err != nil {
		return nil, bodyError(err)
	}
	if tok != json.Delim('{') {
		return nil, badRequest("", `want a JSON object {"tasks": [...]}`)
	}
	var tasks []json.RawMessage
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, bodyError(err)
		}
		if name, _ := tok.(string); name != "tasks" {
			return nil, badRequest(name, "unknown field")
		}
		if tasks, err = readTaskArray(dec, bodyError); err != nil {
			return nil, err
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, bodyError(err)
	}
	if err := endOfBody(dec); err != nil {
		return nil, err
	}
	return tasks, nil
}

func readTaskArray(dec *json.Decoder, fail func(error) error) ([]json.RawMessage, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, fail(err)
	}
	if tok == nil { // null
		return nil, nil
	}
	if tok != json.Delim('[') {
		return nil, badRequest("tasks", "want an array of tasks")
	}
	var tasks []json.RawMessage
	for dec.More() {
		if len(tasks) == MaxBatch {
			return nil, badRequest("tasks", "has more than %d tasks", MaxBatch)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fail(err)
		}
		tasks = append(tasks, raw)
	}
	if _, err := dec.Token(); err != nil { // the closing bracket
		return nil, fail(err)
	}
	return tasks, nil
}

// spec converts a submitted task; the engine validates the values.
func spec(in apiv1.TaskRequest) (task.Spec, error) {
	// Both decoders (fastDecodeTask, encoding/json) checked the payload.
	s := task.Spec{Topic: in.Topic, Key: in.Key, Payload: in.Payload, PayloadValid: true, Target: in.Target, MaxAttempts: in.MaxAttempts, Priority: in.Priority}
	if in.Retry != nil {
		r := task.RetrySpec(*in.Retry)
		s.Retry = &r
	}
	switch in.IfExists {
	case "", apiv1.IfExistsKeep:
	case apiv1.IfExistsReplace:
		s.Replace = true
	default:
		return s, &task.FieldError{Field: "if_exists", Message: fmt.Sprintf("%q is not keep or replace", in.IfExists)}
	}
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

// taskLimit is the byte limit of a single submit's body.
func (h *handler) taskLimit() int64 { return int64(h.opts.MaxPayloadBytes) + EnvelopeBytes }

// batchLimit is the byte limit of a batch's body; never below one task's,
// so that any task that can be submitted alone can be in a batch.
func (h *handler) batchLimit() int64 { return max(h.opts.MaxBatchBytes, h.taskLimit()) }

func (h *handler) submit(w http.ResponseWriter, r *http.Request) {
	var in apiv1.TaskRequest
	if err := h.readTask(w, r, h.taskLimit(), &in); err != nil {
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
	writeJSON(w, code, submitView(res[0]))
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
	tasks, release, err := h.readBatch(w, r, h.batchLimit())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	defer release()
	if len(tasks) == 0 {
		h.fail(w, r, badRequest("tasks", "is empty"))
		return
	}
	items := make([]apiv1.BatchItem, len(tasks))
	// Each task decoded into its own place, a large batch on two cores.
	specs := make([]task.Spec, len(tasks))
	errs := make([]error, len(tasks))
	halves.Do(len(tasks), func(lo, hi int) {
		// One TaskRequest for a run of tasks: decodeTask's fallback to
		// encoding/json moves it to the heap, once per run rather than
		// once per task.
		var ti apiv1.TaskRequest
		for i := lo; i < hi; i++ {
			ti = apiv1.TaskRequest{}
			if errs[i] = decodeTask(tasks[i], &ti); errs[i] == nil {
				specs[i], errs[i] = spec(ti)
			}
		}
	})
	// The refused tasks out, in place: specs keeps the others in order.
	var pos []int
	size, n := 16, 0
	for i, raw := range tasks {
		size += len(raw) + batchItemExtra
		if errs[i] != nil {
			items[i].Error = h.itemError(r, errs[i])
			continue
		}
		specs[n] = specs[i]
		n++
		pos = append(pos, i)
	}
	specs = specs[:n]
	var res []submit.Result
	// of[i]: 1 + the index in res of task i's result; 0: an error.
	of := make([]int32, len(tasks))
	if len(specs) > 0 {
		var err error
		if res, err = h.svc.Submit(r.Context(), specs); err != nil {
			h.fail(w, r, err)
			return
		}
		for j, rr := range res {
			i := pos[j]
			if rr.Err != nil {
				items[i].Error = h.itemError(r, rr.Err)
				continue
			}
			of[i] = int32(j) + 1
			items[i].Created = !rr.Existing
		}
	}
	if prefersMinimal(r.Header) {
		writeMinimalBatch(w, items, of, res)
		return
	}
	// The answer is written item by item, each task's view made as it is
	// written and not kept: a batch of 1,000 views was most of what a
	// batch call allocated.
	bp := replyBuf(size)
	b := append((*bp)[:0], `{"tasks":[`...)
	for i := range items {
		if i > 0 {
			b = append(b, ',')
		}
		it := items[i]
		if of[i] > 0 {
			v := submitView(res[of[i]-1])
			it.Task = &v
		}
		// A created task's payload is the one just checked.
		var ok bool
		if b, ok = appendBatchItem(b, &it, it.Created); !ok {
			for i := range items {
				if of[i] > 0 {
					v := submitView(res[of[i]-1])
					items[i].Task = &v
				}
			}
			writeBody(w, http.StatusOK, bp, encodeSlow((*bp)[:0], apiv1.BatchResponse{Tasks: items}))
			return
		}
	}
	writeBody(w, http.StatusOK, bp, append(b, "]}\n"...))
}

// writeMinimalBatch answers a batch with Prefer: return=minimal: each
// task's ID and status, or its error (of and res as in batch).
func writeMinimalBatch(w http.ResponseWriter, items []apiv1.BatchItem, of []int32, res []submit.Result) {
	w.Header()["Preference-Applied"] = []string{apiv1.PreferMinimal}
	bp := replyBuf(16 + len(items)*minimalItemSize)
	b := append((*bp)[:0], `{"tasks":[`...)
	for i := range items {
		if i > 0 {
			b = append(b, ',')
		}
		ref := apiv1.BatchRef{Error: items[i].Error, Created: items[i].Created}
		if of[i] > 0 {
			t := res[of[i]-1].Task
			ref.ID, ref.Status = t.ID, t.Status.String()
		}
		b = appendBatchRef(b, &ref)
	}
	writeBody(w, http.StatusOK, bp, append(b, "]}\n"...))
}

// minimalItemSize is about how long a task's item in a minimal batch
// answer is: {"id":"…26…","status":"pending","created":true}.
const minimalItemSize = 64

// prefersMinimal reports whether the request's Prefer headers (RFC 7240:
// comma-separated preferences, each maybe with parameters after ";",
// repeatable, unknown ones ignored) ask for return=minimal.
func prefersMinimal(h http.Header) bool {
	for _, v := range h.Values("Prefer") {
		for pref := range strings.SplitSeq(v, ",") {
			pref, _, _ = strings.Cut(pref, ";")
			name, val, _ := strings.Cut(strings.TrimSpace(pref), "=")
			if strings.EqualFold(strings.TrimSpace(name), "return") && strings.EqualFold(strings.Trim(strings.TrimSpace(val), `"`), "minimal") {
				return true
			}
		}
	}
	return false
}

// batchItemExtra is about how much longer a task's item in a batch's
// answer is than the task in the request: its id, status, stamps, counts.
const batchItemExtra = 320

func (h *handler) postTaskOp(w http.ResponseWriter, r *http.Request) {
	id, op, ok := strings.Cut(r.PathValue("idop"), ":")
	var t *task.Task
	var err error
	switch {
	case ok && op == "requeue":
		t, err = h.svc.Requeue(r.Context(), id)
	case ok && op == "purge":
		t, err = h.svc.Purge(r.Context(), id)
	default:
		h.fail(w, r, notFound("no such endpoint; POST /v1/tasks/{id}:requeue or :purge"))
		return
	}
	h.answerTask(w, r, t, err)
}

// answerTask answers t's view, or err when the operation failed.
func (h *handler) answerTask(w http.ResponseWriter, r *http.Request, t *task.Task, err error) {
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, View(t))
}

func (h *handler) get(w http.ResponseWriter, r *http.Request) {
	t, err := h.svc.Get(r.Context(), r.PathValue("id"))
	if err != nil || h.outboxSvc == nil {
		h.answerTask(w, r, t, err)
		return
	}
	v := View(t)
	// The outbox's own database answers this part: when it is slow or
	// down, the task is still shown, without it.
	ctx, cancel := context.WithTimeout(r.Context(), taskOutboxTimeout)
	defer cancel()
	if v.Outbox, err = h.outboxSvc.TaskOutbox(ctx, t); err != nil {
		h.log.Warn("task view: reading its outbox message failed", "task", t.ID, "err", err)
	}
	writeJSON(w, http.StatusOK, v)
}

// taskOutboxTimeout bounds the outbox table's reads of GET /v1/tasks/{id}.
const taskOutboxTimeout = 2 * time.Second

func (h *handler) cancel(w http.ResponseWriter, r *http.Request) {
	t, err := h.svc.Cancel(r.Context(), r.PathValue("id"))
	h.answerTask(w, r, t, err)
}

// parseQuery parses a raw query string as url.ParseQuery does, but fails
// where that would drop a parameter in silence (a malformed escape, a
// semicolon) and on names or values that are not UTF-8, naming the
// parameter when its name can be read.
func parseQuery(raw string) (url.Values, error) {
	if raw == "" {
		return nil, nil // most requests: no map to make
	}
	q := url.Values{}
	for raw != "" {
		var part string
		part, raw, _ = strings.Cut(raw, "&")
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		name, err := url.QueryUnescape(k)
		if err != nil || !utf8.ValidString(name) || strings.Contains(k, ";") {
			return nil, badRequest("", "malformed query string: %q is not a percent-encoded UTF-8 parameter name", k)
		}
		val, err := url.QueryUnescape(v)
		if err != nil || !utf8.ValidString(val) || strings.Contains(v, ";") {
			return nil, badRequest(name, "malformed query string: %q is not a percent-encoded UTF-8 value", v)
		}
		q[name] = append(q[name], val)
	}
	return q, nil
}

func (h *handler) list(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r.URL.RawQuery)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	for k, v := range q {
		switch k {
		case "topic", "status", "limit", "cursor", "key", "due_after", "due_before":
		default:
			h.fail(w, r, badRequest(k, "unknown query parameter (want topic, key, status, limit, cursor, due_after, due_before)"))
			return
		}
		// An empty value could mean "no filter" or a client that lost
		// its value; a filter that is left out says which.
		switch {
		case len(v) > 1:
			h.fail(w, r, badRequest(k, "given %d times; give it once", len(v)))
			return
		case v[0] == "":
			h.fail(w, r, badRequest(k, "is empty; leave the parameter out for no filter"))
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
	for _, p := range []struct {
		name string
		to   *time.Time
	}{{"due_after", &f.DueAfter}, {"due_before", &f.DueBefore}} {
		if v := q.Get(p.name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				h.fail(w, r, badRequest(p.name, "%q is not an RFC 3339 time such as 2030-01-02T15:04:05Z", v))
				return
			}
			if q.Has("key") {
				h.fail(w, r, badRequest(p.name, "a key names one task: give no due range with it"))
				return
			}
			*p.to = t
		}
	}
	if !f.DueAfter.IsZero() && !f.DueBefore.IsZero() && !f.DueAfter.Before(f.DueBefore) {
		h.fail(w, r, badRequest("due_before", "is not after due_after"))
		return
	}
	if q.Has("key") {
		h.listByKey(w, r, f, q.Get("key")) // keys.go
		return
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
	if limit := cmp.Or(f.Limit, store.DefaultListLimit); len(ts) == limit {
		out.NextCursor = ts[len(ts)-1].ID
	}
	writeJSON(w, http.StatusOK, out)
}
