package webhook

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/deliver"
)

// Retry-After in both forms: delay seconds and an HTTP date; a past date,
// a malformed value and an absent one are no wait.
func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		v    string
		want time.Duration
		ok   bool
	}{
		{"30", 30 * time.Second, true},
		{" 120 ", 2 * time.Minute, true},
		{"0", 0, false},
		{"-5", 0, false},
		{"Thu, 26 Nov 2026 12:01:30 GMT", 90 * time.Second, true},
		{"Thursday, 26-Nov-26 12:00:10 GMT", 10 * time.Second, true}, // RFC 850, which HTTP dates allow
		{"Thu, 26 Nov 2026 11:59:00 GMT", 0, false},                  // past
		{"soon", 0, false},
		{"", 0, false},
		{"99999999999999", time.Duration(1<<32) * time.Second, true}, // bounded, capped by the completer
	} {
		got, ok := ParseRetryAfter(tc.v, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%q: %s %v; want %s %v", tc.v, got, ok, tc.want, tc.ok)
		}
	}
}

// A 429 or a 503 with Retry-After is a failed attempt that carries the
// wait (deliver.RetryAfterOf) and says it in last_error; another status's
// Retry-After is not read.
func TestDeliverRetryAfter(t *testing.T) {
	var status int
	var header string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", header)
		w.WriteHeader(status)
	}))
	defer srv.Close()
	s, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	d := deliver.Delivery{ID: "a", Topic: "t", Target: srv.URL, Payload: []byte(`1`), Attempt: 1}
	for _, tc := range []struct {
		status int
		header string
		min    time.Duration
		max    time.Duration
		text   string
	}{
		{429, "30", 30 * time.Second, 30 * time.Second, "webhook answered HTTP 429, Retry-After 30s"},
		{503, time.Now().Add(10 * time.Second).UTC().Format(http.TimeFormat), 8 * time.Second, 10 * time.Second, "webhook answered HTTP 503, Retry-After "},
		{500, "30", 0, 0, "webhook answered HTTP 500"},
		{503, "", 0, 0, "webhook answered HTTP 503"},
	} {
		status, header = tc.status, tc.header
		err := s.Deliver(context.Background(), d)
		got, ok := deliver.RetryAfterOf(err)
		if ok != (tc.max > 0) || got < tc.min || got > tc.max || !strings.HasPrefix(err.Error(), tc.text) {
			t.Errorf("%d Retry-After %q: %v (wait %s %v); want %s..%s", tc.status, tc.header, err, got, ok, tc.min, tc.max)
		}
	}
}
