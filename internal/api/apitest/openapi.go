package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/ontimehq/ontime/apiv1"
)

// Spec loads and validates the OpenAPI document of API v1.
func Spec(t testing.TB) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(apiv1.OpenAPI())
	if err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.json is not a valid OpenAPI document: %v", err)
	}
	return doc
}

// checker serves h and checks every exchange against the spec: the status
// must be declared for the route, every error answer is the envelope, and
// a request the server accepted (2xx) and its answer must both match the
// spec's schemas. A test of any route that is not in the spec fails, so
// new routes, statuses and fields get documented.
type checker struct {
	t      testing.TB
	h      http.Handler
	doc    *openapi3.T
	router routers.Router
}

func newChecker(t testing.TB, h http.Handler) *checker {
	doc := Spec(t)
	r, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatalf("openapi router: %v", err)
	}
	return &checker{t: t, h: h, doc: doc, router: r}
}

// recorder passes an answer through and keeps a copy.
type recorder struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	r.body.Write(b)
	return r.ResponseWriter.Write(b)
}

func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (c *checker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var reqBody bytes.Buffer
	if r.Body != nil {
		// Teed as the handler reads it: a handler that stops reading at a
		// limit must still be able to.
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.TeeReader(r.Body, &reqBody), r.Body}
	}
	rec := &recorder{ResponseWriter: w}
	c.h.ServeHTTP(rec, r)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	if err := c.check(r, reqBody.Bytes(), rec); err != nil {
		c.t.Errorf("OpenAPI: %s %s → %d: %v", r.Method, r.URL.RequestURI(), rec.status, err)
	}
}

func (c *checker) check(r *http.Request, reqBody []byte, rec *recorder) error {
	if rec.status >= 300 && rec.status < 400 {
		return nil // ServeMux's redirects to a cleaned path
	}
	if rec.status >= 400 {
		var env struct {
			Error apiv1.ErrorDetail `json:"error"`
		}
		dec := json.NewDecoder(bytes.NewReader(rec.body.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&env); err != nil || env.Error.Code == "" || env.Error.Message == "" {
			return fmt.Errorf("an error answer that is not the error envelope: %q", rec.body.String())
		}
	}
	route, params, err := c.router.FindRoute(r)
	if err != nil {
		if rec.status == http.StatusNotFound || rec.status == http.StatusMethodNotAllowed {
			return nil // no such route: the envelope was checked
		}
		return fmt.Errorf("the route is not in apiv1/openapi.json (%v)", err)
	}
	if route.Operation.Responses.Value(strconv.Itoa(rec.status)) == nil && route.Operation.Responses.Default() == nil {
		return fmt.Errorf("status %d is not in apiv1/openapi.json for %s %s", rec.status, route.Method, route.Path)
	}
	opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, IncludeResponseStatus: true, MultiError: true}
	ctx := context.Background()
	if rec.status < 300 {
		req := r.Clone(ctx)
		req.Body = io.NopCloser(bytes.NewReader(reqBody))
		if len(reqBody) > 0 && req.Header.Get("Content-Type") == "" {
			req.Header.Set("Content-Type", "application/json") // what the server reads any body as
		}
		in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts}
		if err := openapi3filter.ValidateRequest(ctx, in); err != nil {
			return fmt.Errorf("the server accepted a request the spec does not allow: %w", err)
		}
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route, Options: opts},
		Status:                 rec.status,
		Header:                 rec.Header(),
		Body:                   io.NopCloser(bytes.NewReader(rec.body.Bytes())),
		Options:                opts,
	}
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		return fmt.Errorf("the answer does not match the spec: %w", err)
	}
	return nil
}

// Checked wraps h in the spec checker that Start puts in front of every
// node, reporting to t.
func Checked(t testing.TB, h http.Handler) http.Handler { return newChecker(t, h) }
