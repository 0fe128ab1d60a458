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
	anyValueTakesNull(doc)
	return doc
}

// anyValueTakesNull gives the document's "any JSON value" schemas (a
// payload: {} with a description, which generators map to unknown / Any)
// the list of every JSON type, null included: the same set of values, in
// the form kin-openapi needs. It validates a schema whose subtree holds a
// $ref by OpenAPI 3.0's rules, where a schema without a type refuses null.
func anyValueTakesNull(doc *openapi3.T) {
	_ = doc.WalkSchemas(func(_ string, s *openapi3.SchemaRef) error {
		if s.Value.IsEmpty() {
			s.Value.Type = &openapi3.Types{openapi3.TypeNull, openapi3.TypeBoolean, openapi3.TypeObject,
				openapi3.TypeArray, openapi3.TypeNumber, openapi3.TypeString}
		}
		return nil
	})
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
		if route.Operation.OperationID == "submitTasks" {
			reqBody = acceptedEntries(reqBody, rec.body.Bytes())
		}
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

// acceptedEntries is a batch request cut to the entries the node wrote (or
// found by their key): the spec says every entry is a TaskRequest, and the
// node is lenient, failing a bad entry alone in its answer item, so only
// the entries it accepted must match the spec. A body that is not a batch
// with one item per entry is returned unchanged.
func acceptedEntries(reqBody, answer []byte) []byte {
	var in struct {
		Tasks []json.RawMessage `json:"tasks"`
	}
	var out struct {
		Tasks []struct {
			Error json.RawMessage `json:"error"`
		} `json:"tasks"`
	}
	if json.Unmarshal(reqBody, &in) != nil || json.Unmarshal(answer, &out) != nil || len(in.Tasks) != len(out.Tasks) {
		return reqBody
	}
	var kept []json.RawMessage
	for i, it := range out.Tasks {
		if len(it.Error) == 0 || string(it.Error) == "null" {
			kept = append(kept, in.Tasks[i])
		}
	}
	if len(kept) == 0 {
		// Nothing accepted: a well-formed TaskRequest stands in, so the
		// rest of the body (its shape, the array's bounds) is still checked.
		kept = []json.RawMessage{json.RawMessage(`{"topic":"t"}`)}
	}
	in.Tasks = kept
	b, err := json.Marshal(in)
	if err != nil {
		return reqBody
	}
	return b
}

// Checked wraps h in the spec checker that Start puts in front of every
// node, reporting to t.
func Checked(t testing.TB, h http.Handler) http.Handler { return newChecker(t, h) }
