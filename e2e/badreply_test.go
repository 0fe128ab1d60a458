package e2e

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/apiv1"
)

// A receiver that fails with a reply that is not valid UTF-8 (issue 11's
// first defect): on PostgreSQL the reply used to reach last_error as is,
// the outcome batch failed, and the tasks stayed running and were delivered
// again and again. Now each failed task is retried on its own schedule with
// a readable last_error and ends dead after max_attempts, on every engine.
func TestInvalidUTF8ReplyIsRetriedNotRedelivered(t *testing.T) {
	t.Parallel()
	for _, engine := range []string{"postgres", "mysql", "sqlite"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			var calls atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				w.WriteHeader(http.StatusInternalServerError)
				// Invalid bytes, and a 2-byte character cut by the 256-byte excerpt.
				body := append([]byte("\xff\xfe boom "), make([]byte, 240)...)
				for i := 8; i < len(body); i++ {
					body[i] = 'x'
				}
				_, _ = w.Write(append(body, "é\xc3"...))
			}))
			t.Cleanup(srv.Close)
			c, _ := startNode(t, engine, func(cfg *ontime.Config) {
				cfg.Delivery.RetryBase = ontime.Duration(50 * time.Millisecond)
				cfg.Delivery.RetryMax = ontime.Duration(100 * time.Millisecond)
				cfg.Delivery.BreakerFailures = 1000 // every failure is the reply's, not an open circuit
			})
			const n, attempts = 20, 2
			ids := make([]string, n)
			for i := range ids {
				ids[i] = c.submit(apiv1.TaskRequest{Topic: "e2e.badreply", Target: srv.URL, MaxAttempts: attempts}).ID
			}
			for _, id := range ids {
				waitFor(t, 60*time.Second, "task dead", func() bool { return c.get(id).Status == "dead" })
				v := c.get(id)
				if v.Attempts != attempts || !utf8.ValidString(v.LastError) || v.LastError == "" {
					t.Fatalf("task %s: attempts %d last_error %q; want %d attempts and valid UTF-8", id, v.Attempts, v.LastError, attempts)
				}
			}
			if got := calls.Load(); got != n*attempts {
				t.Fatalf("receiver saw %d calls for %d tasks × %d attempts: outcomes were lost and tasks redelivered", got, n, attempts)
			}
		})
	}
}
