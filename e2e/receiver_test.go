package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// receiver is a webhook endpoint that records every call.
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	calls  []call
	byID   map[string]int // deliveries per task ID
	status func(c call) int
	gate   chan struct{} // when non-nil, every call blocks until it is closed
}

type call struct {
	ID       string
	Attempt  int
	At       time.Time
	DueAt    time.Time
	Body     map[string]any
	Header   http.Header
	RawBody  []byte
	HeaderID string
	Code     int // the receiver's answer
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{byID: map[string]int{}}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(func() {
		r.mu.Lock()
		if r.gate != nil {
			select {
			case <-r.gate:
			default:
				close(r.gate)
			}
		}
		r.mu.Unlock()
		r.srv.Close()
	})
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	at := time.Now()
	raw, err := io.ReadAll(req.Body)
	if err != nil {
		// The sender went away mid-body (a node killed while sending):
		// no whole call arrived, so none is recorded.
		return
	}
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	c := call{At: at, Body: body, Header: req.Header.Clone(), RawBody: raw, HeaderID: req.Header.Get("Ontime-Task-Id")}
	c.ID, _ = body["id"].(string)
	if a, ok := body["attempt"].(float64); ok {
		c.Attempt = int(a)
	}
	if s, ok := body["due_at"].(string); ok {
		c.DueAt, _ = time.Parse(time.RFC3339Nano, s)
	}
	r.mu.Lock()
	gate := r.gate
	status := r.status
	r.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-req.Context().Done():
			return
		}
	}
	code := http.StatusOK
	if status != nil {
		code = status(c)
	}
	c.Code = code
	r.mu.Lock()
	r.calls = append(r.calls, c)
	if code/100 == 2 {
		r.byID[c.ID]++
	}
	r.mu.Unlock()
	w.Header().Set("X-Attempt", strconv.Itoa(c.Attempt))
	w.WriteHeader(code)
}

func (r *receiver) delivered() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.byID))
	for k, v := range r.byID {
		out[k] = v
	}
	return out
}

func (r *receiver) allCalls() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]call(nil), r.calls...)
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func decodeJSON(req *http.Request, v any) error {
	return json.NewDecoder(req.Body).Decode(v)
}

func redisClient(addr string) *goredis.Client { return goredis.NewClient(&goredis.Options{Addr: addr}) }
