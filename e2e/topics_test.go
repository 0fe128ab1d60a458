package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/client"
	"github.com/ontimehq/ontime/internal/testdb"
)

// startClusterNode runs an in-process node with the database coordinator
// on the shared databases dsns, its API on a real socket.
func startClusterNode(t *testing.T, engine string, dsns []string, id string) apiClient {
	t.Helper()
	cfg := ontime.DefaultConfig()
	cfg.NodeID = id
	cfg.DataDir = t.TempDir()
	cfg.Store.Driver = engine
	cfg.Store.Databases = dsns
	cfg.Store.Tables = 4
	cfg.Store.Segments = 2
	cfg.Hot.Window = ontime.Duration(time.Second)
	cfg.Cluster.Coordinator = "database"
	cfg.Cluster.LeaseTTL = ontime.Duration(2 * time.Second)
	cfg.Delivery.LeaseTTL = ontime.Duration(2 * time.Second)
	cfg.Delivery.RetryBase = ontime.Duration(20 * time.Millisecond)
	cfg.Delivery.RetryMax = ontime.Duration(100 * time.Millisecond)
	ctx := context.Background()
	node, err := ontime.NewNode(ctx, cfg)
	if err != nil {
		t.Fatalf("NewNode %s: %v", id, err)
	}
	if err := node.Start(ctx); err != nil {
		t.Fatalf("Start %s: %v", id, err)
	}
	srv := httptest.NewServer(node.HTTPHandler())
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := node.Stop(ctx); err != nil {
			t.Errorf("Stop %s: %v", id, err)
		}
	})
	return newAPIClient(t, srv.URL)
}

func topicOf(t *testing.T, c apiClient, name string) apiv1.Topic {
	t.Helper()
	ts, err := c.Topics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range ts {
		if tp.Topic == name {
			return tp
		}
	}
	return apiv1.Topic{Topic: name}
}

// TestPauseResumeAcrossTwoNodes: two nodes share PostgreSQL and split its
// sharding items. A topic paused through one node delivers nothing on
// either — not the tasks the other node claims at submit (due within the
// window), nor those its scanners find — while another topic goes on;
// resumed through the other node, every waiting task is delivered once,
// none before its due time.
func TestPauseResumeAcrossTwoNodes(t *testing.T) {
	t.Parallel()
	dsns := testdb.DSNs(t, "postgres", 2)
	rcv := newReceiver(t)
	n1 := startClusterNode(t, "postgres", dsns, "p1")
	n2 := startClusterNode(t, "postgres", dsns, "p2")
	waitFor(t, 30*time.Second, "two nodes share the items", func() bool {
		v, err := n1.Cluster(t.Context())
		return err == nil && balanced(v, []string{"p1", "p2"})
	})

	v, err := n1.PauseTopic(t.Context(), "e2e.paused")
	if err != nil || !v.Paused || v.Topic != "e2e.paused" || v.Counts["pending"] != 0 || v.OldestDueAt != nil {
		t.Fatalf("pause: %v %+v", err, v)
	}
	// The contract: cluster wide within a second (nodes poll every 250ms).
	time.Sleep(time.Second)

	due := map[string]time.Time{}
	var pausedIDs []string
	for i := range 40 {
		c := []apiClient{n1, n2}[i%2]
		topic := "e2e.paused"
		if i%4 == 3 {
			topic = "e2e.live"
		}
		// 0–1.5 s: within the window (claimed at submit by the node asked) and beyond it (found by scanners).
		tk := c.submit(apiv1.TaskRequest{Topic: topic, Key: fmt.Sprint(i), Delay: fmt.Sprintf("%dms", (i%16)*100), Target: rcv.srv.URL})
		due[tk.ID] = tk.DueAt
		if topic == "e2e.paused" {
			pausedIDs = append(pausedIDs, tk.ID)
		}
	}
	waitFor(t, 30*time.Second, "the live topic delivered", func() bool { return len(rcv.delivered()) >= 10 })
	// Every paused task is due by now + 1.5 s; give the nodes 2 s more to
	// (wrongly) deliver any.
	time.Sleep(3500 * time.Millisecond)
	for _, id := range pausedIDs {
		if n := rcv.delivered()[id]; n != 0 {
			t.Fatalf("task %s of the paused topic delivered %d times while paused", id, n)
		}
	}
	if len(rcv.delivered()) != 10 {
		t.Fatalf("%d tasks delivered while one topic was paused; want the 10 of the live one", len(rcv.delivered()))
	}
	// The counts come from node 2's count cache, a few seconds old at most.
	var tp apiv1.Topic
	waitFor(t, 30*time.Second, "the paused topic counted", func() bool {
		tp = topicOf(t, n2, "e2e.paused")
		return tp.Counts["pending"] == 30
	})
	if !tp.Paused || tp.Counts["pending"] != 30 || tp.Counts["running"] != 0 || tp.OldestDueAt == nil {
		t.Fatalf("paused topic as node 2 shows it: %+v", tp)
	}
	for _, id := range pausedIDs {
		if got := n1.get(id); got.Attempts != 0 || got.Status != "pending" {
			t.Fatalf("paused task %s: %s with %d attempts; want pending, never started", id, got.Status, got.Attempts)
		}
	}

	resumedAt := time.Now()
	v, err = n2.ResumeTopic(t.Context(), "e2e.paused")
	if err != nil || v.Paused {
		t.Fatalf("resume: %v %+v", err, v)
	}
	waitFor(t, 30*time.Second, "every paused task delivered after the resume", func() bool { return len(rcv.delivered()) == 40 })
	t.Logf("30 overdue tasks delivered %s after the resume", time.Since(resumedAt).Round(time.Millisecond))
	for id, n := range rcv.delivered() {
		if n != 1 {
			t.Fatalf("task %s delivered %d times", id, n)
		}
	}
	for _, cl := range rcv.allCalls() {
		if cl.At.Before(due[cl.ID]) {
			t.Fatalf("task %s delivered %s before its due time", cl.ID, due[cl.ID].Sub(cl.At))
		}
	}
	if tp := topicOf(t, n1, "e2e.paused"); tp.Paused {
		t.Fatalf("resumed topic still paused: %+v", tp)
	}
}

// TestTopicRequeueAndErrors: a topic's dead tasks come back with one call
// and are delivered; bad topic names and operations are refused with the
// error envelope.
func TestTopicRequeueAndErrors(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t)
	var failing atomic.Bool
	failing.Store(true)
	rcv.status = func(call) int {
		if failing.Load() {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	}
	c, node := startNode(t, "sqlite", nil)
	var ids []string
	for i := range 5 {
		ids = append(ids, c.submit(apiv1.TaskRequest{Topic: "e2e.rq", Key: fmt.Sprint(i), Target: rcv.srv.URL, MaxAttempts: 2}).ID)
	}
	other := c.submit(apiv1.TaskRequest{Topic: "e2e.rq.other", Target: rcv.srv.URL, MaxAttempts: 1}).ID
	waitFor(t, 30*time.Second, "every task dead", func() bool {
		for _, id := range append([]string{other}, ids...) {
			if c.get(id).Status != "dead" {
				return false
			}
		}
		return true
	})
	// The counts come from the node's count cache, a few seconds old at most.
	waitFor(t, 30*time.Second, "the dead tasks counted", func() bool { return topicOf(t, c, "e2e.rq").Counts["dead"] == 5 })
	if tp := topicOf(t, c, "e2e.rq"); tp.Counts["dead"] != 5 || tp.Counts["pending"] != 0 {
		t.Fatalf("before requeue: %+v", tp)
	}
	failing.Store(false)
	n, err := c.RequeueTopic(t.Context(), "e2e.rq")
	if err != nil || n != 5 {
		t.Fatalf("requeue: %v %d, want 5", err, n)
	}
	waitFor(t, 30*time.Second, "requeued tasks delivered", func() bool { return len(rcv.delivered()) == 5 })
	for _, id := range ids {
		waitFor(t, 30*time.Second, "requeued task done", func() bool { return c.get(id).Status == "done" })
	}
	if got := c.get(other); got.Status != "dead" {
		t.Fatalf("another topic's dead task was requeued: %s", got.Status)
	}
	if n, err := c.RequeueTopic(t.Context(), "e2e.rq"); err != nil || n != 0 {
		t.Fatalf("second requeue: %v %d, want 0", err, n)
	}

	for _, tc := range []struct {
		method, path string
		status       int
		code         apiv1.Code
		field        string
	}{
		{"POST", "/v1/topics/bad%20topic:pause", 400, apiv1.CodeInvalid, "topic"},
		{"POST", "/v1/topics/:resume", 400, apiv1.CodeInvalid, "topic"},
		{"POST", "/v1/topics/e2e.rq:frobnicate", 404, apiv1.CodeNotFound, ""},
		{"POST", "/v1/topics/e2e.rq", 404, apiv1.CodeNotFound, ""},
		{"GET", "/v1/topics?topic=x", 400, apiv1.CodeInvalid, "topic"},
		{"DELETE", "/v1/topics", 405, apiv1.CodeInvalid, ""},
	} {
		rec := httptest.NewRecorder()
		node.HTTPHandler().ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), tc.method, tc.path, nil))
		var eb apiv1.ErrorBody
		err := json.Unmarshal(rec.Body.Bytes(), &eb)
		if rec.Code != tc.status || err != nil || eb.Error.Code != tc.code || eb.Error.Field != tc.field {
			t.Fatalf("%s %s: %d %s (%v); want %d %s field %q", tc.method, tc.path, rec.Code, rec.Body, err, tc.status, tc.code, tc.field)
		}
	}
	_, err = c.PauseTopic(t.Context(), strings.Repeat("x", 65))
	if !client.HasCode(err, apiv1.CodeInvalid) {
		t.Fatalf("pausing a 65-character topic: %v", err)
	}
}
