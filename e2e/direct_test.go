package e2e

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/ontimehq/ontime/apiv1"
)

// Tasks due at once are inserted running and handed to delivery by the
// node that took their submit, without the hot tier and a Start. Killed
// (-9) while they wait on a receiver that does not answer, the node's next
// process ends its previous process's leases and claims the tasks again,
// overdue, straight to running: every one delivered, none early, each
// delivered as its second attempt (the lost one counted).
func TestServeKill9DueAtOnceLosesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfgPath := writeConfig(t, dir)
	addr := freeAddr(t)
	rcv := newReceiver(t)
	gate := make(chan struct{})
	rcv.mu.Lock()
	rcv.gate = gate
	rcv.mu.Unlock()
	p := startServe(t, cfgPath, addr)
	c := newAPIClient(t, "http://"+addr)
	const n = 200
	due := map[string]time.Time{}
	for i := range n {
		v := c.submit(apiv1.TaskRequest{Topic: "e2e.now", Key: fmt.Sprint(i), Target: rcv.srv.URL})
		if v.Status != "running" || v.Attempts != 1 {
			t.Fatalf("a task due at once was answered %s, attempts %d: want running, 1", v.Status, v.Attempts)
		}
		due[v.ID] = v.DueAt
	}
	if got := counterSum(t, "http://"+addr, "ontime_deliveries_started_direct_total"); got != n {
		t.Fatalf("ontime_deliveries_started_direct_total %v, want %d", got, n)
	}
	if err := p.signal(t, syscall.SIGKILL); err == nil {
		t.Fatal("ontime serve exited cleanly on SIGKILL")
	}
	if got := len(rcv.delivered()); got != 0 {
		t.Fatalf("%d delivered through the closed gate", got)
	}
	// New calls pass; the killed process's calls still held at the gate
	// stay there (their connections are gone) rather than be recorded as
	// deliveries.
	rcv.mu.Lock()
	rcv.gate = nil
	rcv.mu.Unlock()
	t.Cleanup(func() { close(gate) })
	startServe(t, cfgPath, addr)
	waitFor(t, 90*time.Second, "every task delivered after the restart", func() bool { return len(rcv.delivered()) == n })
	for _, cl := range rcv.allCalls() {
		d, ok := due[cl.ID]
		if !ok {
			t.Fatalf("unknown task %s delivered", cl.ID)
		}
		if cl.At.Before(d) {
			t.Errorf("task %s delivered %s early", cl.ID, d.Sub(cl.At))
		}
		if cl.Attempt != 2 {
			t.Errorf("task %s delivered as attempt %d, want 2 (the first, lost with the process, counted)", cl.ID, cl.Attempt)
		}
	}
	for id, cnt := range rcv.delivered() {
		if cnt != 1 {
			t.Errorf("task %s delivered %d times", id, cnt)
		}
	}
	if got := counterSum(t, "http://"+addr, "ontime_deliveries_started_direct_total"); got != n {
		t.Fatalf("after the restart ontime_deliveries_started_direct_total %v, want %d (claimed running)", got, n)
	}
}
