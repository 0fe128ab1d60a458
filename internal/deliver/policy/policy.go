// Package policy decides which addresses ontime may call on a submitter's
// behalf: a scheduler that dials any URL it is given is a tool for
// reaching what only it can reach (cloud metadata, its own admin API,
// internal services). The rules are checked twice: on the target's host
// when a task is submitted (a literal address that is denied is refused
// with 400 at once), and on every address actually dialled (Dialer), so a
// name that resolves, or later rebinds, to a denied address is refused too.
package policy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"path"
	"strconv"
	"strings"
	"syscall"
)

// ErrDenied is wrapped by every refusal; errors.As to *DeniedError for why.
var ErrDenied = errors.New("target denied by the delivery policy")

// DeniedError says which address or host a rule refused.
type DeniedError struct {
	What string // the host or address refused
	Why  string // the rule: "delivery.deny_targets 10.0.0.0/8", "link-local or metadata address" …
}

func (e *DeniedError) Error() string {
	return fmt.Sprintf("%s is denied by the delivery policy (%s)", e.What, e.Why)
}

// Is makes errors.Is(err, ErrDenied) true.
func (e *DeniedError) Is(target error) bool { return target == ErrDenied }

// PolicyDenied classes the error for metrics (metrics.PolicyDenier).
func (e *DeniedError) PolicyDenied() bool { return true }

// Defaults denied whatever delivery.deny_targets says, unless an entry of
// delivery.allow_targets names them: no webhook has a reason to live there.
var (
	// DefaultDenyCIDRs: link-local (where every cloud keeps its metadata
	// service, 169.254.169.254), unspecified ("this host", which the kernel
	// dials as loopback), multicast and broadcast, and the metadata
	// addresses that are not link-local (Alibaba Cloud, AWS over IPv6).
	DefaultDenyCIDRs = []string{
		"169.254.0.0/16", "fe80::/10", "0.0.0.0/8", "::/128",
		"224.0.0.0/4", "ff00::/8", "255.255.255.255/32",
		"100.100.100.200/32", "fd00:ec2::254/128",
	}
	// DefaultDenyHosts: metadata services' names.
	DefaultDenyHosts = []string{
		"metadata.google.internal", "metadata.goog", "metadata", "instance-data",
		"instance-data.ec2.internal", "metadata.azure.internal",
	}
)

// Config is the policy's input. Rules are CIDRs ("10.0.0.0/8", "::1/128",
// a bare address) or host globs ("*.internal.example", "billing.example").
type Config struct {
	Allow []string // delivery.allow_targets: when set, only these; they also lift the defaults
	Deny  []string // delivery.deny_targets: never these
	// Self are ontime's own API addresses (listen, cluster.advertise):
	// a task must not call the API that would act on it (a requeue of a
	// dead task, a cancel of another's). Always denied.
	Self []string
	// Resolver resolves names before they are dialled; nil: net.DefaultResolver.
	// Tests give one that answers what they want.
	Resolver Resolver
	// LocalAddrs are this host's interface addresses, for Self entries on
	// an unspecified address (0.0.0.0:7070 is reachable on each of them);
	// nil: read from the system.
	LocalAddrs []netip.Addr
}

// Resolver is what the policy needs to resolve names.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

type rules struct {
	nets  []netip.Prefix
	hosts []string // lower case globs
}

func (r rules) empty() bool { return len(r.nets) == 0 && len(r.hosts) == 0 }

func (r rules) matchIP(a netip.Addr) (string, bool) {
	for _, p := range r.nets {
		if p.Contains(a) {
			return p.String(), true
		}
	}
	return "", false
}

func (r rules) matchHost(h string) (string, bool) {
	for _, g := range r.hosts {
		if ok, _ := path.Match(g, h); ok {
			return g, true
		}
	}
	return "", false
}

func parseRules(key string, in []string) (rules, error) {
	var r rules
	for i, s := range in {
		s = strings.ToLower(strings.TrimSpace(s))
		switch {
		case s == "":
			return r, fmt.Errorf("%s[%d]: empty", key, i)
		case strings.Contains(s, "/"):
			p, err := netip.ParsePrefix(s)
			if err != nil {
				return r, fmt.Errorf("%s[%d]: %q is not a CIDR such as 10.0.0.0/8", key, i, s)
			}
			r.nets = append(r.nets, unmapPrefix(p.Masked()))
		default:
			if a, err := netip.ParseAddr(s); err == nil {
				a = a.Unmap().WithZone("")
				r.nets = append(r.nets, netip.PrefixFrom(a, a.BitLen()))
				continue
			}
			s = strings.TrimSuffix(s, ".")
			if _, err := path.Match(s, ""); err != nil || strings.ContainsAny(s, ":/@ ") {
				return r, fmt.Errorf("%s[%d]: %q is neither a CIDR nor a host glob such as *.example.com", key, i, s)
			}
			r.hosts = append(r.hosts, s)
		}
	}
	return r, nil
}

// unmapPrefix turns ::ffff:10.0.0.0/104 into 10.0.0.0/8, so that one form
// of a rule catches both forms of an address.
func unmapPrefix(p netip.Prefix) netip.Prefix {
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p
}

// Policy checks targets and dials only allowed addresses.
type Policy struct {
	allow, deny, defaults rules
	self                  []netip.AddrPort
	selfAnyPorts          []uint16 // ports of Self entries on an unspecified address
	selfHosts             map[string]bool
	local                 []netip.Addr
	resolver              Resolver
}

// New parses cfg; errors name the config key.
func New(cfg Config) (*Policy, error) {
	p := &Policy{selfHosts: map[string]bool{}, resolver: cfg.Resolver, local: cfg.LocalAddrs}
	var err error
	if p.allow, err = parseRules("delivery.allow_targets", cfg.Allow); err != nil {
		return nil, err
	}
	if p.deny, err = parseRules("delivery.deny_targets", cfg.Deny); err != nil {
		return nil, err
	}
	if p.defaults, err = parseRules("defaults", append(append([]string{}, DefaultDenyCIDRs...), DefaultDenyHosts...)); err != nil {
		return nil, err
	}
	if p.resolver == nil {
		p.resolver = net.DefaultResolver
	}
	for _, s := range cfg.Self {
		if s == "" {
			continue
		}
		host, port, err := net.SplitHostPort(s)
		if err != nil {
			return nil, fmt.Errorf("own API address %q: %w", s, err)
		}
		pn, err := strconv.ParseUint(port, 10, 16)
		if err != nil {
			return nil, fmt.Errorf("own API address %q: bad port", s)
		}
		p.selfHosts[strings.ToLower(strings.TrimSuffix(host, "."))+":"+port] = true
		a, err := netip.ParseAddr(host)
		switch {
		case host == "" || (err == nil && a.IsUnspecified()):
			p.selfAnyPorts = append(p.selfAnyPorts, uint16(pn))
		case err == nil:
			p.self = append(p.self, netip.AddrPortFrom(a.Unmap().WithZone(""), uint16(pn)))
		case strings.EqualFold(host, "localhost"):
			p.self = append(p.self, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(pn)),
				netip.AddrPortFrom(netip.IPv6Loopback(), uint16(pn)))
		}
	}
	if len(p.selfAnyPorts) > 0 && p.local == nil {
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				if pfx, err := netip.ParsePrefix(a.String()); err == nil {
					p.local = append(p.local, pfx.Addr().Unmap())
				}
			}
		}
	}
	return p, nil
}

// ParseHost reads a URL host the way a C resolver would: besides the
// standard forms it accepts inet_aton's, a single number (2130706433),
// hex (0x7f000001) and octal parts (0177.0.0.1), two or three parts
// (127.1). numeric reports a host in one of those legacy forms, which
// ontime refuses at submit: a name that is an address in disguise has no
// honest use.
func ParseHost(host string) (addr netip.Addr, ok, legacy bool) {
	h := strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if a, err := netip.ParseAddr(h); err == nil {
		return a.Unmap().WithZone(""), true, false
	}
	if a, ok := parseInetAton(h); ok {
		return a, true, true
	}
	return netip.Addr{}, false, false
}

// parseInetAton parses the IPv4 forms glibc's inet_aton accepts.
func parseInetAton(s string) (netip.Addr, bool) {
	if s == "" {
		return netip.Addr{}, false
	}
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	vals := make([]uint64, len(parts))
	for i, p := range parts {
		base := 10
		switch {
		case strings.HasPrefix(p, "0x") || strings.HasPrefix(p, "0X"):
			base, p = 16, p[2:]
			if p == "" { // "0x" is zero to inet_aton
				p = "0"
			}
		case len(p) > 1 && p[0] == '0':
			base, p = 8, p[1:]
		}
		v, err := strconv.ParseUint(p, base, 32)
		if err != nil {
			return netip.Addr{}, false
		}
		vals[i] = v
	}
	var n uint64
	last := len(vals) - 1
	for i := 0; i < last; i++ {
		if vals[i] > 255 {
			return netip.Addr{}, false
		}
		n |= vals[i] << (24 - 8*uint(i))
	}
	if vals[last] >= 1<<(32-8*uint(last)) {
		return netip.Addr{}, false
	}
	n |= vals[last]
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true
}

// embedded4 is the IPv4 address carried by an IPv6 one that reaches it
// (NAT64 64:ff9b::/96), so 64:ff9b::a9fe:a9fe is judged as 169.254.169.254.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

func embedded4(a netip.Addr) (netip.Addr, bool) {
	if a.Is6() && nat64.Contains(a) {
		b := a.As16()
		return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}), true
	}
	return netip.Addr{}, false
}

// CheckAddr judges one address about to be dialled; host is the name it
// was resolved from ("" when the target was an address).
func (p *Policy) CheckAddr(host string, ap netip.AddrPort) error {
	a := ap.Addr().Unmap().WithZone("")
	if e4, ok := embedded4(a); ok {
		if err := p.CheckAddr(host, netip.AddrPortFrom(e4, ap.Port())); err != nil {
			return err
		}
	}
	what := netip.AddrPortFrom(a, ap.Port()).String()
	if host != "" {
		what = host + " (" + what + ")"
	}
	if p.isSelf(netip.AddrPortFrom(a, ap.Port())) {
		return &DeniedError{What: what, Why: "ontime's own API address"}
	}
	if rule, ok := p.deny.matchIP(a); ok {
		return &DeniedError{What: what, Why: "delivery.deny_targets " + rule}
	}
	// An allow entry lifts a default denial only when it names the
	// address: allowing "*.partner.example" must not let a name there
	// that resolves to 169.254.169.254 through.
	_, byIP := p.allow.matchIP(a)
	if !p.allow.empty() {
		_, byHost := p.allow.matchHost(host)
		if !byIP && !(host != "" && byHost) {
			return &DeniedError{What: what, Why: "not in delivery.allow_targets"}
		}
	}
	if rule, ok := p.defaults.matchIP(a); ok && !byIP {
		return &DeniedError{What: what, Why: "denied by default: " + rule + " (link-local, metadata, unspecified, multicast or broadcast)"}
	}
	return nil
}

// checkHost judges a host name (not an address) by the host rules.
func (p *Policy) checkHost(host, port string) error {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	if p.selfHosts[h+":"+port] {
		return &DeniedError{What: h + ":" + port, Why: "ontime's own API address"}
	}
	if rule, ok := p.deny.matchHost(h); ok {
		return &DeniedError{What: h, Why: "delivery.deny_targets " + rule}
	}
	if _, ok := p.allow.matchHost(h); ok {
		return nil
	}
	if rule, ok := p.defaults.matchHost(h); ok {
		return &DeniedError{What: h, Why: "denied by default: " + rule + " (a metadata service)"}
	}
	return nil
}

func (p *Policy) isSelf(ap netip.AddrPort) bool {
	for _, s := range p.self {
		if s == ap {
			return true
		}
	}
	for _, port := range p.selfAnyPorts {
		if port != ap.Port() {
			continue
		}
		a := ap.Addr()
		if a.IsLoopback() || a.IsUnspecified() {
			return true
		}
		for _, l := range p.local {
			if l == a {
				return true
			}
		}
	}
	return false
}

// CheckTarget judges a target URL at submit, as far as can be known
// without resolving names: a host in a legacy numeric form is refused,
// an address is checked as it would be dialled, a name by the host rules
// (its addresses are checked when it is dialled). Errors wrap ErrDenied,
// or describe the malformed host.
func (p *Policy) CheckTarget(target string) error {
	u, err := url.Parse(target)
	if err != nil || u.Host == "" {
		return nil // the target's own validation says what is wrong
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil // mq:// targets name configured brokers, not hosts
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	pn, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return fmt.Errorf("port %q is not a number from 0 to 65535", port)
	}
	a, isAddr, legacy := ParseHost(host)
	if legacy {
		return fmt.Errorf("host %q is an IPv4 address in a non-standard form (%s); write it in dotted decimal", host, a)
	}
	if isAddr {
		return p.CheckAddr("", netip.AddrPortFrom(a, uint16(pn)))
	}
	return p.checkHost(host, port)
}

// Dialer dials only what the policy allows: it resolves the name itself,
// checks every address and dials only those allowed, and the socket's
// Control hook checks again the address the kernel is asked to connect
// to. A name that resolves to a denied address is never connected to, and
// as the addresses dialled are the ones checked, a DNS answer that changes
// between check and dial (rebinding) changes nothing.
type Dialer struct {
	Policy *Policy
	Dialer net.Dialer // Timeout, KeepAlive; Control is set by DialContext
}

// DialContext is for http.Transport.DialContext.
func (d *Dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	pn, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("dial %s: bad port", address)
	}
	p := d.Policy
	var addrs []netip.Addr
	name := ""
	if a, ok, _ := ParseHost(host); ok {
		addrs = []netip.Addr{a}
	} else {
		name = strings.ToLower(strings.TrimSuffix(host, "."))
		if err := p.checkHost(name, port); err != nil {
			return nil, err
		}
		rnet := "ip"
		switch network {
		case "tcp4":
			rnet = "ip4"
		case "tcp6":
			rnet = "ip6"
		}
		if addrs, err = p.resolver.LookupNetIP(ctx, rnet, host); err != nil {
			return nil, err
		}
	}
	var denied, dialErr error
	for _, a := range addrs {
		ap := netip.AddrPortFrom(a.Unmap().WithZone(""), uint16(pn))
		if err := p.CheckAddr(name, ap); err != nil {
			denied = err
			continue
		}
		nd := d.Dialer
		nd.Control = func(_, raddr string, _ syscall.RawConn) error {
			got, err := netip.ParseAddrPort(raddr)
			if err != nil {
				return fmt.Errorf("%w: cannot read the dialled address %q", ErrDenied, raddr)
			}
			return p.CheckAddr(name, got)
		}
		c, err := nd.DialContext(ctx, network, ap.String())
		if err == nil {
			return c, nil
		}
		dialErr = err
		if ctx.Err() != nil {
			break
		}
	}
	switch {
	case dialErr != nil: // an allowed address was tried: its failure is the answer
		return nil, dialErr
	case denied != nil:
		return nil, denied
	default:
		return nil, fmt.Errorf("dial %s: the name has no address", address)
	}
}

// Matcher matches a URL's host against rules of the policy's syntax
// (CIDRs, host globs) without resolving it: for choices that are not
// about where a call goes, such as whose error answers may be quoted.
type Matcher struct{ r rules }

// NewMatcher parses rules; key names the config key in errors.
func NewMatcher(key string, in []string) (*Matcher, error) {
	r, err := parseRules(key, in)
	if err != nil {
		return nil, err
	}
	return &Matcher{r: r}, nil
}

// MatchURL reports whether target's host matches a rule.
func (m *Matcher) MatchURL(target string) bool {
	u, err := url.Parse(target)
	if err != nil || u.Host == "" {
		return false
	}
	if a, ok, _ := ParseHost(u.Hostname()); ok {
		_, hit := m.r.matchIP(a)
		return hit
	}
	_, hit := m.r.matchHost(strings.ToLower(strings.TrimSuffix(u.Hostname(), ".")))
	return hit
}
