package api_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/internal/api/apitest"
)

// routeLister is what the API handler tells about its routes.
type routeLister interface {
	Routes() []string
	Route(r *http.Request) string
}

var pathParam = regexp.MustCompile(`\{[^}]+\}`)

// TestOpenAPICoversEveryRoute: every route the node serves is described in
// apiv1/openapi.json, and every route described is served. A route added
// without its description fails here.
func TestOpenAPICoversEveryRoute(t *testing.T) {
	t.Parallel()
	_, h := apitest.StartHandler(t, nil)
	rl, ok := h.(routeLister)
	if !ok {
		t.Fatalf("the node's handler (%T) does not list its routes (Routes, Route): a wrapper must pass them on", h)
	}
	doc := apitest.Spec(t)
	if doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi %q, want 3.1.0", doc.OpenAPI)
	}
	covered := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			// A concrete request for the described path: which route serves it?
			url := pathParam.ReplaceAllString(path, "x")
			req := httptest.NewRequest(method, url, nil)
			pattern := rl.Route(req)
			if pattern == "" {
				t.Errorf("%s %s is described but no route serves it", method, path)
				continue
			}
			covered[pattern] = true
		}
	}
	routes := rl.Routes()
	sort.Strings(routes)
	for _, p := range routes {
		if !covered[p] {
			t.Errorf("route %q is not described in apiv1/openapi.json", p)
		}
	}
	if len(routes) < 10 {
		t.Fatalf("only %d routes listed: %v", len(routes), routes)
	}
}

// TestOpenAPIServed: GET /v1/openapi.json answers the embedded document.
func TestOpenAPIServed(t *testing.T) {
	t.Parallel()
	base := server(t)
	resp, err := http.Get(base + "/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || !bytes.Equal(body, apiv1.OpenAPI()) {
		t.Fatalf("HTTP %d %q, %d bytes", resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
	}
	if !strings.Contains(string(body), `"openapi": "3.1.0"`) {
		t.Fatal("not OpenAPI 3.1")
	}
}

// fakeT records what the spec checker reports.
type fakeT struct {
	testing.TB
	errs []string
}

func (f *fakeT) Errorf(format string, args ...any) {
	f.errs = append(f.errs, format)
}

// TestOpenAPICheckerCatchesDrift: the checker every API test runs behind
// fails an undocumented route, an undocumented status, a field the spec
// does not have and an error answer that is not the envelope.
func TestOpenAPICheckerCatchesDrift(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, method, path string
		status             int
		body               string
	}{
		{"undocumented route", "GET", "/v1/frobs", 200, `{}`},
		{"undocumented status", "GET", "/healthz", 202, `{"status":"ok"}`},
		{"undocumented field", "GET", "/healthz", 200, `{"status":"ok","uptime":3}`},
		{"error without the envelope", "GET", "/v1/tasks/x", 404, `not found`},
		{"task missing a field", "GET", "/v1/tasks/x", 200, `{"id":"x","topic":"t"}`},
	} {
		ft := &fakeT{TB: t}
		h := apitest.Checked(ft, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(tc.status)
			w.Write([]byte(tc.body))
		}))
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(tc.method, tc.path, nil).WithContext(context.Background()))
		if len(ft.errs) == 0 {
			t.Errorf("%s: not reported", tc.name)
		}
	}
	// And a conforming answer passes.
	ft := &fakeT{TB: t}
	apitest.Checked(ft, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"status":"ok"}`))
	})).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/healthz", nil))
	if len(ft.errs) != 0 {
		t.Errorf("a conforming answer was reported: %v", ft.errs)
	}
}
