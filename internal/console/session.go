package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/ontimehq/ontime/client"
	"github.com/ontimehq/ontime/internal/api"
)

// The cookies the console sets, on Path /ui only.
const (
	tokenCookie = "ontime_console" // the signed-in token
	flashCookie = "ontime_flash"   // the last action's outcome, shown once
	// sessionAge is how long a sign-in lasts; the browser drops it then.
	sessionAge = 12 * time.Hour
)

// viewer is who is looking: the signed-in token (nil without auth) and
// the API client acting as it.
type viewer struct {
	tok    *api.Token // nil: the node has no tokens
	csrf   string
	client *client.Client
}

// Can reports whether the viewer's token may call the API route method
// path: pages show an action only to a token the API would let do it (the
// API refuses anyway: this only spares a click that fails).
func (v *viewer) Can(method, p string) bool {
	if v.tok == nil {
		return true
	}
	if !v.tok.Role.Allows(api.RouteRole(method, p)) {
		return false
	}
	if v.tok.Topics == "" {
		return true
	}
	// A token limited to topics may use the task routes and one topic's
	// routes, nothing that spans topics (the API's own rule, auth.go).
	switch {
	case p == "/v1/tasks" || strings.HasPrefix(p, "/v1/tasks/"):
		return true
	case strings.HasPrefix(p, "/v1/topics/"):
		topic, _, _ := strings.Cut(strings.TrimPrefix(p, "/v1/topics/"), "/")
		topic, _, _ = strings.Cut(topic, ":")
		ok, _ := path.Match(v.tok.Topics, topic)
		return ok
	}
	return false
}

// csrfKey signs the CSRF tokens of a node without auth tokens: random per
// process (such a node listens on loopback only, so there is one node).
// With auth tokens the key is the signed-in token itself, so a CSRF token
// is good on every node of the cluster and worthless to anyone who does
// not hold the bearer token already.
type csrfKey []byte

func newCSRFKey() (csrfKey, error) {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return nil, fmt.Errorf("console: csrf key: %w", err)
	}
	return k, nil
}

func csrfFor(key []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("ontime console csrf v1"))
	return hex.EncodeToString(m.Sum(nil))
}

// viewerOf authenticates r: the viewer, or nil when r must sign in first.
func (c *Console) viewerOf(r *http.Request) *viewer {
	apiClient := func(secret string) *client.Client {
		opts := []client.Option{client.WithHTTPClient(&http.Client{Transport: inproc{h: c.opts.API}})}
		if secret != "" {
			opts = append(opts, client.WithToken(secret))
		}
		cl, err := client.New("http://console.invalid", opts...)
		if err != nil { // the URL is a constant
			panic(err)
		}
		return cl
	}
	if c.opts.Auth == nil {
		return &viewer{csrf: csrfFor(c.csrf), client: apiClient("")}
	}
	ck, err := r.Cookie(tokenCookie)
	if err != nil {
		return nil
	}
	tok := c.opts.Auth.Identify(ck.Value)
	if tok == nil || !tok.Role.Allows(api.RoleRead) {
		return nil
	}
	return &viewer{tok: tok, csrf: csrfFor([]byte(ck.Value)), client: apiClient(ck.Value)}
}

// checkPost refuses a state-changing request without the viewer's CSRF
// token (form field csrf, or the X-CSRF-Token header htmx sends), or one
// a browser says comes from another site.
func checkPost(r *http.Request, v *viewer) error {
	if site := r.Header.Get("Sec-Fetch-Site"); site == "cross-site" {
		return fmt.Errorf("csrf: a request from another site is refused")
	}
	got := r.Header.Get("X-CSRF-Token")
	if got == "" {
		got = r.PostFormValue("csrf")
	}
	if got == "" {
		return fmt.Errorf("csrf: the form carries no CSRF token; reload the page and try again")
	}
	if !hmac.Equal([]byte(got), []byte(v.csrf)) {
		return fmt.Errorf("csrf: the CSRF token does not match this sign-in; reload the page and try again")
	}
	return nil
}

type viewerKey struct{}

// signedIn wraps a page or action: it finds the viewer, sends one who
// must sign in to /ui/login, and checks the CSRF token of every POST.
func (c *Console) signedIn(next func(http.ResponseWriter, *http.Request, *viewer)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := c.viewerOf(r)
		if v == nil {
			to := "/ui/login?next=" + url.QueryEscape(r.URL.RequestURI())
			if r.Header.Get("HX-Request") == "true" {
				w.Header().Set("HX-Redirect", to)
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				c.renderError(w, r, nil, http.StatusUnauthorized, "", "sign in first: the session has ended or the token is no longer configured")
				return
			}
			http.Redirect(w, r, to, http.StatusSeeOther)
			return
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, maxForm)
			if err := checkPost(r, v); err != nil {
				c.renderError(w, r, v, http.StatusForbidden, "csrf", err.Error())
				return
			}
		}
		next(w, r.WithContext(context.WithValue(r.Context(), viewerKey{}, v)), v)
	})
}

// maxForm bounds a form's body: a payload edit is the largest, and the
// API refuses payloads past its own limit anyway.
const maxForm = 2 << 20

func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	next := safeBack(r.FormValue("next"), "/ui/")
	if c.opts.Auth == nil {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	d := &loginData{Next: next}
	if r.Method == http.MethodPost {
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
			d.Err = &pageError{Status: http.StatusForbidden, Field: "token", Message: "a sign-in from another site is refused"}
		} else {
			secret := strings.TrimSpace(r.PostFormValue("token"))
			tok := c.opts.Auth.Identify(secret)
			switch {
			case secret == "":
				d.Err = &pageError{Status: http.StatusBadRequest, Field: "token", Message: "give a token from auth.tokens"}
			case tok == nil:
				d.Err = &pageError{Status: http.StatusUnauthorized, Field: "token", Message: "this token is not one of auth.tokens"}
			case !tok.Role.Allows(api.RoleRead):
				d.Err = &pageError{Status: http.StatusForbidden, Field: "token", Message: fmt.Sprintf("token %q has role %s; the console needs read, write or admin", tok.Name, tok.Role)}
			default:
				http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: secret, Path: "/ui", MaxAge: int(sessionAge / time.Second),
					HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
				http.Redirect(w, r, next, http.StatusSeeOther)
				return
			}
		}
	}
	p := &page{Title: "Sign in", Data: d, Err: d.Err, AuthOn: true}
	status := http.StatusOK
	if d.Err != nil {
		status = d.Err.Status
	}
	c.render(w, r, "login", p, status)
}

type loginData struct {
	Next string
	Err  *pageError
}

// logout forgets the token. It needs no CSRF token: the worst another
// site can do with it is sign the user out.
func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: "", Path: "/ui", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}

// setFlash keeps an action's outcome for the page it redirects to.
func setFlash(w http.ResponseWriter, r *http.Request, msg string) {
	http.SetCookie(w, &http.Cookie{Name: flashCookie, Value: url.QueryEscape(msg), Path: "/ui", MaxAge: 60,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
}

// takeFlash reads and clears the flash message.
func takeFlash(w http.ResponseWriter, r *http.Request) string {
	ck, err := r.Cookie(flashCookie)
	if err != nil {
		return ""
	}
	http.SetCookie(w, &http.Cookie{Name: flashCookie, Value: "", Path: "/ui", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	msg, _ := url.QueryUnescape(ck.Value)
	return msg
}
