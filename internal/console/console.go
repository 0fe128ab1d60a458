// Package console serves ontime's web console at /ui/: server-rendered
// pages (html/template) with htmx for live regions and uPlot for the
// overview's charts, all embedded in the binary, so `ontime serve` shows it
// with no build step and no network.
//
// The console is a client of the HTTP API, called in-process: every page
// reads, and every button acts, through the node's own API handler with the
// signed-in token as its bearer token (inproc.go). So the console can do
// exactly what that token can (roles, topic limits), answers with the API's
// own validation (the field named), and pages lists with the API's cursors;
// it holds no query of its own against the store.
//
// With auth.tokens configured, /ui/login takes a token and keeps it in an
// HttpOnly, SameSite=Strict cookie (Secure under TLS); every POST carries a
// CSRF token derived from it (csrf.go). Without tokens (a loopback node)
// there is no sign-in, and POSTs still carry a CSRF token, so another site
// open in the same browser cannot act on the local node.
package console

import (
	"sync"

	"context"
	"embed"
	"errors"
	"fmt"
	"github.com/ontimehq/ontime/apiv1"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/ontimehq/ontime/internal/api"
)

//go:embed assets templates
var files embed.FS

// Options configures the console.
type Options struct {
	// API is the node's API handler (api.NewHandler): every read and
	// action goes through it, in-process. Required.
	API http.Handler
	// Auth is the node's token checker; nil when no token is configured
	// (the console then needs no sign-in, like the API).
	Auth *api.Auth
	// Samples feeds the overview's charts; nil shows none.
	Samples *Sampler
	// Upcoming counts the pending tasks per topic in n buckets of step
	// from from (the store's DueHistogram); nil hides the Coming up page.
	Upcoming func(ctx context.Context, from time.Time, step time.Duration, n int) ([]DueCounts, error)
	// Breakers returns each destination whose circuit breaker is not
	// closed, with its state; nil shows none.
	Breakers func() map[string]string
	Logger   *slog.Logger
}

// DueCounts is one topic's row of Options.Upcoming: Counts[i] tasks fall
// due in bucket i.
type DueCounts struct {
	Topic  string
	Counts []int64
}

// Console is the /ui/ handler.
type Console struct {
	opts  Options
	log   *slog.Logger
	pages map[string]*template.Template
	mux   *http.ServeMux
	csrf  csrfKey

	// The overview's cluster summary, shared by every viewer allowed
	// GET /v1/cluster for clusterTTL: the view computes every item's lag
	// (~9 ms of CPU with 64 items, measured), five times the rest of an
	// overview refresh, and the overview shows only nodes and leader.
	clusterMu sync.Mutex
	clusterV  *apiv1.ClusterView
	clusterAt time.Time

	// due keeps the Coming up histograms (duecache.go).
	due *dueCache
}

// clusterTTL is how stale the overview's node count and leader may be.
const clusterTTL = 10 * time.Second

// New builds the console.
func New(o Options) (*Console, error) {
	if o.API == nil {
		return nil, errors.New("console: Options.API is required")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Console{opts: o, log: o.Logger, pages: map[string]*template.Template{}, due: &dueCache{count: o.Upcoming}}
	var err error
	if c.csrf, err = newCSRFKey(); err != nil {
		return nil, err
	}
	names, err := fs.Glob(files, "templates/page_*.html")
	if err != nil {
		return nil, err
	}
	for _, f := range names {
		name := strings.TrimSuffix(strings.TrimPrefix(f, "templates/page_"), ".html")
		t, err := template.New(name).Funcs(funcs).ParseFS(files, "templates/layout.html", f)
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", f, err)
		}
		c.pages[name] = t
	}
	c.mux = http.NewServeMux()
	for _, rt := range c.routes() {
		c.mux.Handle(rt.pattern, rt.h)
	}
	return c, nil
}

// ServeHTTP serves /ui/….
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	// Pages frame nothing and are framed by nothing; scripts come only
	// from the console itself (no inline script, no CDN).
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	c.mux.ServeHTTP(w, r)
}

// Mount serves the console beside the API: GET / redirects to /ui/, /ui
// and everything under it is the console, and every other path is the
// API's (so /v1/… keeps its JSON answers, 404 included). The result lists
// the API's routes like the API handler does (Routes, Route), for the
// tests that check them against the OpenAPI document.
func Mount(apiHandler http.Handler, c *Console) http.Handler {
	return mounted{api: apiHandler, console: c}
}

type mounted struct {
	api     http.Handler
	console http.Handler
}

func (m mounted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	switch {
	case p == "/" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		http.Redirect(w, r, "/ui/", http.StatusFound)
	case p == "/ui" || strings.HasPrefix(p, "/ui/"):
		m.console.ServeHTTP(w, r)
	default:
		m.api.ServeHTTP(w, r)
	}
}

// Routes lists the API's routes (api.Routes).
func (m mounted) Routes() []string { return api.Routes(m.api) }

// Route is the API route serving r, "" when none does (the console's
// paths are not API routes).
func (m mounted) Route(r *http.Request) string {
	if rl, ok := m.api.(interface{ Route(*http.Request) string }); ok {
		return rl.Route(r)
	}
	return ""
}

// safeBack is where an action returns to: a console path, never another
// site (an open redirect) nor a scheme-relative "//host".
func safeBack(s, fallback string) string {
	u, err := url.Parse(s)
	if s == "" || err != nil || u.Scheme != "" || u.Host != "" || !strings.HasPrefix(u.Path, "/ui") || strings.HasPrefix(s, "//") {
		return fallback
	}
	return u.RequestURI()
}
