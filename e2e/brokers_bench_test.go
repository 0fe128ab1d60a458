package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strconv"
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

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/internal/testdb"
)

// Broker benchmarks: ONTIME_BENCH_MQ_N tasks (default 50,000) due at one
// instant to each broker, consumed by a real consumer; then the broker's
// own client publishes the same number of messages, same body and
// headers, in a tight loop with as many in flight as it allows (the limit
// of the broker and the client on this machine), in the same run. Reported:
// ontime's drain rate (tasks/s from the due instant to the last one
// consumed), lateness at the consumer, the most publishes in flight, the
// client's rate and the ratio. Run:
//
//	go test ./e2e -run '^$' -bench 'BrokerBurst' -benchtime=1x
func BenchmarkBrokerBurst(b *testing.B) {
	n := 50000
	if v, err := strconv.Atoi(os.Getenv("ONTIME_BENCH_MQ_N")); err == nil && v > 0 {
		n = v
	}
	// handler: the same burst to a Go handler that records like a
	// consumer, the pipeline's own ceiling in this run.
	b.Run("handler", func(b *testing.B) {
		for range b.N {
			benchBrokerBurst(b, brokerKind{name: "handler"}, n)
		}
	})
	for _, k := range brokerKinds {
		b.Run(k.name, func(b *testing.B) {
			for range b.N {
				benchBrokerBurst(b, k, n)
			}
		})
	}
}

func brokerBenchNode(b *testing.B, brokerURL string) *ontime.Node {
	cfg := ontime.DefaultConfig()
	cfg.DataDir = b.TempDir()
	cfg.Delivery.Concurrency = 64
	if v, err := strconv.Atoi(os.Getenv("ONTIME_BENCH_MQ_CONCURRENCY")); err == nil && v > 0 {
		cfg.Delivery.BrokerConcurrency = v
	}
	if brokerURL != "" {
		cfg.Brokers = map[string]string{"mq": brokerURL}
	}
	return runBenchNode(b, cfg)
}

func benchBrokerBurst(b *testing.B, k brokerKind, n int) {
	cons := newConsumer()
	var node *ontime.Node
	target := ""
	if k.setup == nil {
		node = brokerBenchNode(b, "")
		if err := node.Handle("bench.mq", func(ctx context.Context, d *ontime.Delivery) error {
			cons.add(brokerMsg{Body: d.Payload, Headers: map[string]string{"ontime-task-id": d.ID}, At: time.Now()})
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	} else {
		target = "mq://mq/" + k.setup(b, k.url(), cons)
		node = brokerBenchNode(b, k.url())
	}
	ctx := context.Background()
	due := time.Now().Add(8 * time.Second)
	specs := make([]ontime.TaskSpec, 0, 1000)
	for i := range n {
		specs = append(specs, ontime.TaskSpec{Topic: "bench.mq", DueAt: due, Target: target, Payload: []byte(`{"i":` + strconv.Itoa(i) + `}`)})
		if len(specs) == cap(specs) || i == n-1 {
			res, err := node.SubmitBatch(ctx, specs)
			if err != nil {
				b.Fatal(err)
			}
			for _, r := range res {
				if r.Err != nil {
					b.Fatal(r.Err)
				}
			}
			specs = specs[:0]
		}
	}
	if time.Now().After(due.Add(-time.Second)) {
		b.Fatalf("submitting %d tasks took until %s before their due time", n, time.Until(due))
	}
	// Publishes in flight, sampled from the node's own gauge.
	srv := httptest.NewServer(node.HTTPHandler())
	defer srv.Close()
	stop := make(chan struct{})
	maxInFlight := 0
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if time.Now().Before(due.Add(-100 * time.Millisecond)) {
				continue
			}
			maxInFlight = max(maxInFlight, scrapeInFlight(srv.URL))
		}
	}()
	deadline := due.Add(120 * time.Second)
	for cons.distinct() < n && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	sampler.Wait()
	late, last, dups, early := consumerLateness(cons, due)
	if len(late) == 0 {
		b.Fatal("nothing consumed")
	}
	drain := float64(n) / last.Sub(due).Seconds()
	b.ReportMetric(drain, "drain_tasks/s")
	b.ReportMetric(ms(pct(late, 0.50)), "p50_ms")
	b.ReportMetric(ms(pct(late, 0.99)), "p99_ms")
	b.ReportMetric(ms(pct(late, 1)), "max_ms")
	b.ReportMetric(float64(n-cons.distinct()), "lost")
	b.ReportMetric(float64(dups), "dups")
	b.ReportMetric(float64(early), "early")
	b.ReportMetric(float64(maxInFlight), "max_in_flight")
	if k.setup == nil {
		return
	}

	// The broker's own client, same messages, same kind of destination.
	ccons := newConsumer()
	caddr := k.setup(b, k.url(), ccons)
	start := time.Now()
	clientPublish(b, k.name, k.url(), caddr, n)
	acked := time.Since(start)
	for ccons.distinct() < n && time.Now().Before(start.Add(120*time.Second)) {
		time.Sleep(20 * time.Millisecond)
	}
	_, clast, _, _ := consumerLateness(ccons, start)
	// Both rates run to the last message consumed, so consumer lag counts
	// the same on both sides; client_acked_msgs/s is the publisher alone.
	rate := float64(n) / clast.Sub(start).Seconds()
	if got := ccons.distinct(); got < n {
		// Mosquitto drops QoS 1 messages for a subscriber whose queue is
		// full (max_queued_messages): the client outran the consumer.
		b.Logf("client baseline: %d of %d consumed; rate taken at the publisher's acks", got, n)
		rate = float64(n) / acked.Seconds()
		b.ReportMetric(float64(n-got), "client_dropped_by_broker")
	}
	b.ReportMetric(float64(n)/acked.Seconds(), "client_acked_msgs/s")
	b.ReportMetric(rate, "client_msgs/s")
	b.ReportMetric(drain/rate, "ratio")
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// consumerLateness: consumed − due of every message, sorted; the last
// arrival; duplicates; messages consumed before their due time.
func consumerLateness(c *consumer, due time.Time) (late []time.Duration, last time.Time, dups, early int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.msgs {
		d := m.At.Sub(due)
		if d < 0 {
			early++
		}
		late = append(late, d)
		if m.At.After(last) {
			last = m.At
		}
	}
	for _, cnt := range c.byID {
		dups += cnt - 1
	}
	slices.Sort(late)
	return late, last, dups, early
}

// scrapeInFlight sums ontime_delivery_in_flight over destinations.
func scrapeInFlight(base string) int {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	sum := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "ontime_delivery_in_flight{") {
			if i := strings.LastIndexByte(l, ' '); i > 0 {
				v, _ := strconv.ParseFloat(l[i+1:], 64)
				sum += int(v)
			}
		}
	}
	return sum
}

// benchHeaders are the headers ontime sends, for the client baseline.
func benchHeaders(i int) [][2]string {
	return [][2]string{{"ontime-task-id", fmt.Sprintf("bench%021d", i)}, {"ontime-attempt", "1"}, {"ontime-topic", "bench.mq"},
		{"ontime-key", ""}, {"ontime-due-at", time.Now().UTC().Format(time.RFC3339Nano)}}
}

// clientPublish publishes n messages to address with the broker's own
// client, pipelined, and returns once the broker acknowledged them all.
func clientPublish(b *testing.B, kind, u, address string, n int) {
	ctx := context.Background()
	body := func(i int) []byte { return []byte(`{"i":` + strconv.Itoa(i) + `}`) }
	switch kind {
	case "amqp":
		conn, err := amqp.Dial(u)
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		ch, err := conn.Channel()
		if err != nil {
			b.Fatal(err)
		}
		if err := ch.Confirm(false); err != nil {
			b.Fatal(err)
		}
		exchange, key, _ := strings.Cut(address, "/")
		dcs := make([]*amqp.DeferredConfirmation, n)
		for i := range n {
			h := amqp.Table{}
			for _, kv := range benchHeaders(i) {
				h[kv[0]] = kv[1]
			}
			dcs[i], err = ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, true, false, amqp.Publishing{
				Headers: h, ContentType: "application/json", DeliveryMode: amqp.Persistent, MessageId: h["ontime-task-id"].(string), Body: body(i)})
			if err != nil {
				b.Fatal(err)
			}
		}
		for _, dc := range dcs {
			if ok, err := dc.WaitContext(ctx); !ok || err != nil {
				b.Fatalf("confirm: %v %v", ok, err)
			}
		}
	case "nats":
		nc, err := nats.Connect(u)
		if err != nil {
			b.Fatal(err)
		}
		defer nc.Close()
		js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(16384))
		if err != nil {
			b.Fatal(err)
		}
		futs := make([]jetstream.PubAckFuture, n)
		for i := range n {
			m := &nats.Msg{Subject: address, Data: body(i), Header: nats.Header{}}
			for _, kv := range benchHeaders(i) {
				m.Header.Set(kv[0], kv[1])
			}
			futs[i], err = js.PublishMsgAsync(m, jetstream.WithMsgID(m.Header.Get("ontime-task-id")))
			if err != nil {
				b.Fatal(err)
			}
		}
		for _, f := range futs {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				b.Fatal(err)
			}
		}
	case "redis":
		opt, err := goredis.ParseURL(u)
		if err != nil {
			b.Fatal(err)
		}
		rdb := goredis.NewClient(opt)
		defer rdb.Close()
		for lo := 0; lo < n; lo += 512 {
			pipe := rdb.Pipeline()
			for i := lo; i < min(lo+512, n); i++ {
				vals := []any{"payload", body(i)}
				for _, kv := range benchHeaders(i) {
					vals = append(vals, kv[0], kv[1])
				}
				pipe.XAdd(ctx, &goredis.XAddArgs{Stream: address, Values: vals})
			}
			if _, err := pipe.Exec(ctx); err != nil {
				b.Fatal(err)
			}
		}
	case "mqtt":
		pu, _ := url.Parse(u)
		up := make(chan struct{}, 1)
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		cm, err := autopaho.NewConnection(cctx, autopaho.ClientConfig{ServerUrls: []*url.URL{pu}, KeepAlive: 20,
			CleanStartOnInitialConnection: true, OnConnectionUp: func(*autopaho.ConnectionManager, *paho.Connack) { up <- struct{}{} },
			ClientConfig: paho.ClientConfig{ClientID: testdb.Unique("ontime-bench-")}})
		if err != nil {
			b.Fatal(err)
		}
		<-up
		// paho's Publish waits for its PUBACK; as many goroutines as the
		// broker's Receive Maximum lets be in flight keep the pipe full.
		var wg sync.WaitGroup
		const workers = 64
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < n; i += workers {
					props := &paho.PublishProperties{ContentType: "application/json"}
					for _, kv := range benchHeaders(i) {
						props.User = append(props.User, paho.UserProperty{Key: kv[0], Value: kv[1]})
					}
					if _, err := cm.Publish(cctx, &paho.Publish{QoS: 1, Topic: address, Payload: body(i), Properties: props}); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		dctx, dcancel := context.WithTimeout(ctx, 2*time.Second)
		defer dcancel()
		_ = cm.Disconnect(dctx)
	}
}

// BenchmarkBrokerSteady1000: 1,000 tasks/s due evenly for 5 s to each
// broker (submitted a second ahead, as a producer would), lateness at the
// consumer.
//
//	go test ./e2e -run '^$' -bench 'BrokerSteady' -benchtime=1x
func BenchmarkBrokerSteady1000(b *testing.B) {
	const rate, span = 1000, 5 * time.Second
	// handler: a Go handler in the same run, the pipeline's own lateness.
	for _, k := range append([]brokerKind{{name: "handler"}}, brokerKinds...) {
		b.Run(k.name, func(b *testing.B) {
			for range b.N {
				cons := newConsumer()
				var node *ontime.Node
				target := ""
				if k.setup == nil {
					node = brokerBenchNode(b, "")
					_ = node.Handle("bench.mq", func(ctx context.Context, d *ontime.Delivery) error {
						cons.add(brokerMsg{Headers: map[string]string{"ontime-task-id": d.ID}, At: time.Now()})
						return nil
					})
				} else {
					target = "mq://mq/" + k.setup(b, k.url(), cons)
					node = brokerBenchNode(b, k.url())
				}
				ctx := context.Background()
				n := int(span.Seconds() * rate)
				start := time.Now().Add(2 * time.Second)
				step := time.Second / rate
				dues := map[string]time.Time{}
				var mu sync.Mutex
				go func() {
					for i := range n {
						due := start.Add(time.Duration(i) * step)
						if wait := time.Until(due.Add(-time.Second)); wait > 0 {
							time.Sleep(wait)
						}
						v, _, err := node.Submit(ctx, ontime.TaskSpec{Topic: "bench.mq", DueAt: due, Target: target, Payload: []byte(`{"i":` + strconv.Itoa(i) + `}`)})
						if err != nil {
							b.Error(err)
							return
						}
						mu.Lock()
						dues[v.ID] = v.DueAt
						mu.Unlock()
					}
				}()
				deadline := start.Add(span + 30*time.Second)
				for cons.distinct() < n && time.Now().Before(deadline) {
					time.Sleep(50 * time.Millisecond)
				}
				mu.Lock()
				var late []time.Duration
				early := 0
				for _, m := range cons.all() {
					d := m.At.Sub(dues[m.Headers["ontime-task-id"]])
					if d < 0 {
						early++
					}
					late = append(late, d)
				}
				mu.Unlock()
				slices.Sort(late)
				b.ReportMetric(ms(pct(late, 0.50)), "p50_ms")
				b.ReportMetric(ms(pct(late, 0.99)), "p99_ms")
				b.ReportMetric(ms(pct(late, 1)), "max_ms")
				b.ReportMetric(float64(early), "early")
				b.ReportMetric(float64(n-cons.distinct()), "lost")
			}
		})
	}
}
