// Package webhook delivers tasks by HTTP POST, signed with HMAC-SHA256.
package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
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
)

// Config configures the sink. Zero fields take defaults.
type Config struct {
	Secret    string        // signs calls when set
	Timeout   time.Duration // per call; default 10s
	Client    *http.Client  // nil: a keep-alive client sized for many lanes
	UserAgent string        // default "ontime"
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
	c := cfg.Client
	if c == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
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
	Body string // up to 256 bytes of the answer
}

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
	if s.cfg.Secret != "" {
		req.Header.Set("Ontime-Signature", Sign(s.cfg.Secret, time.Now(), b))
	}
	resp, err := s.client.Do(req)
	if err != nil {
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
	se := &StatusError{Code: resp.StatusCode, Body: strings.ToValidUTF8(strings.TrimSpace(string(snippet)), "\uFFFD")}
	if resp.StatusCode == http.StatusGone {
		return deliver.Permanent(se)
	}
	return se
}

// Sign returns the Ontime-Signature header value for body sent at t:
// "t=<unix seconds>,v1=<hex HMAC-SHA256(secret, t + "." + body)>".
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

func mac(secret, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts))
	m.Write([]byte("."))
	m.Write(body)
	return m.Sum(nil)
}

// ErrBadSignature is wrapped by every Verify failure.
var ErrBadSignature = errors.New("bad webhook signature")

// Verify checks an Ontime-Signature header against the raw body and
// rejects signatures whose timestamp is further than tolerance from now
// (replays). The comparison is constant-time.
func Verify(secret, header string, body []byte, now time.Time, tolerance time.Duration) error {
	var ts string
	var sigs [][]byte
	for _, part := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		switch k {
		case "t":
			ts = v
		case "v1":
			if b, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, b)
			}
		}
	}
	if ts == "" || len(sigs) == 0 {
		return fmt.Errorf("%w: header %q lacks t= or v1=", ErrBadSignature, header)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: timestamp %q", ErrBadSignature, ts)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w: timestamp is %s away from now", ErrBadSignature, d.Round(time.Second))
	}
	want := mac(secret, ts, body)
	for _, s := range sigs {
		if hmac.Equal(s, want) {
			return nil
		}
	}
	return fmt.Errorf("%w: no v1 signature matches", ErrBadSignature)
}
