package webhook

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/deliver"
	"github.com/ontimehq/ontime/internal/deliver/policy"
)

// A receiver's answer is quoted only for targets the operator allows, and
// then only as a short, printable, one-line excerpt.
func TestErrorExcerptOnlyWhenAllowed(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(503)
		io.WriteString(w, "  secret\x00internal\n\n  answer: "+strings.Repeat("x", 300)+"\xff")
	}))
	defer srv.Close()
	s, _ := New(Config{Echo: func(target string) bool { return strings.HasSuffix(target, "/echo") }})
	err := s.Deliver(context.Background(), deliver.Delivery{Target: srv.URL + "/echo"})
	var se *StatusError
	if !errors.As(err, &se) || se.Code != 503 {
		t.Fatalf("%v", err)
	}
	if se.Body != "secret?internal answer: "+strings.Repeat("x", ExcerptBytes-len("secret?internal answer: ")) {
		t.Fatalf("excerpt %q", se.Body)
	}
	err = s.Deliver(context.Background(), deliver.Delivery{Target: srv.URL + "/quiet"})
	if err == nil || err.Error() != "webhook answered HTTP 503" {
		t.Fatalf("not allowed to echo: %v", err)
	}
}

// A target whose name resolves to a denied address fails permanently
// (never retried) and the receiver there is never called.
func TestDeniedAddressIsPermanent(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { calls.Add(1) }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	pol, err := policy.New(policy.Config{Deny: []string{"127.0.0.0/8"}, Resolver: staticResolver("127.0.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := New(Config{Policy: pol})
	for _, target := range []string{"http://internal.attacker.example:" + port + "/", srv.URL + "/"} {
		err := s.Deliver(context.Background(), deliver.Delivery{Target: target})
		if !errors.Is(err, policy.ErrDenied) || !deliver.IsPermanent(err) {
			t.Errorf("%s: %v; want a permanent denial", target, err)
		}
	}
	if calls.Load() != 0 {
		t.Fatalf("the denied receiver was called %d times", calls.Load())
	}
	// Allowed by the policy's defaults: delivered.
	open, _ := policy.New(policy.Config{Resolver: staticResolver("127.0.0.1")})
	s, _ = New(Config{Policy: open})
	if err := s.Deliver(context.Background(), deliver.Delivery{Target: "http://receiver.example:" + port + "/"}); err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 1 {
		t.Fatalf("calls %d", calls.Load())
	}
}

type staticResolver string

func (s staticResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return []netip.Addr{netip.MustParseAddr(string(s))}, nil
}

// Secrets per topic and destination, the global one otherwise; during a
// rotation a call carries a signature by each secret, and a receiver
// knowing either accepts it.
func TestKeyringAndRotation(t *testing.T) {
	t.Parallel()
	k := &Keyring{
		Global: []string{"global-new", "global-old"},
		Entries: []KeyEntry{
			{Topics: "orders.*", Secrets: []string{"orders"}},
			{Destination: "https://billing.example", Secrets: []string{"billing-new", "billing-old"}},
		},
	}
	for _, tc := range []struct {
		topic, target string
		want          []string
	}{
		{"orders.cancel", "https://billing.example/x", []string{"orders"}},
		{"invoices", "https://billing.example/x?y=1", []string{"billing-new", "billing-old"}},
		{"invoices", "https://BILLING.example/x", []string{"billing-new", "billing-old"}},
		{"invoices", "http://billing.example/x", []string{"global-new", "global-old"}},
		{"invoices", "https://billing.example:8443/x", []string{"global-new", "global-old"}},
	} {
		if got := k.For(tc.topic, tc.target); strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s %s: %v; want %v", tc.topic, tc.target, got, tc.want)
		}
	}
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{"id":"x"}`)
	target := "https://billing.example/hook"
	h := Sign(k.For("invoices", target), now, target, body, true)
	if strings.Count(h, "v2=") != 2 || strings.Count(h, "v1=") != 1 {
		t.Fatalf("header %s", h)
	}
	for _, secret := range []string{"billing-new", "billing-old"} {
		if err := Verify(h, target, body, now, time.Minute, secret); err != nil {
			t.Errorf("%s: %v", secret, err)
		}
	}
	if err := Verify(h, target, body, now, time.Minute, "global-new"); !errors.Is(err, ErrBadSignature) {
		t.Errorf("another topic's secret verified: %v", err)
	}
	// A receiver that already moved keeps the old secret as its second.
	if err := Verify(Sign([]string{"billing-old"}, now, target, body, false), target, body, now, time.Minute, "billing-new", "billing-old"); err != nil {
		t.Errorf("old signature with both secrets: %v", err)
	}
	// v1 alone is never accepted.
	v1Only := "t=1800000000," + h[strings.Index(h, "v1="):]
	if err := Verify(v1Only, target, body, now, time.Minute, "billing-new"); !errors.Is(err, ErrBadSignature) {
		t.Errorf("v1 accepted: %v", err)
	}
}
