package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/ontimehq/ontime"
)

// A receiver slower than the running lease is long: tasks due together
// wait in their destination's lane far longer than the lease they were
// started with. The node holds them, so it keeps their leases alive and
// none is claimed and delivered a second time (before, every task still
// queued when its lease ended was delivered again). On PostgreSQL and
// SQLite.
func TestSlowReceiverBacklogIsNotRedelivered(t *testing.T) {
	t.Parallel()
	for _, engine := range []string{"postgres", "sqlite"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			seen := map[string]int{}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				time.Sleep(10 * time.Millisecond)
				mu.Lock()
				seen[r.Header.Get("Ontime-Task-Id")]++
				mu.Unlock()
			}))
			t.Cleanup(srv.Close)
			_, node := startNode(t, engine, func(cfg *ontime.Config) {
				// Running lease: 20ms lead + 1s timeout + 2s: about 3s, so a
				// heartbeat late by a second on a loaded CI machine (race
				// build) is still in time. One call at a time at ≤ 100/s,
				// 1,000 tasks take ≥ 10s to deliver: three leases and more.
				cfg.Delivery.Timeout = ontime.Duration(time.Second)
				cfg.Delivery.LeaseTTL = ontime.Duration(2 * time.Second)
				cfg.Delivery.Concurrency = 1
				cfg.Hot.MaxFireLead = 0
			})
			ctx := context.Background()
			const n = 1000
			specs := make([]ontime.TaskSpec, n)
			due := time.Now().Add(1500 * time.Millisecond)
			for i := range specs {
				specs[i] = ontime.TaskSpec{Topic: "e2e.backlog", DueAt: due, Target: srv.URL}
			}
			res, err := node.SubmitBatch(ctx, specs)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range res {
				if r.Err != nil {
					t.Fatal(r.Err)
				}
			}
			waitFor(t, 90*time.Second, "every task delivered", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(seen) == n
			})
			for _, r := range res {
				id := r.Task.ID
				waitFor(t, 30*time.Second, "task done", func() bool {
					tk, err := node.Get(ctx, id)
					return err == nil && tk.Status == "done"
				})
			}
			time.Sleep(4 * time.Second) // a lease past the last outcome: a redelivery would show
			mu.Lock()
			defer mu.Unlock()
			dups := 0
			for _, c := range seen {
				dups += c - 1
			}
			if dups > 0 {
				t.Fatalf("%d duplicate deliveries of %d tasks while this node held them", dups, n)
			}
		})
	}
}
