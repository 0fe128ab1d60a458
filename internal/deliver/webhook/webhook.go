// Package webhook delivers tasks by HTTP POST, signed with HMAC-SHA256.
package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ontimehq/ontime/internal/deliver"
	"github.com/ontimehq/ontime/internal/deliver/policy"
)

// Config configures the sink. Zero fields take defaults.
type Config struct {
	Secret    string        // signs calls when set (the global secret; Keys overrides it)
	Keys      *Keyring      // secrets per topic or destination, rotation; nil: Secret alone
	Timeout   time.Duration // per call; default 10s
	Client    *http.Client  // nil: a keep-alive client sized for many lanes
	UserAgent string        // default "ontime"
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
}

// Sink posts deliveries to their target URL.
type Sink struct {
	cfg    Config
	client *http.Client
}

// New builds a webhook sink.
func New(cfg Config) (*Sink, error) {
	if cfg.Timeout == 0 {
		cfg.Timeout = deliver.DefaultTimeout
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("delivery.timeout: %s is negative", cfg.Timeout)
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = "ontime"
	}
	if cfg.Keys == nil && cfg.Secret != "" {
		cfg.Keys = &Keyring{Global: []string{cfg.Secret}}
	}
	c := cfg.Client
	if c == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		if cfg.Policy != nil {
			// A proxy would be the address dialled, not the target: the
			// policy could not judge where the call goes.
			tr.Proxy = nil
			tr.DialContext = (&policy.Dialer{Policy: cfg.Policy, Dialer: net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}}).DialContext
		}
		tr.MaxIdleConns = 1024
		tr.MaxIdleConnsPerHost = 256 // ≥ a lane's concurrency: reuse, don't redial
		tr.IdleConnTimeout = 90 * time.Second
		c = &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse // a redirect is an answer, not a hop to follow with our signature
		}}
	}
	return &Sink{cfg: cfg, client: c}, nil
}

// body is the JSON a receiver gets.
type body struct {
	ID      string          `json:"id"`
	Topic   string          `json:"topic"`
	Key     string          `json:"key"`
	Payload json.RawMessage `json:"payload"`
	DueAt   string          `json:"due_at"`
	Attempt int             `json:"attempt"`
}

// StatusError is a non-2xx answer.
type StatusError struct {
	Code int
	// Body is a sanitized excerpt of the answer (printable ASCII, one
	// line, at most ExcerptBytes), only for targets Config.Echo allows.
	Body string
}

// ExcerptBytes bounds the excerpt of an answer kept in last_error.
const ExcerptBytes = 64

func (e *StatusError) Error() string {
	if e.Body == "" {
		return fmt.Sprintf("webhook answered HTTP %d", e.Code)
	}
	return fmt.Sprintf("webhook answered HTTP %d: %s", e.Code, e.Body)
}

// Deliver posts d to d.Target. Any 2xx is success. Everything else is
// retried except answers that say retrying cannot help: 410 Gone (the
// receiver removed the endpoint) — those are Permanent.
func (s *Sink) Deliver(ctx context.Context, d deliver.Delivery) error {
	payload := d.Payload
	if len(payload) == 0 {
		payload = []byte("null")
	}
	b, err := json.Marshal(body{ID: d.ID, Topic: d.Topic, Key: d.Key, Payload: payload,
		DueAt: d.DueAt.UTC().Format(time.RFC3339Nano), Attempt: d.Attempt})
	if err != nil {
		return deliver.Permanent(fmt.Errorf("encode webhook body: %w", err))
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.Target, bytes.NewReader(b))
	if err != nil {
		return deliver.Permanent(fmt.Errorf("webhook request: %w", err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", s.cfg.UserAgent)
	req.Header.Set("Ontime-Task-Id", d.ID)
	req.Header.Set("Ontime-Attempt", strconv.Itoa(d.Attempt))
	if secrets := s.cfg.Keys.For(d.Topic, d.Target); len(secrets) > 0 {
		req.Header.Set("Ontime-Signature", Sign(secrets, time.Now(), d.Target, b, s.cfg.Keys.V1))
	}
	resp, err := s.client.Do(req)
	if err != nil {
		if errors.Is(err, policy.ErrDenied) {
			// Retrying cannot make a denied address allowed.
			return deliver.Permanent(err)
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return fmt.Errorf("webhook timed out after %s: %w", s.cfg.Timeout, err)
		}
		return fmt.Errorf("webhook: %w", err)
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // drain for keep-alive
	if resp.StatusCode/100 == 2 {
		return nil
	}
	se := &StatusError{Code: resp.StatusCode}
	if s.cfg.Echo != nil && s.cfg.Echo(d.Target) {
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
