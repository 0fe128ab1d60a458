package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/client"
	"github.com/ontimehq/ontime/internal/testdb"
)

// brokerNode starts a node on SQLite whose config names one broker, "mq".
func brokerNode(t *testing.T, brokerURL string, mod func(*ontime.Config)) (apiClient, *ontime.Node) {
	t.Helper()
	return startNode(t, "sqlite", func(c *ontime.Config) {
		c.Brokers = map[string]string{"mq": brokerURL}
		c.Delivery.Timeout = ontime.Duration(5 * time.Second)
		if mod != nil {
			mod(c)
		}
	})
}

// TestBrokerDeliveredOnTimeNeverEarly: for each broker, tasks due over a
// few seconds reach a real consumer once each, never before their due
// time, with the payload as body and the ontime-* headers; the Go API
// submits half of them, the HTTP API the other half.
func TestBrokerDeliveredOnTimeNeverEarly(t *testing.T) {
	for _, k := range brokerKinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			cons := newConsumer()
			addr := k.setup(t, k.url(), cons)
			c, node := brokerNode(t, k.url(), nil)
			target := "mq://mq/" + addr
			const n = 40
			want := map[string]*apiv1.Task{}
			for i := range n {
				delay := time.Duration(i%20) * 100 * time.Millisecond
				body := payload(t, map[string]any{"i": i, "kind": k.name})
				if i%2 == 0 {
					v := c.submit(apiv1.TaskRequest{Topic: "e2e.mq", Key: fmt.Sprintf("k-%d", i), Delay: delay.String(), Payload: body, Target: target})
					want[v.ID] = v
					continue
				}
				v, created, err := node.Submit(context.Background(), ontime.TaskSpec{Topic: "e2e.mq", Key: fmt.Sprintf("k-%d", i), Delay: delay, Payload: body, Target: target})
				if err != nil || !created {
					t.Fatalf("Node.Submit: %v (created %v)", err, created)
				}
				want[v.ID] = &apiv1.Task{ID: v.ID, Topic: v.Topic, Key: v.Key, DueAt: v.DueAt, Payload: v.Payload}
			}
			waitFor(t, 60*time.Second, "every task consumed", func() bool { return cons.distinct() == n })
			for _, m := range cons.all() {
				id := m.Headers["ontime-task-id"]
				v, ok := want[id]
				if !ok {
					t.Fatalf("message of unknown task %q: headers %v", id, m.Headers)
				}
				if m.At.Before(v.DueAt) {
					t.Errorf("task %s consumed %s before its due time", id, v.DueAt.Sub(m.At))
				}
				if !bytes.Equal(m.Body, v.Payload) {
					t.Errorf("task %s: body %s, want %s", id, m.Body, v.Payload)
				}
				due, err := time.Parse(time.RFC3339Nano, m.Headers["ontime-due-at"])
				if err != nil || !due.Equal(v.DueAt) {
					t.Errorf("task %s: ontime-due-at %q, want %s", id, m.Headers["ontime-due-at"], v.DueAt)
				}
				if m.Headers["ontime-attempt"] != "1" || m.Headers["ontime-topic"] != "e2e.mq" || m.Headers["ontime-key"] != v.Key {
					t.Errorf("task %s: headers %v", id, m.Headers)
				}
			}
			for id := range want {
				waitFor(t, 10*time.Second, "status done", func() bool { return c.get(id).Status == "done" })
			}
		})
	}
}

// TestBrokerUnroutableEndsDead: a message the broker cannot route or
// refuses is a failed attempt with the broker's reason; with its attempts
// used up the task is dead and last_error says why.
func TestBrokerUnroutableEndsDead(t *testing.T) {
	for _, k := range brokerKinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			addr, reason := k.unroutable(t, k.url())
			c, _ := brokerNode(t, k.url(), nil)
			v := c.submit(apiv1.TaskRequest{Topic: "e2e.mq", Target: "mq://mq/" + addr, MaxAttempts: 2, Payload: payload(t, 1)})
			waitFor(t, 60*time.Second, "task dead", func() bool { return c.get(v.ID).Status == "dead" })
			got := c.get(v.ID)
			if got.Attempts != 2 || !strings.Contains(got.LastError, reason) {
				t.Errorf("dead after %d attempts with last_error %q; want 2 attempts and %q", got.Attempts, got.LastError, reason)
			}
		})
	}
	t.Run("amqp-missing-exchange", func(t *testing.T) {
		t.Parallel()
		c, _ := brokerNode(t, testdb.AMQPURL(), nil)
		cons := newConsumer()
		good := setupAMQP(t, testdb.AMQPURL(), cons)
		bad := c.submit(apiv1.TaskRequest{Topic: "e2e.mq", Target: "mq://mq/" + testdb.Unique("ontime_t_") + "/x", MaxAttempts: 1})
		// A missing exchange must not take down the channel other
		// publishes use: tasks to a good exchange go on being delivered.
		var ok []string
		for range 20 {
			ok = append(ok, c.submit(apiv1.TaskRequest{Topic: "e2e.mq", Target: "mq://mq/" + good}).ID)
		}
		waitFor(t, 30*time.Second, "bad task dead", func() bool { return c.get(bad.ID).Status == "dead" })
		if le := c.get(bad.ID).LastError; !strings.Contains(le, "does not exist") {
			t.Errorf("last_error %q", le)
		}
		waitFor(t, 30*time.Second, "good tasks consumed", func() bool { return cons.distinct() == len(ok) })
	})
}

// TestBrokerValidation: an mq:// target naming a broker that is not
// configured, or an address malformed for the broker's kind, is refused at
// submit (400 naming target over HTTP, a FieldError from Node.Submit);
// a bad broker URL stops the node from being built, naming brokers.NAME.
func TestBrokerValidation(t *testing.T) {
	t.Parallel()
	c, node := startNode(t, "sqlite", func(c *ontime.Config) {
		c.Brokers = map[string]string{"rabbit": testdb.AMQPURL(), "js": testdb.NATSURL(), "rs": testdb.RedisURL(), "mq": testdb.MQTTURL()}
	})
	bad := map[string]string{
		"mq://nope/x":                "not configured",
		"mq://rabbit/no-slash":       "EXCHANGE/ROUTING_KEY",
		"mq://rabbit//":              "queue name",
		"mq://rabbit/bad exchange/k": "spaces",
		"mq://rabbit/b@d/k":          "exchange",
		"mq://js/orders.*":           "wildcards",
		"mq://js/orders..x":          "empty",
		"mq://mq/a/#":                "wildcards",
		"mq://mq/$SYS/x":             "broker",
		"mq://rabbit":                "no address",
		"mq:///x":                    "broker name",
	}
	for target, frag := range bad {
		_, _, err := c.Submit(context.Background(), apiv1.TaskRequest{Topic: "e2e.mq", Target: target})
		var ae *client.APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Field != "target" || !strings.Contains(ae.Message, frag) {
			t.Errorf("HTTP submit %q: %v; want 400 on target mentioning %q", target, err, frag)
		}
		_, _, err = node.Submit(context.Background(), ontime.TaskSpec{Topic: "e2e.mq", Target: target})
		var fe *ontime.FieldError
		if !errors.As(err, &fe) || fe.Field != "target" || !errors.Is(err, ontime.ErrInvalid) {
			t.Errorf("Node.Submit %q: %v; want a FieldError on target", target, err)
		}
	}
	for _, target := range []string{"mq://rabbit/amq.topic/orders.cancel", "mq://rabbit//q1", "mq://js/orders.cancel", "mq://rs/orders:due", "mq://mq/orders/cancel"} {
		if _, _, err := node.Submit(context.Background(), ontime.TaskSpec{Topic: "e2e.mq", Target: target, Delay: time.Hour}); err != nil {
			t.Errorf("Node.Submit %q: %v", target, err)
		}
	}
	// No brokers configured: every mq:// target is refused.
	c2, _ := startNode(t, "sqlite", nil)
	if _, _, err := c2.Submit(context.Background(), apiv1.TaskRequest{Topic: "e2e.mq", Target: "mq://rabbit//q"}); err == nil || !strings.Contains(err.Error(), "no brokers are configured") {
		t.Errorf("submit without brokers: %v", err)
	}
	for url, frag := range map[string]string{
		"kafka://127.0.0.1:9092":        "scheme",
		"amqp://guest:pw@127.0.0.1:x/":  "",
		"redis://127.0.0.1:6379/0?x=1":  "",
		"redis://127.0.0.1/0?maxlen=-1": "maxlen",
		"nats://":                       "host",
		"mqtt://127.0.0.1:1883/path":    "path",
		"no url":                        "not a URL",
	} {
		cfg := ontime.DefaultConfig()
		cfg.DataDir = t.TempDir()
		cfg.Brokers = map[string]string{"b1": url}
		_, err := ontime.NewNode(context.Background(), cfg)
		if err == nil || !strings.HasPrefix(err.Error(), "brokers.b1: ") || !strings.Contains(err.Error(), frag) || strings.Contains(err.Error(), ":pw@") {
			t.Errorf("broker URL %q: %v; want an error naming brokers.b1", url, err)
		}
	}
}

// TestBrokerRestartLosesNothing: a private broker is stopped in the
// middle of a run and started again; every task reaches it (read back
// from the broker at the end, or by a consumer whose session survives the
// restart) and ends done.
func TestBrokerRestartLosesNothing(t *testing.T) {
	type private struct {
		name  string
		start func(t testing.TB) (*testdb.Broker, string)
		// prepare creates the destination; collect reads back what the
		// broker holds once every task is done.
		prepare func(t testing.TB, url string, c *consumer) (address string, collect func())
	}
	cases := []private{
		{name: "nats", start: func(t testing.TB) (*testdb.Broker, string) { b := testdb.StartNATS(t); return b, b.NATSURL() },
			prepare: func(t testing.TB, u string, c *consumer) (string, func()) {
				name := testdb.Unique("ontime_t_")
				createStream(t, u, name)
				return name + ".due", func() { readStreamNATS(t, natsJS(t, u), name, c) }
			}},
		{name: "redis", start: func(t testing.TB) (*testdb.Broker, string) { b := testdb.StartRedisAOF(t); return b, b.RedisURL() },
			prepare: func(t testing.TB, u string, c *consumer) (string, func()) {
				key := testdb.Unique("ontime_t_")
				return key, func() {
					es, err := redisFromURL(t, u).XRange(context.Background(), key, "-", "+").Result()
					if err != nil {
						t.Fatal(err)
					}
					for _, e := range es {
						c.add(redisMsg(e))
					}
				}
			}},
		{name: "mqtt", start: func(t testing.TB) (*testdb.Broker, string) { b := testdb.StartMosquitto(t); return b, b.MQTTURL() },
			prepare: func(t testing.TB, u string, c *consumer) (string, func()) {
				return setupMQTT(t, u, c), func() {}
			}},
		{name: "amqp", start: func(t testing.TB) (*testdb.Broker, string) { b := testdb.StartRabbitMQ(t); return b, b.AMQPURL() },
			prepare: func(t testing.TB, u string, c *consumer) (string, func()) {
				name := testdb.Unique("ontime_t_")
				declareAMQP(t, u, name)
				return name + "/due", func() { drainAMQP(t, u, name, c) }
			}},
	}
	for _, pc := range cases {
		t.Run(pc.name, func(t *testing.T) {
			t.Parallel()
			b, u := pc.start(t)
			cons := newConsumer()
			addr, collect := pc.prepare(t, u, cons)
			c, node := brokerNode(t, u, func(c *ontime.Config) {
				c.Delivery.Timeout = ontime.Duration(3 * time.Second)
				c.Delivery.BreakerOpenFor = ontime.Duration(200 * time.Millisecond)
			})
			// Due over 12 s from 2 s on, so the broker is stopped mid-run
			// even when a loaded CI machine (race build) is slow to submit
			// and poll (due over 3 s from 1 s on, one run saw every task
			// done before it looked).
			const n = 300
			ids := make([]string, 0, n)
			start := time.Now().Add(2 * time.Second)
			specs := make([]ontime.TaskSpec, n)
			for i := range specs {
				specs[i] = ontime.TaskSpec{Topic: "e2e.mq", Key: "r-" + strconv.Itoa(i), DueAt: start.Add(time.Duration(i) * 40 * time.Millisecond),
					Payload: payload(t, i), Target: "mq://mq/" + addr}
			}
			res, err := node.SubmitBatch(context.Background(), specs)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range res {
				if r.Err != nil {
					t.Fatal(r.Err)
				}
				ids = append(ids, r.Task.ID)
			}
			// Stop the broker once some tasks are done, start it again.
			waitFor(t, 60*time.Second, "first deliveries", func() bool { return c.get(ids[20]).Status == "done" })
			if v := c.get(ids[n-1]); v.Status == "done" {
				t.Fatalf("the run ended before the broker was stopped")
			}
			b.Kill()
			time.Sleep(500 * time.Millisecond)
			b.Start()
			for _, id := range ids {
				waitFor(t, 120*time.Second, "every task done", func() bool { return c.get(id).Status == "done" })
			}
			collect()
			waitFor(t, 30*time.Second, "every task at the consumer", func() bool { return cons.distinct() == n })
			var missing []string
			cons.mu.Lock()
			for _, id := range ids {
				if cons.byID[id] == 0 {
					missing = append(missing, id)
				}
			}
			dups := 0
			for _, cnt := range cons.byID {
				dups += cnt - 1
			}
			cons.mu.Unlock()
			if len(missing) > 0 {
				t.Fatalf("%d tasks done but not at the broker: %v", len(missing), missing[:min(5, len(missing))])
			}
			retried := 0
			for _, id := range ids {
				if c.get(id).Attempts > 1 {
					retried++
				}
			}
			t.Logf("%s: %d tasks, %d needed more than one attempt, %d duplicate messages across the restart (receivers drop them by ontime-task-id)", pc.name, n, retried, dups)
		})
	}
}

// deadAddress is an address prefix of each kind; four lanes are used.
var deadAddress = map[string]string{"amqp": "orders/due", "nats": "orders.due", "redis": "orders:due", "mqtt": "orders/due"}

// TestDeadBrokerDoesNotDelayWebhooks: a broker nobody answers holds its
// own lanes only. Webhook tasks due at the same instant as tasks to the
// dead broker are all delivered while every broker task is still in its
// first attempt (waiting for a connection that never comes).
func TestDeadBrokerDoesNotDelayWebhooks(t *testing.T) {
	t.Parallel()
	// "none" is the control: the same webhooks with no broker task beside
	// them, for the lateness in the log.
	for _, k := range []string{"amqp", "nats", "redis", "mqtt", "none"} {
		t.Run(k, func(t *testing.T) {
			t.Parallel()
			// A port that refuses connections: the broker is down.
			dead := strings.Replace(k+"://"+freeAddr(t), "amqp://", "amqp://guest:guest@", 1)
			switch k {
			case "redis":
				dead += "/0"
			case "none":
				dead = "nats://" + freeAddr(t)
			}
			rcv := newReceiver(t)
			c, node := brokerNode(t, dead, func(c *ontime.Config) {
				c.Delivery.Timeout = ontime.Duration(30 * time.Second)
				c.Delivery.ShutdownGrace = ontime.Duration(time.Second)
			})
			due := time.Now().Add(1500 * time.Millisecond)
			var mqIDs, hookIDs []string
			var specs []ontime.TaskSpec
			for i := range 200 {
				if k == "none" {
					break
				}
				specs = append(specs, ontime.TaskSpec{Topic: "e2e.mq", DueAt: due, Target: "mq://mq/" + deadAddress[k] + strconv.Itoa(i%4), Payload: payload(t, i)})
			}
			for i := range 100 {
				specs = append(specs, ontime.TaskSpec{Topic: "e2e.hook", DueAt: due, Target: rcv.srv.URL + "/hook", Payload: payload(t, i)})
			}
			res, err := node.SubmitBatch(context.Background(), specs)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range res {
				if r.Err != nil {
					t.Fatal(r.Err)
				}
				if r.Task.Topic == "e2e.mq" {
					mqIDs = append(mqIDs, r.Task.ID)
				} else {
					hookIDs = append(hookIDs, r.Task.ID)
				}
			}
			waitFor(t, 25*time.Second, "webhooks delivered", func() bool { return len(rcv.delivered()) == len(hookIDs) })
			var late []time.Duration
			for _, cl := range rcv.allCalls() {
				if cl.At.Before(due) {
					t.Errorf("webhook %s delivered early", cl.ID)
				}
				late = append(late, cl.At.Sub(due))
			}
			// The broker tasks have not had an outcome yet: the webhooks
			// did not wait for them.
			for _, id := range mqIDs[:min(20, len(mqIDs))] {
				if v := c.get(id); v.Status != "running" || v.Attempts != 1 || v.LastError != "" {
					t.Errorf("broker task %s: %s attempts %d last_error %q; want still running its first attempt", id, v.Status, v.Attempts, v.LastError)
				}
			}
			slices.Sort(late)
			t.Logf("dead %s broker: webhook lateness p50 %s p99 %s max %s", k, late[len(late)/2], late[len(late)*99/100], late[len(late)-1])
		})
	}
}

// TestBrokerStopWaitsForConfirms: a node stopping with publishes awaiting
// the broker's acknowledgement waits for them (up to
// delivery.shutdown_grace) and records them done; nothing is lost.
func TestBrokerStopWaitsForConfirms(t *testing.T) {
	t.Parallel()
	b := testdb.StartRedisAOF(t)
	cfg := ontime.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Brokers = map[string]string{"mq": b.RedisURL()}
	cfg.Delivery.ShutdownGrace = ontime.Duration(time.Minute)
	cfg.Delivery.Timeout = ontime.Duration(time.Minute)
	ctx := context.Background()
	node, err := ontime.NewNode(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	key := testdb.Unique("ontime_t_")
	// The publisher's connection is up before the broker freezes.
	warm, _, err := node.Submit(ctx, ontime.TaskSpec{Topic: "e2e.mq", Target: "mq://mq/" + key})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "first task done", func() bool { v, _ := node.Get(ctx, warm.ID); return v.Status == "done" })
	b.Pause()
	var ids []string
	for i := range 50 {
		v, _, err := node.Submit(ctx, ontime.TaskSpec{Topic: "e2e.mq", Target: "mq://mq/" + key, Payload: payload(t, i)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, v.ID)
	}
	for _, id := range ids {
		waitFor(t, 30*time.Second, "tasks in flight", func() bool { v, _ := node.Get(ctx, id); return v.Status == "running" })
	}
	stopped := make(chan error, 1)
	go func() { stopped <- node.Stop(context.Background()) }()
	// Stop cannot finish while acknowledgements are outstanding and the
	// grace has not passed: it returns only after the broker resumes.
	time.Sleep(time.Second)
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) with publishes awaiting the broker's reply", err)
	default:
	}
	b.Resume()
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	// The outcomes were written before the store closed: reopen it.
	cfg.Brokers = nil
	again, err := ontime.NewNode(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Stop(ctx)
	for _, id := range ids {
		if v, err := again.Get(ctx, id); err != nil || v.Status != "done" {
			t.Errorf("task %s after stop: %+v %v; want done", id, v, err)
		}
	}
	// Every task is in the stream (a reply lost to a timeout may have
	// added one twice: at least once).
	es, err := redisFromURL(t, b.RedisURL()).XRange(ctx, key, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]bool{}
	for _, e := range es {
		in[e.Values["ontime-task-id"].(string)] = true
	}
	for _, id := range ids {
		if !in[id] {
			t.Errorf("task %s done but not in the stream", id)
		}
	}
	if len(es) != len(ids)+1 {
		t.Logf("stream holds %d entries for %d tasks", len(es), len(ids)+1)
	}
}
