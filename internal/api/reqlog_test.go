package api

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestValidRequestID(t *testing.T) {
	t.Parallel()
	for id, ok := range map[string]bool{
		"":                              false,
		"abc-123_x.y:z/w+v=u@t":         true,
		strings.Repeat("a", 128):        true,
		strings.Repeat("a", 129):        false,
		"has space":                     false,
		"line\nbreak":                   false,
		`quote"`:                        false,
		"ünï":                           false,
		"9b2f0c1e-2a4d-4e7b-9c1d-1f2e3": true,
	} {
		if got := validRequestID(id); got != ok {
			t.Errorf("validRequestID(%q) = %v, want %v", id, got, ok)
		}
	}
}

// lockedBuffer is a log sink for the handler's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) lines(t *testing.T) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, s := range strings.Split(strings.TrimSpace(l.b.String()), "\n") {
		var m map[string]any
		if s == "" {
			continue
		}
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// reqlogHandler is a routed over one route that sleeps for sleep.
func reqlogHandler(level slog.Level, slow, sleep time.Duration) (http.Handler, *lockedBuffer) {
	var buf lockedBuffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: level}))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/x", func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(sleep)
		writeJSON(w, http.StatusTeapot, map[string]string{})
	})
	return routed{mux: mux, log: log, slow: slow, ids: newRequestIDs(), changes: map[string]change{}}, &buf
}

// TestRequestID: a sane X-Request-Id is kept, a bad one replaced, a
// missing one made; each answer carries it and IDs made are distinct.
func TestRequestID(t *testing.T) {
	t.Parallel()
	h, buf := reqlogHandler(slog.LevelDebug, time.Hour, 0)
	call := func(id string) string {
		r := httptest.NewRequest("GET", "/v1/x", nil)
		if id != "" {
			r.Header.Set(RequestIDHeader, id)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Header().Get(RequestIDHeader)
	}
	if got := call("abc-1"); got != "abc-1" {
		t.Fatalf("sane ID answered %q", got)
	}
	bad := call("x\ny")
	made := call("")
	if bad == "" || made == "" || bad == made || !validRequestID(bad) || !validRequestID(made) {
		t.Fatalf("made IDs %q %q", bad, made)
	}
	if long := call(strings.Repeat("z", MaxRequestIDLen+1)); len(long) > MaxRequestIDLen {
		t.Fatalf("an over-long ID was kept: %q", long)
	}
	lines := buf.lines(t)
	if len(lines) != 4 || lines[0]["request_id"] != "abc-1" || lines[0]["msg"] != "api request" || lines[0]["level"] != "DEBUG" ||
		lines[0]["status"] != float64(http.StatusTeapot) || lines[0]["route"] != "GET /v1/x" || lines[1]["request_id"] != bad {
		t.Fatalf("request lines %v", lines)
	}
}

// TestSlowRequest: past http.slow_request a request is logged at warn
// even with the log at info; a fast one is not logged at info.
func TestSlowRequest(t *testing.T) {
	t.Parallel()
	slow, buf := reqlogHandler(slog.LevelInfo, time.Millisecond, 5*time.Millisecond)
	slow.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/v1/x", nil))
	lines := buf.lines(t)
	if len(lines) != 1 || lines[0]["msg"] != "api request slow" || lines[0]["level"] != "WARN" || lines[0]["took"] == nil {
		t.Fatalf("slow request lines %v", lines)
	}
	fast, buf := reqlogHandler(slog.LevelInfo, time.Hour, 0)
	fast.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/v1/x", nil))
	if lines := buf.lines(t); len(lines) != 0 {
		t.Fatalf("a fast request logged at info: %v", lines)
	}
}

// TestRequestLogOffAllocs: with the log above debug, the request log and
// the request ID cost no allocation beyond the ID's string, the answer's
// header value and the response writer.
func TestRequestLogOffAllocs(t *testing.T) {
	h, _ := reqlogHandler(slog.LevelInfo, time.Hour, 0)
	rh := h.(routed)
	rw := &respWriter{ResponseWriter: httptest.NewRecorder(), id: "x"}
	r := httptest.NewRequest("GET", "/v1/x", nil)
	if n := testing.AllocsPerRun(100, func() { rh.logRequest(r, rw, "GET /v1/x", time.Millisecond) }); n != 0 {
		t.Fatalf("logRequest allocates %v times with debug off", n)
	}
}
