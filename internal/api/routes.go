package api

import (
	"net/http"

	"github.com/ontimehq/ontime/apiv1"
)

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

func (m *patternMux) Handle(pattern string, h http.Handler) {
	m.patterns = append(m.patterns, pattern)
	m.ServeMux.Handle(pattern, h)
}

// Routes lists the ServeMux patterns served ("GET /v1/tasks/{id}").
func (h routed) Routes() []string { return append([]string(nil), h.patterns...) }

// Route returns the pattern that serves r, "" when none does.
func (h routed) Route(r *http.Request) string {
	_, pattern := h.mux.Handler(r)
	return pattern
}

// serveOpenAPI answers GET /v1/openapi.json.
func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(apiv1.OpenAPI())
}
