package broker_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/deliver"
	"github.com/ontimehq/ontime/internal/deliver/broker"
	"github.com/ontimehq/ontime/internal/deliver/broker/amqp"
	"github.com/ontimehq/ontime/internal/deliver/broker/mqtt"
	"github.com/ontimehq/ontime/internal/deliver/broker/natsjs"
	"github.com/ontimehq/ontime/internal/deliver/broker/redisstream"
	"github.com/ontimehq/ontime/internal/startstop"
	"github.com/ontimehq/ontime/internal/task"
)

// scripted is a Publisher whose Publish answers from a script.
type scripted struct {
	startstop.Base
	mu      sync.Mutex
	answers []error // one per call; past the end: nil
	calls   []string
	msgs    []*broker.Message
}

func (s *scripted) Kind() string { return "fake" }
func (s *scripted) CheckAddress(a string) error {
	if strings.Contains(a, "bad") {
		return errors.New("bad address")
	}
	return nil
}
func (s *scripted) Start(context.Context) error { return nil }
func (s *scripted) Publish(ctx context.Context, address string, m *broker.Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, address)
	s.msgs = append(s.msgs, m)
	if len(s.answers) == 0 {
		return nil
	}
	err := s.answers[0]
	s.answers = s.answers[1:]
	return err
}

func delivery(target string) deliver.Delivery {
	return deliver.Delivery{ID: "t1", Topic: "orders", Key: "k1", Target: target, Payload: []byte(`{"a":1}`),
		DueAt: time.Date(2030, 1, 2, 3, 4, 5, 600000000, time.UTC), Attempt: 3}
}

func TestSetCheckTarget(t *testing.T) {
	s, err := broker.NewSet(map[string]broker.Publisher{"rabbit": &scripted{}}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CheckTarget("rabbit", "ok"); err != nil {
		t.Errorf("good target: %v", err)
	}
	if err := s.CheckTarget("other", "ok"); err == nil || !strings.Contains(err.Error(), `"other", which is not configured (brokers: rabbit)`) {
		t.Errorf("unknown broker: %v", err)
	}
	if err := s.CheckTarget("rabbit", "bad"); err == nil || !strings.Contains(err.Error(), `bad fake address "bad" for broker "rabbit"`) {
		t.Errorf("bad address: %v", err)
	}
	// Through task validation: a FieldError on target.
	l := task.Limits{Brokers: s}
	for target, ok := range map[string]bool{"mq://rabbit/ok": true, "mq://rabbit/bad": false, "mq://nope/x": false, "mq://rabbit/": false, "mq://rabbit/a b": false} {
		err := l.ValidateTarget(target)
		var fe *task.FieldError
		if ok != (err == nil) || (err != nil && (!errors.As(err, &fe) || fe.Field != "target")) {
			t.Errorf("%q: %v", target, err)
		}
	}
	if err := (task.Limits{}).ValidateTarget("mq://rabbit/ok"); err == nil || !strings.Contains(err.Error(), "no brokers are configured") {
		t.Errorf("without brokers: %v", err)
	}
	if _, err := broker.NewSet(map[string]broker.Publisher{"bad name": &scripted{}}, time.Second); err == nil {
		t.Error("a bad broker name was accepted")
	}
}

func TestSetDeliverRepublishesAfterConnLost(t *testing.T) {
	p := &scripted{answers: []error{broker.ErrConnLost, broker.ErrConnLost}}
	s, _ := broker.NewSet(map[string]broker.Publisher{"b": p}, 10*time.Second)
	if err := s.Deliver(context.Background(), delivery("mq://b/orders/due")); err != nil {
		t.Fatal(err)
	}
	if len(p.calls) != 3 || p.calls[0] != "orders/due" {
		t.Fatalf("calls %v; want three publishes to orders/due", p.calls)
	}
	m := p.msgs[2]
	want := map[string]string{"ontime-task-id": "t1", "ontime-attempt": "3", "ontime-topic": "orders", "ontime-key": "k1", "ontime-due-at": "2030-01-02T03:04:05.6Z"}
	for _, h := range m.Headers {
		if want[h.Name] != h.Value {
			t.Errorf("header %s = %q, want %q", h.Name, h.Value, want[h.Name])
		}
		delete(want, h.Name)
	}
	if len(want) != 0 || string(m.Body) != `{"a":1}` || m.ID != "t1" {
		t.Errorf("message %+v; missing headers %v", m, want)
	}
}

func TestSetDeliverFailures(t *testing.T) {
	refused := errors.New("NO_ROUTE")
	p := &scripted{answers: []error{refused}}
	s, _ := broker.NewSet(map[string]broker.Publisher{"b": p}, 10*time.Second)
	err := s.Deliver(context.Background(), delivery("mq://b/x"))
	if !errors.Is(err, refused) || !strings.Contains(err.Error(), `fake broker "b"`) || deliver.IsPermanent(err) || len(p.calls) != 1 {
		t.Errorf("refused: %v after %d calls; want the broker's reason, not permanent, one call", err, len(p.calls))
	}
	// A broker no longer configured: a failed attempt, not permanent.
	if err := s.Deliver(context.Background(), delivery("mq://gone/x")); err == nil || deliver.IsPermanent(err) {
		t.Errorf("unknown broker: %v", err)
	}
	// Lost connections until the attempt's timeout: the last cause is kept.
	always := &scripted{}
	for range 1000 {
		always.answers = append(always.answers, broker.ErrConnLost)
	}
	s, _ = broker.NewSet(map[string]broker.Publisher{"b": always}, 100*time.Millisecond)
	if err := s.Deliver(context.Background(), delivery("mq://b/x")); !errors.Is(err, broker.ErrConnLost) || !strings.Contains(err.Error(), "no acknowledgement within 100ms") {
		t.Errorf("timeout: %v", err)
	}
}

func TestLink(t *testing.T) {
	l := broker.NewLink()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := l.Wait(ctx); err == nil || !strings.Contains(err.Error(), "not connected") {
		t.Fatalf("down link: %v", err)
	}
	got := make(chan context.Context, 1)
	go func() {
		conn, err := l.Wait(context.Background())
		if err != nil {
			t.Error(err)
		}
		got <- conn
	}()
	l.Up()
	conn := <-got
	if conn.Err() != nil {
		t.Fatal("lost before Down")
	}
	l.Down(errors.New("reset by peer"))
	<-conn.Done()
	if !strings.Contains(l.Err().Error(), "reset by peer") {
		t.Errorf("Err %v", l.Err())
	}
	l.Up()
	conn2, err := l.Wait(context.Background())
	if err != nil || conn2.Err() != nil || conn2 == conn {
		t.Fatalf("second connection: %v", err)
	}
}

func TestAddresses(t *testing.T) {
	cases := []struct {
		kind  string
		check func(string) error
		good  []string
		bad   []string
	}{
		{"amqp", amqp.CheckAddress, []string{"orders/order.cancel", "/queue1", "amq.topic/a.b", "fanout/"},
			[]string{"noslash", "/", "bad exchange!/k", strings.Repeat("x", 256) + "/k", "ex/" + strings.Repeat("k", 256)}},
		{"nats", natsjs.CheckAddress, []string{"orders", "orders.cancel.eu"}, []string{"orders.*", "orders.>", "a..b", ".a", "a."}},
		{"redis", redisstream.CheckAddress, []string{"orders", "orders:{eu}:due"}, []string{""}},
		{"mqtt", mqtt.CheckAddress, []string{"orders/cancel", "a"}, []string{"", "orders/#", "orders/+/x", "$SYS/x"}},
	}
	for _, c := range cases {
		for _, a := range c.good {
			if err := c.check(a); err != nil {
				t.Errorf("%s %q: %v", c.kind, a, err)
			}
		}
		for _, a := range c.bad {
			if err := c.check(a); err == nil {
				t.Errorf("%s %q accepted", c.kind, a)
			}
		}
	}
}

func TestURLs(t *testing.T) {
	good := map[string]func(string) error{
		"amqp://guest:guest@127.0.0.1:5672/": amqp.CheckURL, "amqps://h/vhost": amqp.CheckURL,
		"nats://127.0.0.1:4222": natsjs.CheckURL, "nats://a:4222,nats://b:4222": natsjs.CheckURL,
		"redis://127.0.0.1:6379/0": redisstream.CheckURL, "rediss://u:p@h:6380/1?maxlen=1000": redisstream.CheckURL,
		"mqtt://127.0.0.1:1883": mqtt.CheckURL, "mqtts://u:p@h": mqtt.CheckURL,
	}
	for u, check := range good {
		if err := check(u); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
	bad := map[string]func(string) error{
		"http://h": amqp.CheckURL, "nats://": natsjs.CheckURL, "redis://h/0?maxlen=x": redisstream.CheckURL,
		"redis://h/0?bogus=1": redisstream.CheckURL, "mqtt://h/path": mqtt.CheckURL, "mqtt://": mqtt.CheckURL,
	}
	for u, check := range bad {
		if err := check(u); err == nil {
			t.Errorf("%s accepted", u)
		}
	}
	opt, maxLen, err := redisstream.ParseURL("redis://127.0.0.1:6379/2?maxlen=500&dial_timeout=3s")
	if err != nil || maxLen != 500 || opt.DB != 2 || opt.DialTimeout != 3*time.Second {
		t.Errorf("ParseURL: %+v %d %v", opt, maxLen, err)
	}
}

func TestRegistry(t *testing.T) {
	r := broker.NewRegistry(amqp.Kind(), natsjs.Kind(), redisstream.Kind(), mqtt.Kind())
	if got := strings.Join(r.Schemes(), ","); got != "amqp,amqps,nats,redis,rediss,mqtt,mqtts" {
		t.Errorf("schemes %s", got)
	}
	for url, want := range map[string]string{
		"h:1883":                         "brokers.b: not a URL; want amqp://, amqps://, nats://, redis://, rediss://, mqtt:// or mqtts://",
		"kafka://h:9092":                 `brokers.b: scheme "kafka" is not one of amqp, amqps, nats, redis, rediss, mqtt, mqtts`,
		"mqtt://":                        "brokers.b: no host",
		"rediss://u:s3cr3t@h/0?maxlen=0": `brokers.b: maxlen="0": want a positive integer`,
	} {
		if err := r.Check(map[string]string{"b": url}); err == nil || err.Error() != want {
			t.Errorf("%s: %v; want %s", url, err, want)
		}
	}
	// A password the URL parser quotes is masked.
	if err := r.Check(map[string]string{"b": "amqp://u:s3cr3t@h:port/"}); err == nil || strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("bad port: %v", err)
	}
	if err := r.Check(map[string]string{"bad name": "nats://h:4222"}); err == nil || !strings.HasPrefix(err.Error(), "brokers.bad name: the name") {
		t.Errorf("bad name: %v", err)
	}
	// Names in order: the first bad one is reported, every run.
	if err := r.Check(map[string]string{"b": "x://h", "a": "y://h", "c": "nats://h:4222"}); err == nil || !strings.HasPrefix(err.Error(), "brokers.a:") {
		t.Errorf("two bad: %v", err)
	}
	// NewSet builds one publisher per broker, of its scheme's kind, not
	// started; upper-case schemes and spaces around the URL are taken.
	s, err := r.NewSet(map[string]string{"rabbit": " AMQP://guest:guest@127.0.0.1:1/ ", "js": "nats://127.0.0.1:1"}, time.Second, nil)
	if err != nil || s.Len() != 2 {
		t.Fatalf("NewSet: %v", err)
	}
	if err := s.CheckTarget("rabbit", "orders.*"); err == nil || !strings.Contains(err.Error(), "bad amqp address") {
		t.Errorf("amqp address checked as another kind: %v", err)
	}
	if err := s.CheckTarget("js", "orders.*"); err == nil || !strings.Contains(err.Error(), "bad nats address") {
		t.Errorf("nats address: %v", err)
	}
	if _, err := r.NewSet(map[string]string{"b": "kafka://h"}, time.Second, nil); err == nil || !strings.HasPrefix(err.Error(), `brokers.b: scheme "kafka"`) {
		t.Errorf("NewSet of an unknown scheme: %v", err)
	}
	// A scheme registered twice is the composition root's mistake.
	defer func() {
		if recover() == nil {
			t.Error("a scheme registered twice was accepted")
		}
	}()
	r.Register(broker.Kind{Schemes: []string{"nats"}, CheckURL: natsjs.CheckURL, New: natsjs.Kind().New})
}
