// Package webhook delivers tasks by HTTP POST, signed with HMAC-SHA256.
package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ontimehq/ontime/internal/buildinfo"
	"github.com/ontimehq/ontime/internal/deliver"
	"github.com/ontimehq/ontime/internal/deliver/policy"
)

// Config configures the sink. Zero fields take defaults.
type Config struct {
	Secret    string        // signs calls when set (the global secret; Keys overrides it)
	Keys      *Keyring      // secrets per topic or destination, rotation; nil: Secret alone
	Timeout   time.Duration // per call; default 10s
	Client    *http.Client  // nil: keep-alive clients sized for the lanes (one per configured destination)
	UserAgent string        // default "ontime/VERSION" (buildinfo)
	// Concurrency is the calls in flight per destination not in
	// Destinations (delivery.concurrency): the shared pool keeps that
	// many idle connections per host, at least 256. Default 32.
	Concurrency int
	// Destinations are the destinations with settings of their own, by
	// lane key (deliver.Destination): each has its own connection pool,
	// sized to its concurrency, and its own timeout.
	Destinations map[string]Destination
	// Policy is checked on every address dialled (nil: none). Ignored
	// when Client is given: that client's dialer is the caller's.
	Policy *policy.Policy
	// Echo reports whether a short excerpt of a failing receiver's answer
	// may be kept in the task's last_error, which API readers see (nil:
	// never). Without it, a submitter could read internal services'
	// answers through ontime.
	Echo func(target string) bool
	// Redact masks the node's secrets in an answer before it is cut to
	// an excerpt (a cut secret would no longer be recognised); nil: none.
	Redact func(string) string
	// MaxResultBytes (delivery.max_result_bytes) is the longest 2xx JSON
	// answer kept as the task's result; 0: none kept.
	MaxResultBytes int
}

// Destination is one destination's settings (the config's destinations
// section, resolved against the delivery defaults).
type Destination struct {
	Concurrency int           // calls in flight at most (the dispatcher's lane enforces it)
	Timeout     time.Duration // per call; 0: Config.Timeout
	Batch       int           // tasks per call; > 1: batch calls (DeliverBatch)
	Rate        float64       // calls per second (the dispatcher's lane enforces it)
}

// Sink posts deliveries to their target URL.
type Sink struct {
	cfg    Config
	client caller                  // destinations without settings of their own
	dests  map[string]*destination // read-only after New
	signer signer
	reqs   *templates
}

type destination struct {
	client  caller
	timeout time.Duration
	batch   int
}

// caller makes the calls of one pool: through the transport the sink
// built (rt), or through Config.Client when the caller gave one.
type caller struct {
	client *http.Client
	// rt is client's transport when the sink built the client: calls go
	// to it directly. Client.Do would add nothing for them (no jar, no
	// client timeout, redirects not followed) but a copy of every
	// request's header and URL and its own wrapping, a tenth of a call's
	// CPU on the sender's side in a burst's profile.
	rt http.RoundTripper
}

// New builds a webhook sink.
func New(cfg Config) (*Sink, error) {
	if cfg.Timeout == 0 {
		cfg.Timeout = deliver.DefaultTimeout
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("delivery.timeout: %s is negative", cfg.Timeout)
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = deliver.DefaultConcurrency
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = buildinfo.Read().UserAgent()
	}
	if cfg.Keys == nil && cfg.Secret != "" {
		cfg.Keys = &Keyring{Global: []string{cfg.Secret}}
	}
	s := &Sink{cfg: cfg, client: caller{client: cfg.Client}, dests: map[string]*destination{}, reqs: newTemplates()}
	if cfg.Client == nil {
		// ≥ a lane's concurrency: reuse, don't redial.
		s.client = newClient(cfg.Policy, max(256, cfg.Concurrency), 1024)
	}
	for dest, d := range cfg.Destinations {
		if d.Timeout < 0 {
			return nil, fmt.Errorf("destinations.%q.timeout: %s is negative", dest, d.Timeout)
		}
		x := &destination{client: caller{client: cfg.Client}, timeout: cfg.Timeout, batch: max(d.Batch, 1)}
		if d.Timeout > 0 {
			x.timeout = d.Timeout
		}
		if cfg.Client == nil {
			// Its own pool, sized to its lane: a busy destination neither
			// redials for want of idle connections nor contends on the
			// shared pool's lock with every other lane.
			n := max(d.Concurrency, 1)
			x.client = newClient(cfg.Policy, n, n)
		}
		s.dests[dest] = x
	}
	return s, nil
}

// newClient is a keep-alive client keeping perHost idle connections to a
// host (total in all). It sets no cap on connections per host: the
// dispatcher's lane already bounds the calls in flight, and a cap would
// make a call wait for a connection the server is closing.
func newClient(pol *policy.Policy, perHost, total int) caller {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if pol != nil {
		// A proxy would be the address dialled, not the target: the
		// policy could not judge where the call goes.
		tr.Proxy = nil
		tr.DialContext = (&policy.Dialer{Policy: pol, Dialer: net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}}).DialContext
	}
	tr.MaxIdleConns = max(total, perHost)
	tr.MaxIdleConnsPerHost = perHost
	tr.IdleConnTimeout = 90 * time.Second
	// Answers are read for their status and an excerpt at most: asking
	// for gzip would only add a header to every call and a decompressor
	// to the answers that take it.
	tr.DisableCompression = true
	return caller{rt: tr, client: &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse // a redirect is an answer, not a hop to follow with our signature
	}}}
}

// do sends req, as Client.Do would with redirects not followed: a
// transport error comes wrapped in a *url.Error naming the method and the
// URL with its password masked.
func (c caller) do(req *http.Request) (*http.Response, error) {
	if c.rt == nil {
		return c.client.Do(req)
	}
	resp, err := c.rt.RoundTrip(req)
	if err != nil {
		return nil, &url.Error{Op: "Post", URL: stripPassword(req.URL), Err: err}
	}
	return resp, nil
}

// stripPassword is the URL as Client.Do's errors show it.
func stripPassword(u *url.URL) string {
	if _, set := u.User.Password(); set {
		return strings.Replace(u.String(), u.User.String()+"@", u.User.Username()+":***@", 1)
	}
	return u.String()
}

// route is the client and timeout of d's destination.
func (s *Sink) route(d *deliver.Delivery) (caller, time.Duration) {
	if len(s.dests) > 0 {
		dest := d.Dest
		if dest == "" {
			dest = deliver.Destination(d.Target)
		}
		if x := s.dests[dest]; x != nil {
			return x.client, x.timeout
		}
	}
	return s.client, s.cfg.Timeout
}

// StatusError is a non-2xx answer.
type StatusError struct {
	Code int
	// Body is a sanitized excerpt of the answer (printable ASCII, one
	// line, at most ExcerptBytes), only for targets Config.Echo allows.
	Body string
	// Wait is what a 429 or a 503 asked for in its Retry-After (seconds,
	// or an HTTP date); 0: none. The task is retried after it (at most
	// delivery.retry_max), and the destination's lane holds its calls
	// as long.
	Wait time.Duration
}

// RetryAfter is the wait the answer asked for (deliver.RetryAfterer).
func (e *StatusError) RetryAfter() time.Duration { return e.Wait }

// ExcerptBytes bounds the excerpt of an answer kept in last_error.
const ExcerptBytes = 64

// HTTPStatus classes the error for metrics (metrics.HTTPStatuser).
func (e *StatusError) HTTPStatus() int { return e.Code }

func (e *StatusError) Error() string {
	after := ""
	if e.Wait > 0 {
		after = fmt.Sprintf(", Retry-After %s", e.Wait)
	}
	if e.Body == "" {
		return fmt.Sprintf("webhook answered HTTP %d%s", e.Code, after)
	}
	return fmt.Sprintf("webhook answered HTTP %d%s: %s", e.Code, after, e.Body)
}

// ParseRetryAfter reads a Retry-After header value as of now: delay
// seconds ("120") or an HTTP date ("Wed, 21 Oct 2026 07:28:00 GMT").
// A date in the past, a malformed or an empty value is no wait (ok
// false): the task's retry policy applies.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0, false
		}
		// Beyond any cap ontime applies; bounded so the product cannot overflow.
		return time.Duration(min(n, 1<<32)) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	if d := t.Sub(now); d > 0 {
		return d, true
	}
	return 0, false
}

// Deliver posts d to d.Target. Any 2xx is success. Everything else is
// retried except answers that say retrying cannot help: 410 Gone (the
// receiver removed the endpoint) — those are Permanent.
func (s *Sink) Deliver(ctx context.Context, d deliver.Delivery) error {
	b, err := appendBody(make([]byte, 0, bodySize(&d)), &d)
	if err != nil {
		return err
	}
	client, timeout := s.route(&d)
	if d.Timeout > 0 {
		timeout = d.Timeout // the topic's
	}
	vals := make([]string, 5) // one allocation for the header values
	vals[0], vals[1] = d.ID, strconv.Itoa(d.Attempt)
	hdr := make(http.Header, 7)
	hdr["Ontime-Task-Id"], hdr["Ontime-Attempt"] = vals[0:1:1], vals[1:2:2]
	if d.Traceparent != "" {
		// The receiver's work continues the task's trace (W3C Trace Context).
		hdr["Traceparent"] = []string{d.Traceparent}
	}
	resp, cancel, err := s.post(ctx, client, timeout, d.Topic, d.Target, b, hdr, vals[2:])
	if err != nil {
		return err
	}
	defer cancel()
	defer resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		if d.Result != nil && s.cfg.MaxResultBytes > 0 {
			d.Result.Data = readResult(resp, s.cfg.MaxResultBytes)
		}
		drain(resp)
		return nil
	}
	return s.statusError(resp, d.Target)
}

// readResult reads a 2xx answer's body as the task's result: a JSON value
// (Content-Type application/json or …+json) of at most limit bytes,
// valid UTF-8, kept compact. Anything else —
// no body, another type, too long, not JSON — is no result: the delivery
// succeeded all the same, the receiver's answer is just not kept.
func readResult(resp *http.Response, limit int) []byte {
	if resp.ContentLength == 0 || resp.ContentLength > int64(limit) {
		return nil
	}
	mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, int64(limit)+1))
	if err != nil || len(b) > limit {
		return nil
	}
	if !utf8.Valid(b) {
		return nil
	}
	var out bytes.Buffer
	if json.Compact(&out, b) != nil || out.Len() == 0 {
		return nil // not one JSON value
	}
	return out.Bytes()
}

// post sends body to target with the common headers and hdr, signed for
// topic and target; spare (len 3) holds the values of User-Agent,
// Ontime-Target and Ontime-Signature. Ontime-Target is the target exactly
// as submitted, the URL the v2 signature covers: a receiver verifies with
// it (after checking it is one of its own URLs) rather than rebuilding
// its URL from what a proxy in front of it forwarded. The body is never
// reused: the transport may read it (and retry with it) after Do returns. It returns the answer and the cancel of the call's
// deadline, to call once the answer is read; an error is the delivery's.
func (s *Sink) post(ctx context.Context, client caller, timeout time.Duration, topic, target string, body []byte, hdr http.Header, spare []string) (*http.Response, context.CancelFunc, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	req, err := s.reqs.request(ctx, target, body)
	if err != nil {
		cancel()
		return nil, nil, deliver.Permanent(fmt.Errorf("webhook request: %w", err))
	}
	hdr["Content-Type"] = contentJSON
	spare[0] = s.cfg.UserAgent
	hdr["User-Agent"] = spare[0:1:1]
	spare[1] = target
	hdr["Ontime-Target"] = spare[1:2:2]
	if secrets := s.cfg.Keys.For(topic, target); len(secrets) > 0 {
		spare[2] = s.signer.sign(secrets, time.Now(), target, body, s.cfg.Keys.V1)
		hdr["Ontime-Signature"] = spare[2:3:3]
	}
	req.Header = hdr
	resp, err := client.do(req)
	if err != nil {
		cancel()
		if errors.Is(err, policy.ErrDenied) {
			// Retrying cannot make a denied address allowed.
			return nil, nil, deliver.Permanent(err)
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil, nil, fmt.Errorf("webhook timed out after %s: %w", timeout, err)
		}
		return nil, nil, fmt.Errorf("webhook: %w", err)
	}
	return resp, cancel, nil
}

// contentJSON is every call's Content-Type value, shared: neither the
// transport nor Client.Do modifies a request's header values.
var contentJSON = []string{"application/json"}

// statusError is the error of a non-2xx answer; it reads the answer.
func (s *Sink) statusError(resp *http.Response, target string) error {
	var snip [256]byte
	n, _ := io.ReadFull(resp.Body, snip[:])
	drain(resp)
	se := &StatusError{Code: resp.StatusCode}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		se.Wait, _ = ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	}
	if s.cfg.Echo != nil && s.cfg.Echo(target) {
		snippet := snip[:n]
		if s.cfg.Redact != nil {
			snippet = []byte(s.cfg.Redact(string(snippet)))
		}
		se.Body = Excerpt(snippet)
	}
	if resp.StatusCode == http.StatusGone {
		return deliver.Permanent(se)
	}
	return se
}

// drain reads what is left of an answer (up to 64 KiB) so its connection
// can carry the next call. An empty answer, the common one, has nothing
// to read: its body is http.NoBody.
func drain(resp *http.Response) {
	if resp.ContentLength == 0 {
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
}

// Excerpt makes a receiver's answer safe to show: printable ASCII only
// (other bytes become '?'), runs of white space as one space, at most
// ExcerptBytes.
func Excerpt(b []byte) string {
	var out strings.Builder
	space := false
	for _, c := range bytes.TrimSpace(b) {
		if out.Len() >= ExcerptBytes {
			break
		}
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			space = true
			continue
		case c < 0x20 || c > 0x7e:
			c = '?'
		}
		if space {
			if out.Len()+1 >= ExcerptBytes {
				break
			}
			out.WriteByte(' ')
			space = false
		}
		out.WriteByte(c)
	}
	return out.String()
}
