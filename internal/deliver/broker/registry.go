package broker

import (
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/ontimehq/ontime/internal/task"
)

// Kind is one kind of broker as a Registry knows it: the URL schemes it
// answers to, the check of such a URL (config validation) and the
// constructor of its publisher (node wiring). Each publisher package
// describes itself with one, so a new kind is a package and one line in the
// composition root's registry.
type Kind struct {
	Schemes  []string // lower case, e.g. "amqp", "amqps"
	CheckURL func(raw string) error
	New      func(Options) (Publisher, error)
}

// Options is what a Kind's constructor is given.
type Options struct {
	Name    string        // the broker's name in the config, for logs
	URL     string        // one of the kind's schemes
	Timeout time.Duration // delivery.timeout, bounding one attempt
	Logger  *slog.Logger
}

// Registry maps a broker URL's scheme to its Kind. The composition root
// builds one listing every kind; config validation, node wiring and the
// errors that list the accepted schemes all read it.
type Registry struct {
	schemes []string // in registration order, for messages
	kinds   map[string]Kind
}

// NewRegistry returns a registry of kinds.
func NewRegistry(kinds ...Kind) *Registry {
	r := &Registry{kinds: map[string]Kind{}}
	for _, k := range kinds {
		r.Register(k)
	}
	return r
}

// Register adds a kind under each of its schemes. A scheme registered
// twice, or a kind without a check or a constructor, is a mistake of the
// composition root, so it panics.
func (r *Registry) Register(k Kind) {
	if len(k.Schemes) == 0 || k.CheckURL == nil || k.New == nil {
		panic("broker: Register needs schemes, CheckURL and New")
	}
	for _, s := range k.Schemes {
		if _, dup := r.kinds[s]; dup || s != strings.ToLower(s) {
			panic(fmt.Sprintf("broker: scheme %q registered twice or not lower case", s))
		}
		r.kinds[s] = k
		r.schemes = append(r.schemes, s)
	}
}

// Schemes lists the registered schemes in registration order.
func (r *Registry) Schemes() []string { return slices.Clone(r.schemes) }

// lookup finds the kind of a (trimmed) broker URL.
func (r *Registry) lookup(raw string) (Kind, error) {
	scheme, _, ok := strings.Cut(raw, "://")
	if !ok {
		want := make([]string, len(r.schemes))
		for i, s := range r.schemes {
			want[i] = s + "://"
		}
		return Kind{}, fmt.Errorf("not a URL; want %s", orList(want))
	}
	k, ok := r.kinds[strings.ToLower(scheme)]
	if !ok {
		return Kind{}, fmt.Errorf("scheme %q is not one of %s", scheme, strings.Join(r.schemes, ", "))
	}
	return k, nil
}

func orList(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// Check judges the brokers of a config, {NAME: URL}, in name order: each
// name valid, each URL of a registered scheme and accepted by its kind.
// Errors name brokers.NAME and never repeat the URL's password.
func (r *Registry) Check(brokers map[string]string) error {
	for _, name := range sortedNames(brokers) {
		if _, err := r.check(name, brokers[name]); err != nil {
			return err
		}
	}
	return nil
}

func (r *Registry) check(name, raw string) (Kind, error) {
	if err := task.ValidateBrokerName(name); err != nil {
		return Kind{}, fmt.Errorf("brokers.%s: the name %w", name, err)
	}
	raw = strings.TrimSpace(raw)
	k, err := r.lookup(raw)
	if err == nil {
		err = k.CheckURL(raw)
	}
	if err != nil {
		return Kind{}, fmt.Errorf("brokers.%s: %s", name, redactURLError(err, raw))
	}
	return k, nil
}

// NewSet builds a publisher per configured broker (none connects before it
// is started) and the Set of mq:// targets over them; timeout is
// delivery.timeout. Errors are Check's.
func (r *Registry) NewSet(brokers map[string]string, timeout time.Duration, log *slog.Logger) (*Set, error) {
	pubs := make(map[string]Publisher, len(brokers))
	for _, name := range sortedNames(brokers) {
		k, err := r.check(name, brokers[name])
		if err != nil {
			return nil, err
		}
		raw := strings.TrimSpace(brokers[name])
		p, err := k.New(Options{Name: name, URL: raw, Timeout: timeout, Logger: log})
		if err != nil {
			return nil, fmt.Errorf("brokers.%s: %s", name, redactURLError(err, raw))
		}
		pubs[name] = p
	}
	return NewSet(pubs, timeout)
}

func sortedNames(brokers map[string]string) []string {
	names := make([]string, 0, len(brokers))
	for name := range brokers {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// redactURLError keeps a URL's password out of an error message, even when
// the URL does not parse (the parser's message quotes it).
func redactURLError(err error, raw string) string {
	msg := err.Error()
	_, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return msg
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	at := strings.LastIndexByte(rest, '@')
	if at < 0 {
		return msg
	}
	if _, pw, ok := strings.Cut(rest[:at], ":"); ok && pw != "" {
		msg = strings.ReplaceAll(msg, pw, "xxxxx")
		if dec, err := url.PathUnescape(pw); err == nil && dec != pw {
			msg = strings.ReplaceAll(msg, dec, "xxxxx")
		}
	}
	return msg
}
