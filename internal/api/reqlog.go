package api

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// RequestIDHeader carries a request's ID: taken from the request when
// sane (validRequestID), made here otherwise, and always in the answer.
const RequestIDHeader = "X-Request-Id"

// MaxRequestIDLen bounds an X-Request-Id the API takes: longer ones (a log
// line per request would carry them) are replaced.
const MaxRequestIDLen = 128

// DefaultSlowRequest is http.slow_request's default: requests that take
// longer are logged at warn.
const DefaultSlowRequest = time.Second

// validRequestID reports whether id, from a client, may be used as is:
// 1 to MaxRequestIDLen bytes of A-Z a-z 0-9 and - _ . : / + = @, so it
// cannot forge log fields or lines, nor grow a log line without bound.
func validRequestID(id string) bool {
	if len(id) == 0 || len(id) > MaxRequestIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-', c == '_', c == '.', c == ':', c == '/', c == '+', c == '=', c == '@':
		default:
			return false
		}
	}
	return true
}

// requestIDs makes request IDs: a random prefix per handler and a
// counter, so they are unique across nodes and restarts without a
// random read per request (a request ID need not be secret).
type requestIDs struct {
	prefix string
	n      atomic.Uint64
}

func newRequestIDs() *requestIDs {
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	return &requestIDs{prefix: hex.EncodeToString(b[:]) + "-"}
}

func (g *requestIDs) next() string {
	var buf [32]byte
	b := append(buf[:0], g.prefix...)
	return string(strconv.AppendUint(b, g.n.Add(1), 36))
}

// respWriter remembers what was answered, for the request log and the
// audit line. Unwrap lets http.ResponseController reach the connection.
type respWriter struct {
	http.ResponseWriter
	status int
	code   string // the error's apiv1 code (writeError)
	id     string // the request ID
	target string // the audit's target when the body names it (noteTarget)
}

func (w *respWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *respWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *respWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// answered is the status sent, 200 when the handler wrote nothing.
func (w *respWriter) answered() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

// requestIDOf is the request ID of the request w answers, "" outside the
// API's handler.
func requestIDOf(w http.ResponseWriter) string {
	if rw, ok := w.(*respWriter); ok {
		return rw.id
	}
	return ""
}

// noteCode records the error code of an answer for the audit line.
func noteCode(w http.ResponseWriter, code string) {
	if rw, ok := w.(*respWriter); ok {
		rw.code = code
	}
}

// noteTarget names the audit's target of a request whose path does not
// (a schedule created by POST /v1/schedules names itself in the body).
func noteTarget(w http.ResponseWriter, target string) {
	if rw, ok := w.(*respWriter); ok {
		rw.target = target
	}
}

// logRequest writes the request line (debug) or, past slow, the slow
// request line (warn). It costs a level check when debug is off and the
// request was fast.
func (h routed) logRequest(r *http.Request, w *respWriter, route string, took time.Duration) {
	ctx := r.Context()
	level := slog.LevelDebug
	msg := "api request"
	if took > h.slow {
		level, msg = slog.LevelWarn, "api request slow"
	}
	if !h.log.Enabled(ctx, level) {
		return
	}
	h.log.LogAttrs(ctx, level, msg,
		slog.String("request_id", w.id),
		slog.String("method", r.Method),
		slog.String("route", route),
		slog.String("path", r.URL.Path),
		slog.Int("status", w.answered()),
		slog.Duration("took", took),
		slog.String("actor", actorOf(ctx, h.auth)),
		slog.String("remote", r.RemoteAddr))
}

// rawWriter is the server's own writer under respWriter, for
// http.MaxBytesReader: it tells the server to close the connection after
// a body past the limit through an unexported method only the server's
// writer has, so a wrapper would leave the client writing into a reset.
func rawWriter(w http.ResponseWriter) http.ResponseWriter {
	if rw, ok := w.(*respWriter); ok {
		return rw.ResponseWriter
	}
	return w
}
