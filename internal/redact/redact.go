// Package redact keeps secrets out of logs and error messages. The node
// knows every secret it was configured with (tokens, webhook secrets,
// passwords in DSNs and URLs); a Redactor replaces each with "REDACTED"
// wherever it appears, and a slog Handler applies it to every record, so
// a driver's error that quotes a DSN, or a URL with a password, is logged
// without it.
package redact

import (
	"context"
	"log/slog"
	"net/url"
	"slices"
	"strings"
)

// Mask replaces a secret.
const Mask = "REDACTED"

// Redactor replaces known secrets.
type Redactor struct {
	r       *strings.Replacer
	secrets []string
}

// minLen: shorter values (a password "x") would mask unrelated text and
// protect nothing.
const minLen = 4

// New builds a redactor of secrets (empty and very short ones ignored).
func New(secrets ...string) *Redactor {
	var s []string
	for _, v := range secrets {
		if len(v) >= minLen && !slices.Contains(s, v) {
			s = append(s, v)
			// A password in a URL is often seen percent-encoded.
			if e := url.QueryEscape(v); e != v {
				s = append(s, e)
			}
		}
	}
	// Longest first, so a secret containing another is masked whole.
	slices.SortFunc(s, func(a, b string) int { return len(b) - len(a) })
	pairs := make([]string, 0, 2*len(s))
	for _, v := range s {
		pairs = append(pairs, v, Mask)
	}
	return &Redactor{r: strings.NewReplacer(pairs...), secrets: s}
}

// String masks every secret in s.
func (r *Redactor) String(s string) string {
	if r == nil || len(r.secrets) == 0 {
		return s
	}
	return r.r.Replace(s)
}

// Error masks err's message, keeping the chain for errors.Is/As.
func (r *Redactor) Error(err error) error {
	if err == nil || r == nil || len(r.secrets) == 0 {
		return err
	}
	msg := err.Error()
	if red := r.r.Replace(msg); red != msg {
		return &redacted{msg: red, err: err}
	}
	return err
}

type redacted struct {
	msg string
	err error
}

func (e *redacted) Error() string { return e.msg }
func (e *redacted) Unwrap() error { return e.err }

// Handler wraps h so every record's message and attributes are masked.
func (r *Redactor) Handler(h slog.Handler) slog.Handler {
	if r == nil || len(r.secrets) == 0 {
		return h
	}
	return &handler{h: h, r: r}
}

type handler struct {
	h slog.Handler
	r *Redactor
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.h.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.String(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.h.Handle(ctx, out)
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(as))
	for i, a := range as {
		red[i] = h.attr(a)
	}
	return &handler{h: h.h.WithAttrs(red), r: h.r}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{h: h.h.WithGroup(name), r: h.r}
}

func (h *handler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.r.String(v.String()))
	case slog.KindGroup:
		g := v.Group()
		red := make([]any, len(g))
		for i, x := range g {
			red[i] = h.attr(x)
		}
		return slog.Group(a.Key, red...)
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			return slog.String(a.Key, h.r.String(x.Error()))
		case interface{ String() string }:
			return slog.String(a.Key, h.r.String(x.String()))
		case []string:
			red := make([]string, len(x))
			for i, s := range x {
				red[i] = h.r.String(s)
			}
			return slog.Any(a.Key, red)
		}
		return a
	default:
		return a
	}
}

// URLPassword is the password of a URL-shaped DSN or address
// ("postgres://u:p@h/db", "redis://:p@h:6379"), and "" when there is none.
func URLPassword(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return ""
	}
	p, _ := u.User.Password()
	return p
}

// DSNPasswords returns the passwords a store DSN carries: a URL's, a
// key=value DSN's password= (PostgreSQL), or MySQL's user:pass@tcp(…).
func DSNPasswords(dsn string) []string {
	var out []string
	if p := URLPassword(dsn); p != "" {
		out = append(out, p)
	}
	for _, f := range strings.Fields(dsn) {
		if k, v, ok := strings.Cut(f, "="); ok && strings.EqualFold(k, "password") {
			out = append(out, strings.Trim(v, `'"`))
		}
	}
	if at := strings.LastIndex(dsn, "@"); at > 0 && !strings.Contains(dsn, "://") {
		if _, pass, ok := strings.Cut(dsn[:at], ":"); ok && pass != "" {
			out = append(out, pass)
		}
	}
	return out
}
