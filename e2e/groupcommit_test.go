package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ontimehq/ontime/apiv1"
)

// TestGroupCommitKill9LosesNothingAcknowledged: 16 clients submit single
// tasks over HTTP at once (so their commits are grouped), `ontime serve` is
// killed with SIGKILL mid-stream and started again: every submit that was
// answered 201 or 200 is stored and delivered, none early. Submits cut
// off by the kill may or may not be stored; that is theirs to retry.
func TestGroupCommitKill9LosesNothingAcknowledged(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfgPath := writeConfig(t, dir)
	addr := freeAddr(t)
	rcv := newReceiver(t)
	p := startServe(t, cfgPath, addr)
	base := "http://" + addr

	var mu sync.Mutex
	acked := map[string]time.Time{} // ID → due time
	stop := make(chan struct{})
	var wg sync.WaitGroup
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	for c := range 16 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				delay := time.Duration((c*7+i)%30) * 100 * time.Millisecond // 0 .. 3 s
				req := apiv1.TaskRequest{Topic: "e2e.gc", Delay: delay.String(), Target: rcv.srv.URL,
					Payload: json.RawMessage(fmt.Sprintf(`{"c":%d,"i":%d}`, c, i))}
				if i%5 == 0 {
					req.Key = fmt.Sprintf("c%d-%d", c, i)
				}
				body, _ := json.Marshal(req)
				resp, err := hc.Post(base+"/v1/tasks", "application/json", bytes.NewReader(body))
				if err != nil {
					continue // the server is gone: unacknowledged
				}
				var v apiv1.Task
				err = json.NewDecoder(resp.Body).Decode(&v)
				resp.Body.Close()
				if err != nil || (resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK) {
					continue
				}
				mu.Lock()
				acked[v.ID] = v.DueAt
				mu.Unlock()
			}
		})
	}
	ackedN := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	waitFor(t, 3*time.Minute, "submits acknowledged before the kill", func() bool { return ackedN() >= 500 })
	groups := counter(t, base, "ontime_submit_group_submits_count")
	submits := counter(t, base, "ontime_submit_group_submits_sum")
	t.Logf("before the kill: %.0f submits in %.0f group commits", submits, groups)
	err := p.signal(t, syscall.SIGKILL)
	close(stop)
	wg.Wait()
	t.Logf("kill -9: exit %v with %d submits acknowledged, %d deliveries", err, ackedN(), len(rcv.delivered()))

	startServe(t, cfgPath, addr)
	c := newAPIClient(t, base)
	for id := range acked {
		if _, err := c.Get(t.Context(), id); err != nil {
			t.Fatalf("acknowledged task %s is not stored after the restart: %v", id, err)
		}
	}
	waitFor(t, 120*time.Second, "every acknowledged task delivered", func() bool {
		got := rcv.delivered()
		for id := range acked {
			if got[id] == 0 {
				return false
			}
		}
		return true
	})
	for _, cl := range rcv.allCalls() {
		if d, ok := acked[cl.ID]; ok && cl.At.Before(d) {
			t.Errorf("task %s delivered %s early", cl.ID, d.Sub(cl.At))
		}
	}
}
