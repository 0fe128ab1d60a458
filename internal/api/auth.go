package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"path"
	"strings"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/submit"
	"github.com/ontimehq/ontime/internal/task"
)

// Role is what a token may do. read < write < admin; metrics is apart: it
// reads GET /metrics and nothing else, so a scraper's token is worthless
// against the tasks.
type Role int

const (
	RoleNone    Role = iota // health probes: no token needed
	RoleMetrics             // GET /metrics (admin may too)
	RoleRead                // every GET
	RoleWrite               // submit, cancel, change a task
	RoleAdmin               // requeue, pause/resume, cluster, every route
)

// ParseRole reads a role's name from the config.
func ParseRole(s string) (Role, error) {
	switch s {
	case "read":
		return RoleRead, nil
	case "write":
		return RoleWrite, nil
	case "admin":
		return RoleAdmin, nil
	case "metrics":
		return RoleMetrics, nil
	}
	return RoleNone, fmt.Errorf("%q is not one of read, write, admin, metrics", s)
}

func (r Role) String() string {
	return [...]string{"none", "metrics", "read", "write", "admin"}[r]
}

// allows reports whether a token of role r may use a route needing need.
func (r Role) allows(need Role) bool {
	switch {
	case need == RoleNone:
		return true
	case need == RoleMetrics:
		return r == RoleMetrics || r == RoleAdmin
	case r == RoleMetrics:
		return false
	default:
		return r >= need
	}
}

// Allows reports whether a token of role r may use a route needing need
// (RouteRole): what the console asks to show an action only to a token
// the API would let do it.
func (r Role) Allows(need Role) bool { return r.allows(need) }

// Token is one configured bearer token.
type Token struct {
	Name   string
	Secret string
	Role   Role
	// Topics, when set, is a glob ("orders.*") limiting the token to the
	// tasks of matching topics; such a token cannot use routes that span
	// topics (the cluster, the topic list, metrics).
	Topics string
}

// Auth checks bearer tokens. A nil *Auth lets every request through (a
// node with no tokens, which `ontime serve` only allows on loopback).
type Auth struct {
	tokens []authToken
}

type authToken struct {
	Token
	sum [sha256.Size]byte
}

// NewAuth builds the checker; names must be unique and secrets non-empty.
func NewAuth(tokens []Token) (*Auth, error) {
	a := &Auth{}
	seen := map[string]bool{}
	for i, t := range tokens {
		switch {
		case t.Name == "":
			return nil, fmt.Errorf("auth.tokens[%d].name: required", i)
		case seen[t.Name]:
			return nil, fmt.Errorf("auth.tokens[%d].name: %q is used twice", i, t.Name)
		case t.Secret == "":
			return nil, fmt.Errorf("auth.tokens[%d]: the token is empty", i)
		case t.Role == RoleNone:
			return nil, fmt.Errorf("auth.tokens[%d].role: required", i)
		}
		if _, err := path.Match(t.Topics, ""); err != nil {
			return nil, fmt.Errorf("auth.tokens[%d].topics: %q is not a glob", i, t.Topics)
		}
		seen[t.Name] = true
		a.tokens = append(a.tokens, authToken{Token: t, sum: sha256.Sum256([]byte(t.Secret))})
	}
	return a, nil
}

// lookup finds the token presented, comparing its hash with every
// configured one in constant time and without stopping at a match, so the
// time taken says nothing about how much of a guess was right.
func (a *Auth) lookup(presented string) *Token {
	sum := sha256.Sum256([]byte(presented))
	var found *Token
	for i := range a.tokens {
		if subtle.ConstantTimeCompare(sum[:], a.tokens[i].sum[:]) == 1 {
			found = &a.tokens[i].Token
		}
	}
	return found
}

// Identify returns the configured token whose secret this is, nil when
// none is (or a nil Auth: no tokens). It compares like every request does
// (lookup): the console's sign-in checks a token with it.
func (a *Auth) Identify(secret string) *Token {
	if a == nil || secret == "" {
		return nil
	}
	return a.lookup(secret)
}

// RouteRole is the role a route needs: health probes and the OpenAPI
// document none; /metrics
// metrics (or admin); the operations that act across tasks or on the
// cluster (a requeue, :pause, :resume, anything under /v1/cluster) admin,
// and so is :purge, which deletes what an operator may still need;
// so is defining, changing or deleting a schedule, which makes tasks for
// ever on the cluster's clock (its :trigger makes one task: write);
// other reads read; other changes write. It works on the path, not on a
// list of patterns, so routes added later get a role without being listed.
func RouteRole(method, p string) Role {
	switch {
	case p == "/healthz" || p == "/readyz" || p == "/v1/openapi.json":
		// Probes, and the API's description (public, like any API's docs).
		return RoleNone
	case p == "/metrics":
		return RoleMetrics
	case p == "/v1/cluster" || strings.HasPrefix(p, "/v1/cluster/"):
		return RoleAdmin
	}
	last := p[strings.LastIndex(p, "/")+1:]
	_, op, isOp := strings.Cut(last, ":")
	if isOp {
		switch op {
		case "requeue", "pause", "resume", "purge", "expand":
			return RoleAdmin
		}
	}
	if method == http.MethodGet || method == http.MethodHead {
		return RoleRead
	}
	if (p == "/v1/schedules" || strings.HasPrefix(p, "/v1/schedules/")) && !(isOp && op == "trigger") {
		return RoleAdmin
	}
	if p == "/v1/operations" || strings.HasPrefix(p, "/v1/operations/") {
		return RoleAdmin // a bulk operation changes many tasks at once
	}
	if method == http.MethodPut && strings.HasPrefix(p, "/v1/topics/") && strings.Count(p, "/") == 3 {
		// A topic's settings change how every node delivers it, as a
		// pause does.
		return RoleAdmin
	}
	return RoleWrite
}

type tokenKey struct{}

// tokenOf is the token a request was authenticated with; nil without auth.
func tokenOf(ctx context.Context) *Token {
	t, _ := ctx.Value(tokenKey{}).(*Token)
	return t
}

func unauthorized(msg string) error {
	return &httpError{status: http.StatusUnauthorized, code: apiv1.CodeUnauthorized, message: msg}
}

func forbidden(field, format string, args ...any) error {
	return &httpError{status: http.StatusForbidden, code: apiv1.CodeForbidden, field: field, message: fmt.Sprintf(format, args...)}
}

// authenticate returns the request to serve, carrying its token, or the
// 401/403 to answer (with a 403, the request carrying the token refused). Unknown routes need a token too: without one, a
// caller learns nothing, not even which paths exist.
func (a *Auth) authenticate(w http.ResponseWriter, r *http.Request) (*http.Request, error) {
	need := RouteRole(r.Method, r.URL.Path)
	if a == nil || need == RoleNone {
		return r, nil
	}
	h := r.Header.Get("Authorization")
	scheme, presented, _ := strings.Cut(h, " ")
	if h == "" || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(presented) == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="ontime"`)
		return nil, unauthorized("a bearer token is required (Authorization: Bearer …)")
	}
	tok := a.lookup(strings.TrimSpace(presented))
	if tok == nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="ontime", error="invalid_token"`)
		return nil, unauthorized("the bearer token is not valid")
	}
	// A refusal from here on names the token's owner (the audit's actor).
	withTok := r.WithContext(context.WithValue(r.Context(), tokenKey{}, tok))
	if !tok.Role.allows(need) {
		return withTok, forbidden("", "token %q has role %s; %s %s needs %s", tok.Name, tok.Role, r.Method, r.URL.Path, need)
	}
	if tok.Topics != "" && !topicScoped(r.URL.Path) {
		return withTok, forbidden("", "token %q is limited to topics %q; %s spans topics", tok.Name, tok.Topics, r.URL.Path)
	}
	if tok.Topics != "" && strings.HasPrefix(r.URL.Path, "/v1/topics/") {
		topic, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/v1/topics/"), "/")
		topic, _, _ = strings.Cut(topic, ":")
		if ok, _ := path.Match(tok.Topics, topic); !ok {
			return withTok, forbidden("topic", "token %q is limited to topics %q", tok.Name, tok.Topics)
		}
	}
	return withTok, nil
}

// topicScoped reports routes on which a topic-limited token is enforced:
// the task routes (through scoped, below) and /v1/topics/{topic}/….
func topicScoped(p string) bool {
	return p == "/v1/tasks" || p == "/v1/tasks:batch" || strings.HasPrefix(p, "/v1/tasks/") ||
		strings.HasPrefix(p, "/v1/topics/")
}

// scoped is the Service as a topic-limited token sees it: tasks of other
// topics do not exist for it (404, so their IDs reveal nothing), submits
// to them are refused (403 naming topic), and a list must name a topic
// it may read.
type scoped struct{ Service }

func allowedTopic(ctx context.Context, topic string) bool {
	t := tokenOf(ctx)
	if t == nil || t.Topics == "" {
		return true
	}
	ok, _ := path.Match(t.Topics, topic)
	return ok
}

func (s scoped) Submit(ctx context.Context, specs []task.Spec) ([]submit.Result, error) {
	if t := tokenOf(ctx); t == nil || t.Topics == "" {
		return s.Service.Submit(ctx, specs)
	}
	var ok []task.Spec
	var pos []int
	res := make([]submit.Result, len(specs))
	for i, sp := range specs {
		if !allowedTopic(ctx, sp.Topic) {
			t := tokenOf(ctx)
			res[i].Err = forbidden("topic", "token %q is limited to topics %q", t.Name, t.Topics)
			continue
		}
		ok = append(ok, sp)
		pos = append(pos, i)
	}
	if len(ok) == 0 {
		return res, nil
	}
	got, err := s.Service.Submit(ctx, ok)
	if err != nil {
		return nil, err
	}
	for j, r := range got {
		res[pos[j]] = r
	}
	return res, nil
}

// visible fetches id and hides it from a token of other topics.
func (s scoped) visible(ctx context.Context, id string) error {
	if t := tokenOf(ctx); t == nil || t.Topics == "" {
		return nil
	}
	t, err := s.Service.Get(ctx, id)
	if err != nil {
		return err
	}
	if !allowedTopic(ctx, t.Topic) {
		return store.ErrNotFound
	}
	return nil
}

func (s scoped) Get(ctx context.Context, id string) (*task.Task, error) {
	t, err := s.Service.Get(ctx, id)
	if err == nil && !allowedTopic(ctx, t.Topic) {
		return nil, store.ErrNotFound
	}
	return t, err
}

func (s scoped) Cancel(ctx context.Context, id string) (*task.Task, error) {
	if err := s.visible(ctx, id); err != nil {
		return nil, err
	}
	return s.Service.Cancel(ctx, id)
}

func (s scoped) Requeue(ctx context.Context, id string) (*task.Task, error) {
	if err := s.visible(ctx, id); err != nil {
		return nil, err
	}
	return s.Service.Requeue(ctx, id)
}

func (s scoped) Purge(ctx context.Context, id string) (*task.Task, error) {
	if err := s.visible(ctx, id); err != nil {
		return nil, err
	}
	return s.Service.Purge(ctx, id)
}

func (s scoped) List(ctx context.Context, f store.ListFilter) ([]*task.Task, error) {
	if t := tokenOf(ctx); t != nil && t.Topics != "" && !allowedTopic(ctx, f.Topic) {
		if f.Topic == "" {
			return nil, forbidden("topic", "token %q is limited to topics %q; give ?topic=", t.Name, t.Topics)
		}
		return nil, forbidden("topic", "token %q is limited to topics %q", t.Name, t.Topics)
	}
	return s.Service.List(ctx, f)
}

// Routes lists the patterns a handler of NewHandler serves ("POST
// /v1/tasks", …), so tests can try every route; nil for another handler.
func Routes(h http.Handler) []string {
	if r, ok := h.(interface{ Routes() []string }); ok {
		return r.Routes()
	}
	return nil
}

// readyMessage is the answer of a failing /readyz. The probe needs no
// token, so with tokens configured the cause (a store's address, a
// driver's words) is left for the log: anyone may ask.
func readyMessage(a *Auth, err error) string {
	if a != nil {
		return "not ready"
	}
	return "not ready: " + err.Error()
}
