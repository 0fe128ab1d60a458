// Package client is the Go client of ontime's HTTP API v1. The CLI is
// built on it. The bodies it sends and receives are the types of package
// apiv1; the names below are aliases of them, not copies.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/internal/halves"
)

// The wire types, shared with the server.
type (
	// TaskRequest is a task to submit.
	TaskRequest = apiv1.TaskRequest
	// Task is a stored task's view.
	Task = apiv1.Task
	// ListPage is one page of List.
	ListPage = apiv1.ListPage
	// BatchItem is one answer of SubmitBatch: a task, or an error.
	BatchItem = apiv1.BatchItem
	// BatchRef is one answer of SubmitBatchMinimal: a task's ID and
	// status, or an error.
	BatchRef = apiv1.BatchRef
	// ClusterView is the answer of Cluster.
	ClusterView = apiv1.ClusterView
)

// APIError is an error answer of the API.
type APIError struct {
	Status int
	// Code classifies the error (apiv1.CodeNotFound …); empty when the
	// answer was not the API's error envelope (a proxy's error page).
	Code    apiv1.Code
	Field   string
	Message string
}

func (e *APIError) Error() string {
	status := fmt.Sprintf("HTTP %d", e.Status)
	if e.Code != "" {
		status += ", " + string(e.Code)
	}
	if e.Field != "" {
		return fmt.Sprintf("%s: %s (%s)", e.Field, e.Message, status)
	}
	return fmt.Sprintf("%s (%s)", e.Message, status)
}

// Client talks to one ontime node.
type Client struct {
	base     string
	hc       *http.Client
	token    string     // bearer token (client_security.go)
	coalesce Coalesce   // WithCoalesce
	co       *coalescer // nil: coalescing off (coalesce.go)
	err      error      // from an option; New returns it
}

// Option adjusts a Client.
type Option func(*Client)

// WithHTTPClient replaces the default HTTP client (30 s timeout, keep-alive
// connections pooled for concurrent use: see DefaultMaxIdleConns).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// DefaultMaxIdleConns is how many idle connections to the node the default
// transport keeps for reuse. net/http's default keeps 2 per host, so a
// program calling from more goroutines than that opened and closed a
// connection on most calls; this covers the concurrency of a busy
// submitter, and connections past it are still opened when needed.
const DefaultMaxIdleConns = 64

// WithHTTP2Cleartext speaks HTTP/2 without TLS (h2c, prior knowledge) to an
// http:// node: every concurrent call shares one connection. The node
// serves it beside HTTP/1.1 (`ontime serve`); a server that does not speak
// h2c refuses such calls, so it is not the default. https:// servers
// negotiate HTTP/2 by TLS with or without this option.
func WithHTTP2Cleartext() Option {
	return func(c *Client) {
		tr := c.transport()
		p := new(http.Protocols)
		p.SetHTTP2(true)
		p.SetUnencryptedHTTP2(true)
		tr.Protocols = p
		c.setTransport(tr)
	}
}

// transport is a copy of the client's transport to adjust, or a new default
// one when the HTTP client has another kind of RoundTripper.
func (c *Client) transport() *http.Transport {
	if tr, ok := c.hc.Transport.(*http.Transport); ok {
		return tr.Clone()
	}
	return newTransport()
}

// setTransport replaces the transport on a copy of the HTTP client, so
// that one given by WithHTTPClient is not changed under its owner.
func (c *Client) setTransport(tr *http.Transport) {
	hc := *c.hc
	hc.Transport = tr
	c.hc = &hc
}

func newTransport() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = DefaultMaxIdleConns
	tr.MaxIdleConnsPerHost = DefaultMaxIdleConns
	return tr
}

// New returns a client for the node at baseURL ("http://127.0.0.1:7070").
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("server: %q is not an http(s) URL such as http://127.0.0.1:7070", baseURL)
	}
	c := &Client{base: strings.TrimRight(baseURL, "/"), hc: &http.Client{Timeout: 30 * time.Second, Transport: newTransport()}}
	for _, o := range opts {
		o(c)
	}
	if c.err != nil {
		return nil, c.err
	}
	c.co = newCoalescer(c.coalesce)
	return c, nil
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) (int, error) {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return 0, err
		}
	}
	return c.doRaw(ctx, method, path, body, out)
}

// doRaw makes one call with body as the JSON request body (nil: none) and
// decodes the answer into out. The answer is read into a pooled buffer:
// encoding/json copies what it keeps, so the buffer is free once out is
// filled.
func (c *Client) doRaw(ctx context.Context, method, path string, body []byte, out any) (int, error) {
	return c.doPrefer(ctx, method, path, body, "", out)
}

// doPrefer is doRaw with a Prefer header (RFC 7240), unless prefer is "".
func (c *Client) doPrefer(ctx context.Context, method, path string, body []byte, prefer string, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return 0, err
	}
	if body != nil {
		req.Header["Content-Type"] = []string{"application/json"}
	}
	if c.token != "" {
		req.Header["Authorization"] = []string{"Bearer " + c.token}
	}
	if prefer != "" {
		req.Header["Prefer"] = []string{prefer}
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	bp := replyPool.Get().(*bytes.Buffer)
	defer func() {
		if bp.Cap() <= maxPooledReply {
			bp.Reset()
			replyPool.Put(bp)
		}
	}()
	bp.Reset()
	// Read to the end, so the connection goes back to the pool for reuse.
	if _, err := bp.ReadFrom(io.LimitReader(resp.Body, 64<<20)); err != nil {
		return resp.StatusCode, err
	}
	raw := bp.Bytes()
	if resp.StatusCode >= 400 {
		var eb apiv1.ErrorBody
		if unmarshal(raw, &eb) == nil && eb.Error.Message != "" {
			return resp.StatusCode, &APIError{Status: resp.StatusCode, Code: eb.Error.Code, Field: eb.Error.Field, Message: eb.Error.Message}
		}
		return resp.StatusCode, &APIError{Status: resp.StatusCode, Message: strings.TrimSpace(string(raw))}
	}
	if out != nil {
		if err := unmarshal(raw, out); err != nil {
			return resp.StatusCode, fmt.Errorf("decoding the answer: %w", err)
		}
	}
	return resp.StatusCode, nil
}

// call makes one call and decodes the answer into a new T.
func call[T any](ctx context.Context, c *Client, method, path string, in any) (*T, error) {
	var out T
	if _, err := c.do(ctx, method, path, in, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// withQuery is path with q as its query string, if q has any value.
func withQuery(path string, q url.Values) string {
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}

// Submit stores a task; created is false when the topic and key existed.
// It is safe to call from many goroutines: Submits that overlap share
// POST /v1/tasks:batch calls (coalesce.go; WithCoalesce), each answered
// as its own POST /v1/tasks would have been, and a lone Submit is that
// call, sent at once. It returns once the node has committed the task.
// A Submit whose ctx ends while it waits returns ctx's error
// (errors.Is(err, context.Canceled) or DeadlineExceeded); its task may be
// written if it was sent, as with any call cancelled in flight.
func (c *Client) Submit(ctx context.Context, t TaskRequest) (task *Task, created bool, err error) {
	body, err := appendTaskRequest(make([]byte, 0, 128+len(t.Payload)), &t)
	if err != nil {
		return nil, false, err
	}
	if co := c.co; co != nil && len(body) <= co.solo && !co.off.Load() && ctx.Err() == nil {
		return co.submit(ctx, c, body)
	}
	return c.submitOne(ctx, body)
}

// submitOne is POST /v1/tasks with body, one task's JSON.
func (c *Client) submitOne(ctx context.Context, body []byte) (*Task, bool, error) {
	var out Task
	code, err := c.doRaw(ctx, http.MethodPost, "/v1/tasks", body, &out)
	if err != nil {
		return nil, false, err
	}
	return &out, code == http.StatusCreated, nil
}

// SubmitBatch stores up to 1,000 tasks; one answer per task, in order.
func (c *Client) SubmitBatch(ctx context.Context, ts []TaskRequest) ([]BatchItem, error) {
	body, err := batchBody(ts)
	if err != nil {
		return nil, err
	}
	var out apiv1.BatchResponse
	if _, err := c.doRaw(ctx, http.MethodPost, "/v1/tasks:batch", body, &out); err != nil {
		return nil, err
	}
	return out.Tasks, nil
}

// SubmitBatchMinimal is SubmitBatch answered with each task's ID and
// status instead of its whole view (Prefer: return=minimal): the call
// for a service that keeps only the IDs, about a tenth faster for a
// batch of 1,000 (the answer is an eighth of the size, and so is reading
// it). A node older than it answers the whole views; their IDs and
// statuses are returned all the same.
func (c *Client) SubmitBatchMinimal(ctx context.Context, ts []TaskRequest) ([]BatchRef, error) {
	body, err := batchBody(ts)
	if err != nil {
		return nil, err
	}
	var out apiv1.BatchMinimalResponse
	if _, err := c.doPrefer(ctx, http.MethodPost, "/v1/tasks:batch", body, apiv1.PreferMinimal, &out); err != nil {
		return nil, err
	}
	return out.Tasks, nil
}

// batchBody is POST /v1/tasks:batch's body, {"tasks":[…]}, each task
// appended to a buffer (marshalling each task and then the whole, as
// apiv1.BatchRequest, would compact every task's bytes a second time); a
// large batch's two halves on two cores, joined after.
func batchBody(ts []TaskRequest) ([]byte, error) {
	var parts [2][]byte
	var errs [2]error
	halves.Do(len(ts), func(lo, hi int) {
		part := 0 // the first half, or the whole
		if lo > 0 {
			part = 1
		}
		b := make([]byte, 0, 16+(hi-lo)*128)
		for i := lo; i < hi; i++ {
			if i > lo {
				b = append(b, ',')
			}
			var err error
			if b, err = appendTaskRequest(b, &ts[i]); err != nil {
				errs[part] = err
				return
			}
		}
		parts[part] = b
	})
	for _, err := range errs { // the first task's that failed, as one pass would
		if err != nil {
			return nil, err
		}
	}
	body := make([]byte, 0, len(parts[0])+len(parts[1])+16)
	body = append(body, `{"tasks":[`...)
	body = append(body, parts[0]...)
	if len(parts[0]) > 0 && len(parts[1]) > 0 {
		body = append(body, ',')
	}
	body = append(body, parts[1]...)
	return append(body, "]}"...), nil
}

// Get returns a task.
func (c *Client) Get(ctx context.Context, id string) (*Task, error) {
	return call[Task](ctx, c, http.MethodGet, "/v1/tasks/"+url.PathEscape(id), nil)
}

// Cancel cancels a task.
func (c *Client) Cancel(ctx context.Context, id string) (*Task, error) {
	return call[Task](ctx, c, http.MethodDelete, "/v1/tasks/"+url.PathEscape(id), nil)
}

// Requeue returns a dead task to pending.
func (c *Client) Requeue(ctx context.Context, id string) (*Task, error) {
	return call[Task](ctx, c, http.MethodPost, "/v1/tasks/"+url.PathEscape(id)+":requeue", nil)
}

// Purge deletes a final task (done, dead or cancelled) now instead of when
// its retention ends, and returns it as it was; a live task is refused
// (409 conflict).
func (c *Client) Purge(ctx context.Context, id string) (*Task, error) {
	return call[Task](ctx, c, http.MethodPost, "/v1/tasks/"+url.PathEscape(id)+":purge", nil)
}

// ListOptions filter List. Zero fields do not filter.
type ListOptions struct {
	Topic  string
	Status string
	Limit  int
	Cursor string
	// DueAfter and DueBefore keep tasks due in [DueAfter, DueBefore).
	DueAfter, DueBefore time.Time
}

// List returns one page of tasks in creation order.
func (c *Client) List(ctx context.Context, o ListOptions) (*ListPage, error) {
	q := url.Values{}
	if o.Topic != "" {
		q.Set("topic", o.Topic)
	}
	if o.Status != "" {
		q.Set("status", o.Status)
	}
	if o.Limit != 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Cursor != "" {
		q.Set("cursor", o.Cursor)
	}
	if !o.DueAfter.IsZero() {
		q.Set("due_after", o.DueAfter.UTC().Format(time.RFC3339Nano))
	}
	if !o.DueBefore.IsZero() {
		q.Set("due_before", o.DueBefore.UTC().Format(time.RFC3339Nano))
	}
	return call[ListPage](ctx, c, http.MethodGet, withQuery("/v1/tasks", q), nil)
}

// Cluster returns the cluster as the node asked sees it: nodes, leader,
// and each sharding item's owner and scan lag.
func (c *Client) Cluster(ctx context.Context) (*ClusterView, error) {
	return call[ClusterView](ctx, c, http.MethodGet, "/v1/cluster", nil)
}

// Health checks /readyz.
func (c *Client) Health(ctx context.Context) error {
	_, err := c.do(ctx, http.MethodGet, "/readyz", nil, nil)
	return err
}

// IsNotFound reports a 404 answer.
func IsNotFound(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && (ae.Code == apiv1.CodeNotFound || ae.Status == http.StatusNotFound)
}

// HasCode reports whether err is an API error answer with this code.
func HasCode(err error, code apiv1.Code) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Code == code
}
