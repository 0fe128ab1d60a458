package policy

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeResolver answers from a map, as a DNS server under an attacker's
// control would.
type fakeResolver map[string][]string

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	as, ok := f[strings.ToLower(host)]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	out := make([]netip.Addr, len(as))
	for i, a := range as {
		out[i] = netip.MustParseAddr(a)
	}
	return out, nil
}

func mustNew(t *testing.T, cfg Config) *Policy {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Every form in which a denied address can be written is refused at
// submit; what the defaults allow (loopback, private ranges, names) passes.
func TestCheckTargetBypassForms(t *testing.T) {
	t.Parallel()
	p := mustNew(t, Config{Self: []string{"127.0.0.1:7070", "ontime.internal.example:7443"}})
	for _, tc := range []struct {
		target string
		denied bool   // wraps ErrDenied
		bad    string // another error, containing this
	}{
		{"http://169.254.169.254/latest/meta-data/", true, ""},
		{"http://[::ffff:169.254.169.254]/", true, ""},
		{"http://[::ffff:a9fe:a9fe]/", true, ""},
		{"http://[64:ff9b::a9fe:a9fe]/", true, ""}, // NAT64 of the metadata address
		{"http://[fe80::1]/", true, ""},
		{"http://[fe80::1%25eth0]:8080/", true, ""},
		{"http://0.0.0.0:8080/", true, ""},
		{"http://[::]:8080/", true, ""},
		{"http://[::ffff:0.0.0.0]:8080/", true, ""},
		{"http://224.0.0.1/", true, ""},
		{"http://100.100.100.200/", true, ""},
		{"http://metadata.google.internal/computeMetadata/v1/", true, ""},
		{"http://METADATA.Google.Internal./", true, ""},
		{"http://127.0.0.1:7070/v1/tasks/x:requeue", true, ""}, // ontime's own API
		{"http://[::ffff:127.0.0.1]:7070/", true, ""},
		{"http://ontime.internal.example:7443/", true, ""},
		{"http://2130706433/", false, "non-standard form"}, // 127.0.0.1 in decimal
		{"http://2852039166/", false, "non-standard form"}, // 169.254.169.254 in decimal
		{"http://0x7f000001/", false, "non-standard form"},
		{"http://0xa9.0xfe.0xa9.0xfe/", false, "non-standard form"},
		{"http://0177.0.0.1/", false, "non-standard form"},
		{"http://127.1/", false, "non-standard form"},
		{"http://169.254.43518/", false, "non-standard form"},
		{"http://127.0.0.1:8080/hook", false, ""},
		{"http://[::1]:8080/hook", false, ""},
		{"http://10.0.0.1/", false, ""},
		{"http://[fd00::1]/", false, ""},
		{"https://shop.example/hooks", false, ""},
		{"http://127.0.0.1:7071/", false, ""},
	} {
		err := p.CheckTarget(tc.target)
		switch {
		case tc.denied && !errors.Is(err, ErrDenied):
			t.Errorf("%s: %v; want denied", tc.target, err)
		case !tc.denied && tc.bad == "" && err != nil:
			t.Errorf("%s: %v; want allowed", tc.target, err)
		case tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad)):
			t.Errorf("%s: %v; want an error with %q", tc.target, err, tc.bad)
		}
	}
}

func TestParseHostInetAton(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"2130706433": "127.0.0.1", "0x7f000001": "127.0.0.1", "0177.0.0.1": "127.0.0.1", "127.1": "127.0.0.1",
		"127.0.1": "127.0.0.1", "0xA9FEA9FE": "169.254.169.254", "0": "0.0.0.0", "4294967295": "255.255.255.255",
	} {
		a, ok, legacy := ParseHost(in)
		if !ok || !legacy || a.String() != want {
			t.Errorf("%s: %v %v %v; want %s", in, a, ok, legacy, want)
		}
	}
	for _, in := range []string{"4294967296", "1.2.3.4.5", "256.1.1.1", "example.com", "0x", "1..2", "08.1.1.1"} {
		if a, ok, _ := ParseHost(in); ok && in != "0x" {
			t.Errorf("%s parsed as %v", in, a)
		}
	}
}

func TestConfiguredRules(t *testing.T) {
	t.Parallel()
	p := mustNew(t, Config{Deny: []string{"10.0.0.0/8", "*.corp.example", "::ffff:192.168.0.0/112"}})
	for target, denied := range map[string]bool{
		"http://10.1.2.3/": true, "http://[::ffff:10.1.2.3]/": true, "http://db.corp.example/": true,
		"http://192.168.7.7/": true, "http://192.169.0.1/": false, "http://corp.example/": false,
		"http://127.0.0.1/": false,
	} {
		if err := p.CheckTarget(target); errors.Is(err, ErrDenied) != denied {
			t.Errorf("%s: %v; denied want %v", target, err, denied)
		}
	}
	// Locked down: only what is allowed, and an allow entry lifts a default.
	p = mustNew(t, Config{Allow: []string{"*.partner.example", "203.0.113.0/24", "169.254.10.10"}})
	for addr, denied := range map[string]bool{
		"203.0.113.5:443": false, "198.51.100.1:443": true, "127.0.0.1:80": true,
		"169.254.10.10:80": false, "169.254.169.254:80": true,
	} {
		if err := p.CheckAddr("", netip.MustParseAddrPort(addr)); errors.Is(err, ErrDenied) != denied {
			t.Errorf("%s: %v; denied want %v", addr, err, denied)
		}
	}
	if err := p.CheckAddr("api.partner.example", netip.MustParseAddrPort("198.51.100.1:443")); err != nil {
		t.Errorf("allowed name: %v", err)
	}
	// An allowed name does not lift the defaults for where it resolves.
	if err := p.CheckAddr("evil.partner.example", netip.MustParseAddrPort("169.254.169.254:80")); !errors.Is(err, ErrDenied) {
		t.Errorf("allowed name resolving to the metadata address: %v", err)
	}
	for _, bad := range [][]string{{"10.0.0.0/33"}, {""}, {"http://x"}, {"a[b"}} {
		if _, err := New(Config{Deny: bad}); err == nil || !strings.Contains(err.Error(), "delivery.deny_targets[0]") {
			t.Errorf("deny %q: %v", bad, err)
		}
	}
}

// A self entry on an unspecified address covers loopback and every
// local address on that port.
func TestSelfOnAllInterfaces(t *testing.T) {
	t.Parallel()
	p := mustNew(t, Config{Self: []string{"0.0.0.0:7070"}, LocalAddrs: []netip.Addr{netip.MustParseAddr("192.0.2.10")}})
	for addr, denied := range map[string]bool{
		"127.0.0.1:7070": true, "[::1]:7070": true, "192.0.2.10:7070": true, "192.0.2.11:7070": false, "127.0.0.1:7071": false,
	} {
		if err := p.CheckAddr("", netip.MustParseAddrPort(addr)); errors.Is(err, ErrDenied) != denied {
			t.Errorf("%s: %v; denied want %v", addr, err, denied)
		}
	}
}

// The dialer judges the addresses a name resolves to: a name pointing at a
// denied address is never connected to, whatever the rules say about the
// name; a name with one good and one denied address reaches only the good.
func TestDialerChecksResolvedAddresses(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	res := fakeResolver{
		"metadata.attacker.example": {"169.254.169.254"},
		"mapped.attacker.example":   {"::ffff:169.254.169.254"},
		"zero.attacker.example":     {"0.0.0.0"},
		"loop.attacker.example":     {"127.0.0.1"},
		"mixed.attacker.example":    {"169.254.169.254", "127.0.0.1"},
	}
	d := &Dialer{Policy: mustNew(t, Config{Resolver: res}), Dialer: net.Dialer{Timeout: 5 * time.Second}}
	ctx := context.Background()
	for _, host := range []string{"metadata.attacker.example", "mapped.attacker.example", "zero.attacker.example", "metadata.google.internal"} {
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, "80"))
		if !errors.Is(err, ErrDenied) {
			t.Errorf("%s: %v; want denied", host, err)
		}
		if c != nil {
			c.Close()
		}
	}
	for _, host := range []string{"loop.attacker.example", "mixed.attacker.example"} {
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, itoa(port)))
		if err != nil {
			t.Fatalf("%s: %v", host, err)
		}
		c.Close()
	}
	for deadline := time.Now().Add(10 * time.Second); accepted.Load() < 2 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if got := accepted.Load(); got != 2 {
		t.Fatalf("allowed dials: %d connections accepted, want 2", got)
	}
	// The same name, denied by the operator's rule on the address.
	strict := &Dialer{Policy: mustNew(t, Config{Resolver: res, Deny: []string{"127.0.0.0/8"}})}
	before := accepted.Load()
	if _, err := strict.DialContext(ctx, "tcp", net.JoinHostPort("loop.attacker.example", itoa(port))); !errors.Is(err, ErrDenied) {
		t.Fatalf("loopback under deny 127.0.0.0/8: %v", err)
	}
	// A literal in a legacy form is read as the resolver would read it.
	if _, err := strict.DialContext(ctx, "tcp", net.JoinHostPort("2130706433", itoa(port))); !errors.Is(err, ErrDenied) {
		t.Fatalf("2130706433 under deny 127.0.0.0/8: %v", err)
	}
	if got := accepted.Load(); got != before {
		t.Fatalf("%d connections reached a denied address", got-before)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
