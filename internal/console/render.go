package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/ontimehq/ontime/client"
)

// page is what every page template gets.
type page struct {
	Title  string
	Nav    string // the navigation entry lit: overview, upcoming, tasks, …
	V      *viewer
	AuthOn bool   // the node has tokens: show who is signed in and the sign-out
	Self   string // this page's URL (path and query), for live reloads and returns
	Query  url.Values
	Flash  string
	Err    *pageError
	Now    time.Time
	Data   any
}

// Can is the viewer's Can, false with no viewer.
func (p *page) Can(method, path string) bool { return p.V != nil && p.V.Can(method, path) }

// ErrOn reports whether the page's error names field.
func (p *page) ErrOn(field string) bool { return p.Err != nil && p.Err.Field == field }

// Who is the signed-in token's name and role.
func (p *page) Who() string {
	if p.V == nil || p.V.tok == nil {
		return ""
	}
	return fmt.Sprintf("%s (%s)", p.V.tok.Name, p.V.tok.Role)
}

// CSRF is the token every form posts.
func (p *page) CSRF() string {
	if p.V == nil {
		return ""
	}
	return p.V.csrf
}

// pageError is an error shown in the page: the API's answer (status,
// field, message) or the console's own check of a form.
type pageError struct {
	Status  int
	Code    string
	Field   string
	Message string
}

// asPageError turns a client error into what the page shows.
func asPageError(err error) *pageError {
	var ae *client.APIError
	if errors.As(err, &ae) {
		return &pageError{Status: ae.Status, Code: string(ae.Code), Field: ae.Field, Message: ae.Message}
	}
	return &pageError{Status: http.StatusInternalServerError, Code: "internal", Message: err.Error()}
}

func (c *Console) newPage(w http.ResponseWriter, r *http.Request, v *viewer, title, nav string) *page {
	p := &page{Title: title, Nav: nav, V: v, AuthOn: c.opts.Auth != nil, Self: r.URL.RequestURI(), Query: r.URL.Query(), Now: time.Now().UTC()}
	if r.Header.Get("HX-Request") != "true" {
		p.Flash = takeFlash(w, r)
	}
	return p
}

// render writes page name, or only its "live" block for an htmx poll.
func (c *Console) render(w http.ResponseWriter, r *http.Request, name string, p *page, status int) {
	t := c.pages[name]
	tmpl := "layout"
	if r.Header.Get("HX-Request") == "true" && r.Header.Get("HX-Target") != "" && t.Lookup("live") != nil {
		tmpl = "live"
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, tmpl, p); err != nil {
		c.log.Error("console: render", "page", name, "err", err)
		http.Error(w, "the page failed to render; the node's log has the cause", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if p.Err != nil && status == http.StatusOK && p.Err.Status >= 400 {
		status = p.Err.Status
	}
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// renderError answers a page holding only an error.
func (c *Console) renderError(w http.ResponseWriter, r *http.Request, v *viewer, status int, field, msg string) {
	p := &page{Title: http.StatusText(status), V: v, AuthOn: c.opts.Auth != nil, Self: r.URL.RequestURI(), Now: time.Now().UTC(),
		Err: &pageError{Status: status, Field: field, Message: msg}}
	c.render(w, r, "error", p, status)
}

var funcs = template.FuncMap{
	"ts": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"tsp": func(t *time.Time) string {
		if t == nil || t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"rfc": func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	// ago says how far t is from now: "in 3m20s", "5s ago".
	"ago": func(t time.Time) string { return ago(t, time.Now()) },
	"agop": func(t *time.Time) string {
		if t == nil {
			return ""
		}
		return ago(*t, time.Now())
	},
	"pretty": func(raw json.RawMessage) string {
		if len(raw) == 0 {
			return ""
		}
		var b bytes.Buffer
		if json.Indent(&b, raw, "", "  ") != nil {
			return string(raw)
		}
		return b.String()
	},
	"path": url.PathEscape,
	"q":    url.QueryEscape,
	"pct": func(part, whole int64) int64 {
		if whole <= 0 {
			return 0
		}
		return int64(math.Round(100 * float64(part) / float64(whole)))
	},
	"add":    func(a, b int64) int64 { return a + b },
	"jobctx": func(p *page, job any) map[string]any { return map[string]any{"P": p, "Job": job} },
	"trunc":  trunc,
	"join":   strings.Join,
	"statuses": func() []string {
		return []string{"pending", "claimed", "running", "done", "dead", "cancelled"}
	},
	// dur prints a whole duration without its zero tail: "30m", "4h".
	"dur": func(d time.Duration) string {
		s := d.String()
		if strings.HasSuffix(s, "m0s") {
			s = strings.TrimSuffix(s, "0s")
		}
		if strings.HasSuffix(s, "h0m") {
			s = strings.TrimSuffix(s, "0m")
		}
		return s
	},
	"secs": func(f float64) string {
		return (time.Duration(f * float64(time.Second))).Round(time.Millisecond).String()
	},
}

func trunc(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8Start(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

func ago(t, now time.Time) string {
	d := t.Sub(now)
	if d >= 0 {
		return "in " + roundDur(d)
	}
	return roundDur(-d) + " ago"
}

func roundDur(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	case d < 48*time.Hour:
		return d.Round(time.Minute).String()
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}
