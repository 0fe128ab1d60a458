package complete_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/complete"
	"github.com/ontimehq/ontime/internal/deliver"
	"github.com/ontimehq/ontime/internal/stagetest"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// mailbox records the handoffs the completer leaves.
type mailbox struct {
	mu sync.Mutex
	by map[string][]store.Ref
}

func (m *mailbox) HandOff(_ context.Context, node string, refs []store.Ref, _ time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.by[node] = append(m.by[node], refs...)
	return nil
}

func (m *mailbox) of(node string) []store.Ref {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]store.Ref(nil), m.by[node]...)
}

// A task without a target that found no Go handler here (ErrNoHandler):
// with a live node that has one, it goes back claimed by that node, due
// as it was, no attempt used, and is handed off to it once written; with
// none, it waits pending, no attempt used (never dead, even at its last
// attempt), its last error saying why, logged at WARN once per topic.
func TestNoHandlerHandsOffOrWaits(t *testing.T) {
	var logs syncBuffer
	box := &mailbox{by: map[string][]store.Ref{}}
	nodes := map[string][]string{"handled": {"n1", "n2"}} // n1 is this node: skipped
	x := setupWith(t, complete.Config{
		Retry:  deliver.RetryPolicy{Base: 50 * time.Millisecond, Max: time.Hour},
		Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
		Unhandled: &complete.Unhandled{NodeID: "n1", Handoffs: box, LeaseTTL: time.Minute,
			Nodes: func(topic string) []string { return nodes[topic] }},
	})
	nt := stagetest.NewTask(t, "handled", "handed", time.Now())
	nt.MaxAttempts = 1
	handed := stagetest.Running(t, x.st, nt)[0]
	waits := x.running(t, "waits", 2, 1) // their last attempt
	x.c.Expect(append([]*task.Task{handed}, waits...), time.Now().Add(time.Minute))
	before := time.Now()
	x.c.Finish(handed, &deliver.NoHandlerError{Topic: "handled", Node: "n1"})
	for _, w := range waits {
		x.c.Finish(w, &deliver.NoHandlerError{Topic: w.Topic, Node: "n1"})
	}

	row := stagetest.StatusIs(t, x.st, handed.ID, task.StatusClaimed)
	if row.Owner != "n2" || row.Attempts != 0 || !row.DueAt.Equal(handed.DueAt) || row.Token == handed.Token ||
		!strings.Contains(row.LastError, "handed to node n2") {
		t.Fatalf("handed-off row: owner %q attempts %d due %v (was %v) token %d last_error %q", row.Owner, row.Attempts, row.DueAt, handed.DueAt, row.Token, row.LastError)
	}
	stagetest.Eventually(t, "the handoff left for n2", func() bool { return len(box.of("n2")) == 1 })
	if h := box.of("n2")[0]; h.ID != handed.ID || h.Token != row.Token || !h.DueAt.Equal(row.DueAt) || h.Topic != "handled" {
		t.Fatalf("handoff %+v; want the row's ID, token and due time", h)
	}
	for _, w := range waits {
		row := stagetest.StatusIs(t, x.st, w.ID, task.StatusPending)
		if row.Attempts != 0 || !row.DueAt.After(before) || row.DueAt.After(time.Now().Add(2*time.Second)) ||
			!strings.Contains(row.LastError, `no live node handles topic "`+w.Topic+`"`) {
			t.Fatalf("waiting row: attempts %d, due in %s, last_error %q", row.Attempts, row.DueAt.Sub(before), row.LastError)
		}
	}
	var warned int
	for _, r := range logs.records(t, "WARN") {
		if r["topic"] == waits[0].Topic && strings.Contains(r["msg"].(string), "no live node handles their topic") {
			warned++
		}
	}
	if warned != 1 {
		t.Fatalf("%d WARN lines for the unhandled topic; want 1 (once per topic per minute): %v", warned, logs.records(t, "WARN"))
	}
}
