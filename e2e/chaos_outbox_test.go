package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/internal/testdb"
	"github.com/ontimehq/ontime/outbox"
)

// TestChaosOutboxKill: three `ontime serve` processes relay one MariaDB
// outbox of 6 segments (items spread over the three by the database
// coordinator) while 8 writers write keys × perKey messages in the users'
// transactions; one relay node is killed with SIGKILL in the middle and
// started again. Every message is delivered at least once (none lost),
// every key's first deliveries in the order written, and duplicates stay
// within the bound README states: at most one per key in flight on the
// killed node (the key's message whose task was delivered but not yet
// recorded done when the node died). 100 keys × 5 under `go test`,
// 1,000 × 20 under `make chaos`.
func TestChaosOutboxKill(t *testing.T) {
	chaosParallel(t)
	keys := chaosSize(t, "OUTBOX_KEYS", 100, 1000)
	perKey := chaosSize(t, "OUTBOX_PER_KEY", 5, 20)
	app := newOutboxApp(t, "mysql")
	rcv := newReceiver(t)
	yaml, leases := chaosYAML("postgres", testdb.DSNs(t, "postgres", 1), "")
	yaml += fmt.Sprintf(`outboxes:
  - name: main
    driver: mysql
    databases: [%q]
    table: outbox
    segments: 6
    idle_poll: 200ms
`, app.dsn)
	cl := startChaosCluster(t, writeChaosConfig(t, t.TempDir(), yaml), 3)
	waitFor(t, 60*time.Second, "the outbox's items on all three nodes", func() bool {
		var v apiv1.JobView
		if getJSON(t, "http://"+cl.addrs[0]+"/v1/jobs/outbox.main", &v) != http.StatusOK {
			return false
		}
		owners := map[string]bool{}
		for _, it := range v.ItemStates {
			owners[it.Owner] = true
		}
		return len(owners) == 3 && !owners[""]
	})
	var written atomic.Bool
	go func() {
		defer written.Store(true)
		app.writeKeys(t, keys, perKey, 8, rcv.srv.URL)
	}()
	total := keys * perKey
	waitFor(t, 5*time.Minute, "a third of the messages delivered", func() bool { return deliveredMessages(rcv) >= total/3 })
	cl.kill9(1)
	t.Logf("n2 killed with %d of %d messages delivered", deliveredMessages(rcv), total)
	time.Sleep(time.Second)
	cl.restart(1)
	waitFor(t, 10*time.Minute, "every message written", written.Load)
	// Messages, not tasks: a message made into two tasks (checkOrder
	// fails it) must not end the wait before another is delivered.
	waitFor(t, 10*time.Minute, "every message delivered", func() bool { return deliveredMessages(rcv) >= total })
	dups := checkOrder(t, rcv.allCalls(), keys, perKey)
	t.Logf("chaos outbox-kill: %d keys × %d messages, 8 writers, 1 kill -9 of 3 relays; %d duplicate deliveries; %s", keys, perKey, dups, leases)
	if dups > keys {
		t.Errorf("%d duplicate deliveries: more than one per key (%d keys) for one kill", dups, keys)
	}
	waitFor(t, 2*time.Minute, "delivered rows deleted", func() bool { return countRows(t, app.db, "1 = 1") == 0 })
}

// TestChaosOutboxDeadDestination: one destination always fails (its
// breaker opens), another answers; messages of keys bound for the live one
// are all delivered, in order, while those of the dead one's keys are held
// back — only their own — and ontime outbox status (GET /v1/outboxes)
// shows those keys held.
func TestChaosOutboxDeadDestination(t *testing.T) {
	chaosParallel(t)
	keys := chaosSize(t, "OUTBOX_DEAD_KEYS", 20, 200)
	perKey := chaosSize(t, "OUTBOX_DEAD_PER_KEY", 5, 20)
	const deadKeys = 5
	app := newOutboxApp(t, "postgres")
	live := newReceiver(t)
	dead := newChaosReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ string, _ int) bool {
		w.WriteHeader(http.StatusServiceUnavailable)
		return false
	})
	cfg := ontime.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Delivery.BreakerFailures = 3
	cfg.Outboxes = []ontime.OutboxConfig{outboxConfig("postgres", app.dsn)}
	node := outboxNode(t, cfg)
	ctx := context.Background()
	for k := range deadKeys {
		key := fmt.Sprintf("dead-%d", k)
		for s := range perKey {
			if err := app.register(ctx, key, outbox.Message{Topic: "user.registered", Key: key,
				Payload: []byte(fmt.Sprintf(`{"k":%q,"seq":%d}`, key, s)), Target: dead.srv.URL, MaxAttempts: 1000}, true); err != nil {
				t.Fatal(err)
			}
		}
	}
	app.writeKeys(t, keys, perKey, 4, live.srv.URL)
	waitFor(t, 10*time.Minute, "every message to the live destination delivered", func() bool { return len(live.delivered()) >= keys*perKey })
	checkOrder(t, live.allCalls(), keys, perKey)
	srv := httptest.NewServer(node.HTTPHandler())
	defer srv.Close()
	waitFor(t, time.Minute, "the dead destination's keys shown held", func() bool {
		var l apiv1.OutboxList
		if getJSON(t, srv.URL+"/v1/outboxes", &l) != http.StatusOK || len(l.Outboxes) != 1 {
			return false
		}
		tv := l.Outboxes[0].Tables[0]
		return tv.HeldKeys == deadKeys && tv.Waiting == int64(deadKeys*(perKey-1)) && tv.InFlight == deadKeys
	})
	if n := dead.delivered.Load(); n != 0 {
		t.Fatalf("the dead destination answered 2xx %d times", n)
	}
}
