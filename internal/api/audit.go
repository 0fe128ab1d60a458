package api

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"
)

// change is what the audit log records of a route (the route table's
// last column, routes.go).
type change uint8

const (
	readOnly     change = iota // reads, probes: never audited
	changeState                // cancel, update, requeue, pause/resume, schedules, jobs: always audited
	changeSubmit               // submits: audited only with Auditor.Submits (audit.submits)
)

// Auditor writes the audit log: one structured line per state change made
// through the API (and the console, which is served over the same
// services and calls Record for its own forms). Its logger is the node's
// (the lines stay in the node log) or one of its own over audit.file; the
// caller wraps it in the node's redactor either way, so no secret reaches
// the log.
type Auditor struct {
	log *slog.Logger
	// Submits audits POST /v1/tasks and :batch too (audit.submits).
	Submits bool
}

// NewAuditor builds an auditor writing to log (nil: discard).
func NewAuditor(log *slog.Logger) *Auditor {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Auditor{log: log}
}

// ActorLocal is the actor of a node without tokens: every request comes
// from the loopback listener, so from someone on the node's machine.
const ActorLocal = "local"

// ActorUnauthenticated is the actor of a request refused for its missing
// or unknown token: whoever it was, the token's value is never logged.
const ActorUnauthenticated = "unauthenticated"

// AuditEntry is one audit line.
type AuditEntry struct {
	Actor      string // the token's name, ActorLocal or ActorUnauthenticated
	Method     string
	Route      string // the route table's pattern; the path when none matched
	Path       string
	TargetKind string // task, key, topic, schedule, job; "" for a submit
	Target     string // the task ID, "topic/key", the topic, the schedule's or job's name
	Op         string // the ":op" of the path, if any (requeue, pause, …)
	Status     int
	Code       string // the error's code (apiv1.Code) when Status ≥ 400
	RequestID  string
	Remote     string
	Duration   time.Duration
}

// Outcome names the result: ok, refused (4xx: the caller's input or
// rights), failed (5xx).
func (e *AuditEntry) Outcome() string {
	switch {
	case e.Status >= 500:
		return "failed"
	case e.Status >= 400:
		return "refused"
	default:
		return "ok"
	}
}

// Record writes one audit line.
func (a *Auditor) Record(ctx context.Context, e AuditEntry) {
	if a == nil {
		return
	}
	attrs := make([]slog.Attr, 0, 14)
	attrs = append(attrs,
		slog.String("actor", e.Actor),
		slog.String("method", e.Method),
		slog.String("route", e.Route),
		slog.String("path", e.Path))
	if e.TargetKind != "" {
		attrs = append(attrs, slog.String("target_kind", e.TargetKind), slog.String("target", e.Target))
	}
	if e.Op != "" {
		attrs = append(attrs, slog.String("op", e.Op))
	}
	attrs = append(attrs, slog.String("outcome", e.Outcome()), slog.Int("status", e.Status))
	if e.Code != "" {
		attrs = append(attrs, slog.String("code", e.Code))
	}
	attrs = append(attrs, slog.String("request_id", e.RequestID), slog.String("remote", e.Remote),
		slog.Float64("duration_seconds", e.Duration.Seconds()))
	a.log.LogAttrs(ctx, slog.LevelInfo, "audit", attrs...)
}

// audits reports whether a request to a route of class c is audited.
func (a *Auditor) audits(c change) bool {
	return a != nil && (c == changeState || c == changeSubmit && a.Submits)
}

// actorOf names who made a request: the token's name, ActorLocal on a
// node without tokens.
func actorOf(ctx context.Context, auth *Auth) string {
	if t := tokenOf(ctx); t != nil {
		return t.Name
	}
	if auth == nil {
		return ActorLocal
	}
	return ActorUnauthenticated
}

// auditTarget reads what a request acts on from its path values (the
// patterns of routes.go), splitting ":op" off the last segment.
func auditTarget(r *http.Request) (kind, target, op string) {
	split := func(v string) (string, string) {
		name, op, _ := strings.Cut(v, ":")
		return name, op
	}
	switch {
	case r.PathValue("key") != "":
		return "key", r.PathValue("topic") + "/" + r.PathValue("key"), ""
	case r.PathValue("id") != "":
		return "task", r.PathValue("id"), ""
	case r.PathValue("idop") != "":
		t, o := split(r.PathValue("idop"))
		return "task", t, o
	case r.PathValue("topicop") != "":
		t, o := split(r.PathValue("topicop"))
		return "topic", t, o
	}
	p := r.URL.Path
	kind = ""
	switch {
	case strings.HasPrefix(p, "/v1/schedules"):
		kind = "schedule"
	case strings.HasPrefix(p, "/v1/jobs"):
		kind = "job"
	}
	if v := r.PathValue("name"); v != "" {
		return kind, v, ""
	}
	if v := r.PathValue("nameop"); v != "" {
		t, o := split(v)
		return kind, t, o
	}
	return kind, "", ""
}
