package e2e

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
	goredis "github.com/redis/go-redis/v9"

	"github.com/ontimehq/ontime/internal/testdb"
)

// Consumers of the four brokers, as a receiver would write them: each
// records every message with its headers and arrival time, and counts
// deliveries per ontime-task-id (how a receiver drops duplicates).

type brokerMsg struct {
	Body    []byte
	Headers map[string]string
	At      time.Time
}

type consumer struct {
	mu   sync.Mutex
	msgs []brokerMsg
	byID map[string]int
	on   func(m brokerMsg) // called for each message, under mu
}

func newConsumer() *consumer { return &consumer{byID: map[string]int{}} }

func (c *consumer) add(m brokerMsg) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.msgs = append(c.msgs, m)
	c.byID[m.Headers["ontime-task-id"]]++
	if c.on != nil {
		c.on(m)
	}
}

func (c *consumer) distinct() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byID)
}

func (c *consumer) all() []brokerMsg {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]brokerMsg(nil), c.msgs...)
}

// brokerKind sets up one kind of broker for a test: a destination with a
// consumer reading it, and the target tasks use to reach it.
type brokerKind struct {
	name string
	// url is the shared server's URL.
	url func() string
	// setup creates a fresh destination on the broker at url, consumed
	// live by c, and returns the ADDRESS of mq://NAME/ADDRESS.
	setup func(t testing.TB, url string, c *consumer) string
	// unroutable returns an address the broker refuses or cannot route,
	// and a fragment of the reason last_error must show.
	unroutable func(t testing.TB, url string) (address, reason string)
}

var brokerKinds = []brokerKind{
	{name: "amqp", url: testdb.AMQPURL, setup: setupAMQP, unroutable: unroutableAMQP},
	{name: "nats", url: testdb.NATSURL, setup: setupNATS, unroutable: unroutableNATS},
	{name: "redis", url: testdb.RedisURL, setup: setupRedis, unroutable: unroutableRedis},
	{name: "mqtt", url: testdb.MQTTURL, setup: setupMQTT, unroutable: unroutableMQTT},
}

func amqpDial(t testing.TB, u string) *amqp.Connection {
	t.Helper()
	var conn *amqp.Connection
	var err error
	for range 100 { // a private node may still be booting
		if conn, err = amqp.Dial(u); err == nil {
			return conn
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("RabbitMQ at %s is required: %v", u, err)
	return nil
}

// setupAMQP declares a durable direct exchange and a durable queue bound
// to it with routing key "due"; the consumer reads the queue.
func setupAMQP(t testing.TB, u string, c *consumer) string {
	t.Helper()
	name := testdb.Unique("ontime_t_")
	declareAMQP(t, u, name)
	consumeAMQP(t, u, name, c)
	return name + "/due"
}

func declareAMQP(t testing.TB, u, name string) {
	conn := amqpDial(t, u)
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.ExchangeDeclare(name, amqp.ExchangeDirect, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(name, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(name, "due", name, false, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn, err := amqp.Dial(u)
		if err != nil {
			return // a private node is gone with its directory
		}
		defer conn.Close()
		if ch, err := conn.Channel(); err == nil {
			_, _ = ch.QueueDelete(name, false, false, false)
			_ = ch.ExchangeDelete(name, false, false)
		}
	})
}

func consumeAMQP(t testing.TB, u, queue string, c *consumer) {
	conn := amqpDial(t, u)
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	_ = ch.Qos(1000, 0, false)
	deliveries, err := ch.Consume(queue, "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for d := range deliveries {
			h := map[string]string{}
			for k, v := range d.Headers {
				if s, ok := v.(string); ok {
					h[k] = s
				}
			}
			c.add(brokerMsg{Body: d.Body, Headers: h, At: time.Now()})
			_ = d.Ack(false)
		}
	}()
}

// drainAMQP reads what queue holds now, with a fresh connection.
func drainAMQP(t testing.TB, u, queue string, c *consumer) {
	conn := amqpDial(t, u)
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	for {
		d, ok, err := ch.Get(queue, true)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return
		}
		h := map[string]string{}
		for k, v := range d.Headers {
			if s, ok := v.(string); ok {
				h[k] = s
			}
		}
		c.add(brokerMsg{Body: d.Body, Headers: h, At: time.Now()})
	}
}

// unroutableAMQP: an exchange exists but no queue is bound for the key.
func unroutableAMQP(t testing.TB, u string) (string, string) {
	name := testdb.Unique("ontime_t_")
	declareAMQP(t, u, name)
	return name + "/nobody.listens", "NO_ROUTE"
}

func natsJS(t testing.TB, u string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(u, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond), nats.RetryOnFailedConnect(true))
	if err != nil {
		t.Fatalf("NATS at %s is required: %v", u, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// setupNATS creates a file stream capturing "<prefix>.>" with a duplicate
// window; an ordered consumer reads it live.
func setupNATS(t testing.TB, u string, c *consumer) string {
	t.Helper()
	name := testdb.Unique("ontime_t_")
	js := createStream(t, u, name)
	consumeNATS(t, js, name, c)
	return name + ".due"
}

func createStream(t testing.TB, u, name string) jetstream.JetStream {
	js := natsJS(t, u)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"},
		Storage: jetstream.FileStorage, Duplicates: 2 * time.Minute}); err != nil {
		t.Fatalf("create stream: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = js.DeleteStream(ctx, name)
	})
	return js
}

func consumeNATS(t testing.TB, js jetstream.JetStream, stream string, c *consumer) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		h := map[string]string{}
		for k, v := range m.Headers() {
			h[strings.ToLower(k)] = v[0]
		}
		c.add(brokerMsg{Body: m.Data(), Headers: h, At: time.Now()})
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cc.Stop)
}

// readStreamNATS reads the whole stream from its start.
func readStreamNATS(t testing.TB, js jetstream.JetStream, stream string, c *consumer) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for n := uint64(0); n < info.State.Msgs; {
		batch, err := cons.Fetch(500, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			h := map[string]string{}
			for k, v := range m.Headers() {
				h[strings.ToLower(k)] = v[0]
			}
			c.add(brokerMsg{Body: m.Data(), Headers: h, At: time.Now()})
			n++
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			t.Fatal(err)
		}
	}
}

// unroutableNATS: a subject no stream captures.
func unroutableNATS(t testing.TB, u string) (string, string) {
	return testdb.Unique("ontime_t_") + ".nowhere", "no JetStream stream captures"
}

func redisFromURL(t testing.TB, u string) *goredis.Client {
	opt, err := goredis.ParseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	rdb := goredis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// setupRedis reads a fresh stream key with XREAD BLOCK.
func setupRedis(t testing.TB, u string, c *consumer) string {
	t.Helper()
	key := testdb.Unique("ontime_t_")
	rdb := redisFromURL(t, u)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		<-done
		_ = redisFromURL(t, u).Del(context.Background(), key).Err()
	})
	go func() {
		defer close(done)
		last := "0"
		for ctx.Err() == nil {
			res, err := rdb.XRead(ctx, &goredis.XReadArgs{Streams: []string{key, last}, Count: 1000, Block: 200 * time.Millisecond}).Result()
			if err != nil {
				continue
			}
			for _, s := range res {
				for _, e := range s.Messages {
					c.add(redisMsg(e))
					last = e.ID
				}
			}
		}
	}()
	return key
}

func redisMsg(e goredis.XMessage) brokerMsg {
	h := map[string]string{}
	var body []byte
	for k, v := range e.Values {
		s, _ := v.(string)
		if k == "payload" {
			body = []byte(s)
			continue
		}
		h[k] = s
	}
	return brokerMsg{Body: body, Headers: h, At: time.Now()}
}

// unroutableRedis: a key that holds a string, not a stream.
func unroutableRedis(t testing.TB, u string) (string, string) {
	key := testdb.Unique("ontime_t_")
	rdb := redisFromURL(t, u)
	if err := rdb.Set(context.Background(), key, "not a stream", time.Hour).Err(); err != nil {
		t.Fatalf("Redis at %s is required: %v", u, err)
	}
	t.Cleanup(func() { _ = rdb.Del(context.Background(), key).Err() })
	return key, "WRONGTYPE"
}

// setupMQTT subscribes at QoS 1 to a fresh topic, with a session that
// outlives a connection, so a broker restart loses nothing queued for it.
func setupMQTT(t testing.TB, u string, c *consumer) string {
	t.Helper()
	topic := testdb.Unique("ontime_t_") + "/due"
	subscribeMQTT(t, u, topic, c)
	return topic
}

func subscribeMQTT(t testing.TB, u, topic string, c *consumer) {
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	cm, err := autopaho.NewConnection(ctx, autopaho.ClientConfig{
		ServerUrls: []*url.URL{pu}, KeepAlive: 20, CleanStartOnInitialConnection: true, SessionExpiryInterval: 600,
		ReconnectBackoff: autopaho.NewConstantBackoff(100 * time.Millisecond),
		OnConnectionUp: func(cm *autopaho.ConnectionManager, ca *paho.Connack) {
			if !ca.SessionPresent {
				go func() {
					if _, err := cm.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: topic, QoS: 1}}}); err == nil {
						select {
						case ready <- struct{}{}:
						default:
						}
					}
				}()
			}
		},
		ClientConfig: paho.ClientConfig{
			ClientID: testdb.Unique("ontime-t-"),
			OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
				h := map[string]string{}
				if pr.Packet.Properties != nil {
					for _, p := range pr.Packet.Properties.User {
						h[p.Key] = p.Value
					}
				}
				c.add(brokerMsg{Body: pr.Packet.Payload, Headers: h, At: time.Now()})
				return true, nil
			}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		dctx, dcancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer dcancel()
		_ = cm.Disconnect(dctx)
		cancel()
	})
	select {
	case <-ready:
	case <-time.After(20 * time.Second):
		t.Fatalf("MQTT broker at %s is required: no subscription within 20s", u)
	}
}

// unroutableMQTT: a topic nobody subscribes to.
func unroutableMQTT(t testing.TB, u string) (string, string) {
	return testdb.Unique("ontime_t_") + "/nobody", "no subscriber"
}
