package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/client"
	"github.com/ontimehq/ontime/internal/testdb"
)

// scripted is a webhook receiver whose answer to each call a function
// picks: a status and a Retry-After (empty: none). It records every call.
type scripted struct {
	srv    *httptest.Server
	mu     sync.Mutex
	calls  []call
	answer func(c call) (int, string)
}

func newScripted(t *testing.T, answer func(c call) (int, string)) *scripted {
	s := &scripted{answer: answer}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		c := call{At: time.Now()}
		if err := json.NewDecoder(req.Body).Decode(&c.Body); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		c.ID, _ = c.Body["id"].(string)
		if a, ok := c.Body["attempt"].(float64); ok {
			c.Attempt = int(a)
		}
		code, after := s.answer(c)
		s.mu.Lock()
		s.calls = append(s.calls, c)
		s.mu.Unlock()
		if after != "" {
			w.Header().Set("Retry-After", after)
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *scripted) all() []call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]call(nil), s.calls...)
}

// attempts returns the calls of task id, in order.
func (s *scripted) attempts(id string) []call {
	var out []call
	for _, c := range s.all() {
		if c.ID == id {
			out = append(out, c)
		}
	}
	return out
}

// TestTopicSettingsAndRetryPolicies, on every engine: a topic's settings
// from the config and PUT /v1/topics/{topic} (bad values answered 400
// naming the field), shown in GET /v1/topics/{topic} and GET /v1/topics;
// a task without a target takes its topic's default target and
// max_attempts; a failed attempt waits by the topic's retry policy, or
// the task's own, and the task's view says when and why its next attempt
// is due; the task's own policy is stored by every insert path (single,
// batch with and without keys: PostgreSQL's COPY and keyed statement,
// MariaDB's multi-statement, SQLite's prepared batch).
func TestTopicSettingsAndRetryPolicies(t *testing.T) {
	t.Parallel()
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			rcv := newScripted(t, func(c call) (int, string) {
				if c.Attempt == 1 {
					return http.StatusInternalServerError, ""
				}
				return http.StatusOK, ""
			})
			cfg := nodeConfig(t, engine)
			cfg.Topics = map[string]ontime.TopicConfig{"e2e.ts": {Target: rcv.srv.URL + "/hook", MaxAttempts: 3, Timeout: ontime.Duration(2 * time.Second)}}
			base, _ := runNode(t, cfg)
			c := newAPIClient(t, base)
			ctx := t.Context()

			// Bad settings: 400 naming the field.
			for _, tc := range []struct {
				body  string
				field string
			}{
				{`{"priority": 10}`, "priority"},
				{`{"max_attempts": 1001}`, "max_attempts"},
				{`{"rate": -1}`, "rate"},
				{`{"concurrency": -1}`, "concurrency"},
				{`{"timeout": "2h"}`, "timeout"},
				{`{"target": "ftp://x/y"}`, "target"},
				{`{"retry": {"backoff": "linear"}}`, "retry.backoff"},
				{`{"retry": {"initial": "1m", "max": "1s"}}`, "retry.max"},
				{`{"retry": {"schedule": ["1s", "often"]}}`, "retry.schedule[1]"},
				{`{"retry": {"jitter": 2}}`, "retry.jitter"},
				{`{"colour": 1}`, "colour"},
			} {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPut, base+"/v1/topics/e2e.ts", bytes.NewReader([]byte(tc.body)))
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				var eb apiv1.ErrorBody
				_ = json.NewDecoder(resp.Body).Decode(&eb)
				resp.Body.Close()
				if resp.StatusCode != 400 || eb.Error.Field != tc.field || eb.Error.Code != apiv1.CodeInvalid {
					t.Errorf("PUT %s: %d %+v; want 400 naming %s", tc.body, resp.StatusCode, eb.Error, tc.field)
				}
			}

			// The config's layer, then PUT's over it, field by field.
			tp, err := c.Topic(ctx, "e2e.ts")
			if err != nil || tp.Settings == nil || tp.Settings.MaxAttempts != 3 || tp.Sources.MaxAttempts != "config" || tp.Settings.Timeout != "2s" ||
				tp.Sources.Retry != "node" || tp.Dynamic != nil {
				t.Fatalf("before PUT: %v %+v", err, tp)
			}
			tp, err = c.PutTopic(ctx, "e2e.ts", apiv1.TopicSettings{MaxAttempts: 4, Priority: ptrTo(6), Rate: 50, Concurrency: 5,
				Retry: &apiv1.Retry{Backoff: "fixed", Initial: "400ms", Jitter: ptrTo(0.0)}})
			if err != nil {
				t.Fatal(err)
			}
			s, src := tp.Settings, tp.Sources
			if s.Target != rcv.srv.URL+"/hook" || s.MaxAttempts != 4 || *s.Priority != 6 || s.Rate != 50 || s.Concurrency != 5 ||
				s.Retry.Backoff != "fixed" || s.Retry.Initial != "400ms" || s.Timeout != "2s" ||
				*src != (apiv1.TopicSources{Target: "config", MaxAttempts: "api", Retry: "api", Priority: "api", Rate: "api", Concurrency: "api", Timeout: "config"}) ||
				tp.Dynamic == nil || tp.Dynamic.MaxAttempts != 4 || tp.Dynamic.Target != "" {
				t.Fatalf("after PUT: %+v %+v %+v", s, src, tp.Dynamic)
			}
			if l := topicOf(t, c, "e2e.ts"); l.Settings == nil || l.Settings.MaxAttempts != 4 {
				t.Fatalf("GET /v1/topics: %+v", l)
			}

			// A task without a target: its topic's target and max_attempts;
			// its retry waits by the topic's fixed 400ms (the node's
			// retry_base is 20ms).
			plain := c.submit(apiv1.TaskRequest{Topic: "e2e.ts", Key: "plain"})
			if plain.Target != rcv.srv.URL+"/hook" || plain.MaxAttempts != 4 || plain.Retry != nil || plain.NextAttemptAt != nil {
				t.Fatalf("submitted without a target: %+v", plain)
			}
			// One with its own schedule: 4s after the first failure.
			own := c.submit(apiv1.TaskRequest{Topic: "e2e.ts", Key: "own", Retry: &apiv1.Retry{Schedule: []string{"4s", "1m"}, Jitter: ptrTo(0.0)}})
			if own.Retry == nil || strings.Join(own.Retry.Schedule, ",") != "4s,1m0s" {
				t.Fatalf("own retry in the answer: %+v", own.Retry)
			}
			waitFor(t, 60*time.Second, "the first attempts failed", func() bool {
				return len(rcv.attempts(plain.ID)) >= 1 && len(rcv.attempts(own.ID)) >= 1
			})
			// Between its attempts the view says when and why.
			var v *apiv1.Task
			waitFor(t, 4*time.Second, "the failure written", func() bool {
				v = c.get(own.ID)
				return v.Status == "pending" && v.Attempts == 1
			})
			first := rcv.attempts(own.ID)[0].At
			if v.NextAttemptAt == nil || v.NextAttemptAt.Sub(first) < 3900*time.Millisecond || v.NextAttemptAt.Sub(first) > 6*time.Second ||
				v.NextAttemptReason != "retry: attempt 2 of 4 after: webhook answered HTTP 500" || v.Retry == nil {
				t.Fatalf("view between attempts: next at +%v, reason %q, retry %+v", v.NextAttemptAt.Sub(first), v.NextAttemptReason, v.Retry)
			}
			waitFor(t, 60*time.Second, "both delivered on attempt 2", func() bool {
				return len(rcv.attempts(plain.ID)) == 2 && len(rcv.attempts(own.ID)) == 2
			})
			for id, want := range map[string]time.Duration{plain.ID: 400 * time.Millisecond, own.ID: 4 * time.Second} {
				a := rcv.attempts(id)
				if gap := a[1].At.Sub(a[0].At); gap < want {
					t.Fatalf("task %s: attempt 2 came %s after attempt 1; its policy waits %s", id, gap, want)
				}
			}
			waitFor(t, 30*time.Second, "the outcome written", func() bool { return c.get(own.ID).Status == "done" })
			if v := c.get(own.ID); v.NextAttemptAt != nil || v.NextAttemptReason != "" {
				t.Fatalf("delivered: %+v", v)
			}

			// Every insert path keeps a task's own policy.
			retry := &apiv1.Retry{Backoff: "exponential", Initial: "3s", Max: "1h", Jitter: ptrTo(0.1)}
			check := func(what string, tk *apiv1.Task) {
				t.Helper()
				got := c.get(tk.ID)
				if got.Retry == nil || got.Retry.Initial != "3s" || got.Retry.Max != "1h0m0s" || *got.Retry.Jitter != 0.1 {
					t.Fatalf("%s: stored retry %+v", what, got.Retry)
				}
			}
			check("single keyed", c.submit(apiv1.TaskRequest{Topic: "e2e.ts.store", Key: "k", Delay: "1h", Target: rcv.srv.URL, Retry: retry}))
			check("single unkeyed", c.submit(apiv1.TaskRequest{Topic: "e2e.ts.store", Delay: "1h", Target: rcv.srv.URL, Retry: retry}))
			check("single due now (claimed at submit)", c.submit(apiv1.TaskRequest{Topic: "e2e.ts.store", Delay: "300ms", Target: rcv.srv.URL, Retry: retry}))
			for _, keyed := range []bool{false, true} {
				var reqs []apiv1.TaskRequest
				for i := range 20 {
					r := apiv1.TaskRequest{Topic: "e2e.ts.store", Delay: "1h", Target: rcv.srv.URL, Retry: retry}
					if keyed {
						r.Key = fmt.Sprint("b", i)
					}
					reqs = append(reqs, r)
				}
				items, err := c.SubmitBatch(ctx, reqs)
				if err != nil {
					t.Fatal(err)
				}
				for _, it := range items {
					if it.Error != nil {
						t.Fatalf("batch: %+v", it.Error)
					}
					check(fmt.Sprintf("batch keyed=%v", keyed), it.Task)
				}
			}
			// PATCH replaces a task's own policy; {} removes it.
			pt := c.submit(apiv1.TaskRequest{Topic: "e2e.ts.store", Key: "patched", Delay: "1h", Target: rcv.srv.URL, Retry: retry})
			up, err := c.Update(ctx, pt.ID, apiv1.TaskPatch{Retry: &apiv1.Retry{Schedule: []string{"5s"}}})
			if err != nil || up.Retry == nil || strings.Join(up.Retry.Schedule, ",") != "5s" {
				t.Fatalf("PATCH retry: %v %+v", err, up)
			}
			if up, err = c.Update(ctx, pt.ID, apiv1.TaskPatch{Retry: &apiv1.Retry{}}); err != nil || up.Retry != nil || c.get(pt.ID).Retry != nil {
				t.Fatalf("PATCH retry {}: %v %+v", err, up)
			}
			// A bad task policy: 400 naming the field, nothing written.
			_, _, err = c.Submit(ctx, apiv1.TaskRequest{Topic: "e2e.ts", Retry: &apiv1.Retry{Schedule: []string{"1s"}, Backoff: "fixed"}})
			var ae *client.APIError
			if !errors.As(err, &ae) || ae.Status != 400 || ae.Field != "retry.schedule" {
				t.Fatalf("bad retry: %v", err)
			}

			// {} removes PUT's layer: the config's again.
			tp, err = c.PutTopic(ctx, "e2e.ts", apiv1.TopicSettings{})
			if err != nil || tp.Settings.MaxAttempts != 3 || tp.Sources.MaxAttempts != "config" || tp.Dynamic != nil {
				t.Fatalf("after PUT {}: %v %+v", err, tp)
			}
		})
	}
}

// TestRetryAfterAndLaneHold, on every engine: a webhook answering 429 with
// Retry-After (seconds) or 503 with an HTTP date is called again when it
// asked, not by the backoff (20ms here); meanwhile its lane calls it no
// more: tasks due for it wait, without using an attempt, their views
// saying why; a Retry-After beyond delivery.retry_max waits retry_max.
func TestRetryAfterAndLaneHold(t *testing.T) {
	t.Parallel()
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			var once sync.Map
			firstCall := func(c call) bool { _, seen := once.LoadOrStore(c.ID, true); return !seen }
			asks := newScripted(t, func(c call) (int, string) {
				if c.Attempt == 1 && c.Body["key"] == "asker" && firstCall(c) {
					return http.StatusTooManyRequests, "8"
				}
				return http.StatusOK, ""
			})
			dated := newScripted(t, func(c call) (int, string) {
				if c.Attempt == 1 {
					return http.StatusServiceUnavailable, time.Now().Add(3 * time.Second).UTC().Format(http.TimeFormat)
				}
				return http.StatusOK, ""
			})
			capped := newScripted(t, func(c call) (int, string) {
				if c.Attempt == 1 {
					return http.StatusTooManyRequests, "3600"
				}
				return http.StatusOK, ""
			})
			c, _ := startNode(t, engine, func(cfg *ontime.Config) {
				cfg.Delivery.RetryMax = ontime.Duration(12 * time.Second)
			})
			asker := c.submit(apiv1.TaskRequest{Topic: "e2e.ra", Key: "asker", Target: asks.srv.URL})
			d := c.submit(apiv1.TaskRequest{Topic: "e2e.ra", Key: "dated", Target: dated.srv.URL})
			cp := c.submit(apiv1.TaskRequest{Topic: "e2e.ra", Key: "capped", Target: capped.srv.URL})
			waitFor(t, 60*time.Second, "the first answers", func() bool {
				return len(asks.attempts(asker.ID)) == 1 && len(dated.attempts(d.ID)) == 1 && len(capped.attempts(cp.ID)) == 1
			})
			asked := asks.attempts(asker.ID)[0].At
			// Tasks due for the asking destination during its wait.
			var held []string
			for i := range 5 {
				held = append(held, c.submit(apiv1.TaskRequest{Topic: "e2e.ra", Key: fmt.Sprint("held", i), Target: asks.srv.URL + "/other/path"}).ID)
			}
			// Within the wait (8s from the answer: long enough for the submits
			// before it on a loaded machine), a held task's view says
			// why it waits.
			var hv *apiv1.Task
			waitFor(t, 8*time.Second-time.Since(asked), "a held task's view", func() bool {
				hv = c.get(held[0])
				return hv.Status == "pending" && hv.Attempts == 0 && strings.Contains(hv.NextAttemptReason, "destination asked to wait until")
			})
			if !strings.Contains(hv.NextAttemptReason, "Retry-After 8s") || hv.NextAttemptAt.Sub(asked) < 7900*time.Millisecond {
				t.Fatalf("held task: next at +%s, %q", hv.NextAttemptAt.Sub(asked), hv.NextAttemptReason)
			}
			if v := c.get(asker.ID); v.Status == "pending" && !strings.Contains(v.NextAttemptReason, "attempt 2 of 25 after: webhook answered HTTP 429, Retry-After 8s") {
				t.Fatalf("asking task: %q", v.NextAttemptReason)
			}
			waitFor(t, 60*time.Second, "everything delivered", func() bool {
				return len(asks.attempts(asker.ID)) == 2 && len(dated.attempts(d.ID)) == 2 && len(capped.attempts(cp.ID)) == 2 && len(asks.all()) == 7
			})
			// Nothing reached the asking destination during its wait.
			for _, cl := range asks.all()[1:] {
				if gap := cl.At.Sub(asked); gap < 8*time.Second {
					t.Fatalf("task %s reached the destination %s after it asked for 8s", cl.ID, gap)
				}
				if cl.ID != asker.ID && cl.Attempt != 1 {
					t.Fatalf("held task %s used an attempt while held: attempt %d", cl.ID, cl.Attempt)
				}
			}
			gap := func(s *scripted, id string) time.Duration {
				a := s.attempts(id)
				return a[1].At.Sub(a[0].At)
			}
			// Retried when asked: not by the 20ms backoff, not much later.
			if g := gap(asks, asker.ID); g < 8*time.Second || g > 16*time.Second {
				t.Fatalf("Retry-After 8: attempt 2 after %s", g)
			}
			if g := gap(dated, d.ID); g < 1900*time.Millisecond || g > 6*time.Second {
				t.Fatalf("Retry-After in 3s as an HTTP date (second precision): attempt 2 after %s", g)
			}
			if g := gap(capped, cp.ID); g < 12*time.Second || g > 24*time.Second {
				t.Fatalf("Retry-After 3600 with retry_max 12s: attempt 2 after %s", g)
			}
			t.Logf("attempt 1 → 2: Retry-After 8s %s, HTTP date +3s %s, 3600s capped at 12s %s",
				gap(asks, asker.ID).Round(time.Millisecond), gap(dated, d.ID).Round(time.Millisecond), gap(capped, cp.ID).Round(time.Millisecond))
		})
	}
}

func ptrTo[T any](v T) *T { return &v }
