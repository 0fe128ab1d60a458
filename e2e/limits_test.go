package e2e

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/internal/testdb"
)

// limitReceiver counts calls and the calls in flight at once.
type limitReceiver struct {
	srv           *httptest.Server
	mu            sync.Mutex
	at            []time.Time
	inFlight, max int
	byTopic       map[string]int // in flight per topic
	maxByTopic    map[string]int
}

func newLimitReceiver(t *testing.T, hold time.Duration) *limitReceiver {
	r := &limitReceiver{byTopic: map[string]int{}, maxByTopic: map[string]int{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		topic := req.URL.Query().Get("topic")
		r.mu.Lock()
		r.at = append(r.at, time.Now())
		r.inFlight++
		r.max = max(r.max, r.inFlight)
		r.byTopic[topic]++
		r.maxByTopic[topic] = max(r.maxByTopic[topic], r.byTopic[topic])
		r.mu.Unlock()
		time.Sleep(hold)
		r.mu.Lock()
		r.inFlight--
		r.byTopic[topic]--
		r.mu.Unlock()
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *limitReceiver) calls() []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Time(nil), r.at...)
}

// topicLimits is TopicDefaults for the tests: fixed limits per topic.
type topicLimits map[string][2]int

func (t topicLimits) Priority(string) (int, bool) { return 0, false }
func (t topicLimits) Limits(topic string) (float64, int) {
	l := t[topic]
	return float64(l[0]), l[1]
}

// startLimitCluster starts three nodes on one PostgreSQL database (the
// database coordinator), sharing a private Redis as their hot tier when
// withRedis, and waits until each sees the three live.
func startLimitCluster(t *testing.T, withRedis bool, dest ontime.DestinationConfig, destURL string, topics topicLimits) ([]*ontime.Node, []string) {
	t.Helper()
	dsns := testdb.DSNs(t, "postgres", 1)
	var redisAddr string
	if withRedis {
		redisAddr = testdb.StartRedis(t).Addr()
	}
	ids := []string{"l1", "l2", "l3"}
	var nodes []*ontime.Node
	var urls []string
	for _, id := range ids {
		cfg := ontime.DefaultConfig()
		cfg.NodeID = id
		cfg.DataDir = t.TempDir()
		cfg.Store.Driver = "postgres"
		cfg.Store.Databases = dsns
		cfg.Store.Tables = 4
		cfg.Store.Segments = 6
		cfg.Hot.Window = ontime.Duration(time.Second)
		cfg.Cluster.Coordinator = "database"
		cfg.Cluster.LeaseTTL = ontime.Duration(2 * time.Second)
		cfg.Delivery.LeaseTTL = ontime.Duration(5 * time.Second)
		cfg.Delivery.ShutdownGrace = ontime.Duration(time.Second)
		cfg.Destinations = map[string]ontime.DestinationConfig{destURL: dest}
		if withRedis {
			cfg.Hot.Tier = "redis"
			cfg.Hot.RedisAddrs = []string{redisAddr}
		}
		node, err := ontime.NewNode(t.Context(), cfg, ontime.WithTopicDefaults(topics))
		if err != nil {
			t.Fatalf("NewNode %s: %v", id, err)
		}
		if err := node.Start(t.Context()); err != nil {
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
		nodes = append(nodes, node)
		urls = append(urls, srv.URL)
	}
	for _, n := range nodes {
		waitFor(t, 30*time.Second, "three nodes share the items", func() bool {
			v, err := n.Cluster(t.Context())
			return err == nil && balanced(v, ids)
		})
	}
	time.Sleep(2 * time.Second) // the shares follow the live nodes every second
	return nodes, urls
}

// metricValue is the value of the series line that starts with series
// in the node's /metrics, -1 when there is none.
func metricValue(t *testing.T, url, series string) float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for line := range strings.Lines(string(body)) {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err == nil {
				return v
			}
		}
	}
	return -1
}

// submitSpread submits n tasks due at due, through every node in turn.
func submitSpread(t *testing.T, nodes []*ontime.Node, n int, topic, target string, due time.Time) {
	t.Helper()
	for start := 0; start < n; start += 500 {
		specs := make([]ontime.TaskSpec, min(500, n-start))
		for i := range specs {
			specs[i] = ontime.TaskSpec{Topic: topic, DueAt: due, Target: target}
		}
		res, err := nodes[(start/500)%len(nodes)].SubmitBatch(t.Context(), specs)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
	}
}

// A destination's rate is a cluster-wide total: three nodes with a
// backlog for a destination of rate 100 send it 100 calls a second
// between them, within 5 % over 30 s; with the Redis tier (one GCRA
// bucket in Redis) and without (each node a third).
func TestClusterWideRate(t *testing.T) {
	t.Parallel()
	for _, withRedis := range []bool{true, false} {
		t.Run(map[bool]string{true: "redis", false: "shares"}[withRedis], func(t *testing.T) {
			t.Parallel()
			const limit, window = 100.0, 30 * time.Second
			rcv := newLimitReceiver(t, 0)
			nodes, urls := startLimitCluster(t, withRedis, ontime.DestinationConfig{Rate: limit}, rcv.srv.URL, nil)
			// Enough that every node still has a backlog at the window's
			// end: 24 items over 3 nodes, 45 s of the limit.
			submitSpread(t, nodes, int(limit*45), "e2e.rate", rcv.srv.URL+"/hook", time.Now().Add(2*time.Second))
			waitFor(t, 30*time.Second, "the first calls", func() bool { return len(rcv.calls()) > 0 })
			// The window starts 3 s after the first call: the backlog is
			// in every node's lane by then.
			from := rcv.calls()[0].Add(3 * time.Second)
			to := from.Add(window)
			time.Sleep(time.Until(to) + 500*time.Millisecond)
			n := 0
			for _, at := range rcv.calls() {
				if !at.Before(from) && at.Before(to) {
					n++
				}
			}
			got := float64(n) / window.Seconds()
			t.Logf("%s: %d calls in %s: %.2f/s for a limit of %.0f/s", t.Name(), n, window, got, limit)
			if got > limit*1.05 || got < limit*0.95 {
				t.Fatalf("total rate %.2f/s; want %.0f/s ± 5 %%", got, limit)
			}
			var throttled bool
			for _, u := range urls {
				if v := metricValue(t, u, `ontime_limit{kind="destination",limit="rate",name="`+rcv.srv.URL+`"}`); v != limit {
					t.Errorf("%s: ontime_limit of the destination's rate is %v, want %v", u, v, limit)
				}
				share := metricValue(t, u, `ontime_limit_share{kind="destination",limit="rate",name="`+rcv.srv.URL+`"}`)
				if want := map[bool]float64{true: limit, false: limit / 3}[withRedis]; share < want-0.01 || share > want+0.01 {
					t.Errorf("%s: ontime_limit_share of the rate is %v, want %v", u, share, want)
				}
				if metricValue(t, u, `ontime_limit_throttled_total{kind="destination",limit="rate",name="`+rcv.srv.URL+`"}`) > 0 {
					throttled = true
				}
			}
			if !throttled {
				t.Error("no node counted a throttled call")
			}
		})
	}
}

// A destination's and a topic's concurrency are cluster-wide totals: the
// receiver never has more calls in flight than the limits, though each
// node alone could make more; with Redis and without.
func TestClusterWideConcurrency(t *testing.T) {
	t.Parallel()
	for _, withRedis := range []bool{true, false} {
		t.Run(map[bool]string{true: "redis", false: "shares"}[withRedis], func(t *testing.T) {
			t.Parallel()
			rcv := newLimitReceiver(t, 20*time.Millisecond)
			topics := topicLimits{"e2e.conc.topic": {0, 3}}
			nodes, urls := startLimitCluster(t, withRedis, ontime.DestinationConfig{Concurrency: 7}, rcv.srv.URL, topics)
			due := time.Now().Add(2 * time.Second)
			submitSpread(t, nodes, 1500, "e2e.conc", rcv.srv.URL+"/?topic=e2e.conc", due)
			submitSpread(t, nodes, 600, "e2e.conc.topic", rcv.srv.URL+"/?topic=e2e.conc.topic", due)
			waitFor(t, 120*time.Second, "every task delivered", func() bool { return len(rcv.calls()) >= 2100 })
			rcv.mu.Lock()
			most, mostTopic := rcv.max, rcv.maxByTopic["e2e.conc.topic"]
			rcv.mu.Unlock()
			t.Logf("at most %d calls in flight (limit 7), %d of the limited topic (limit 3)", most, mostTopic)
			if most > 7 {
				t.Errorf("%d calls in flight at once; the destination's concurrency is 7 cluster wide", most)
			}
			if mostTopic > 3 {
				t.Errorf("%d calls of topic e2e.conc.topic in flight at once; its concurrency is 3 cluster wide", mostTopic)
			}
			if most < 5 {
				t.Errorf("at most %d calls in flight: the nodes did not use the limit", most)
			}
			// The topic's limits in GET /v1/topics.
			tp := topicOf(t, newAPIClient(t, urls[0]), "e2e.conc.topic")
			if l := tp.Limits; l == nil || l.Concurrency != 3 || l.ConcurrencyShare < 1 || l.Throttled < 0 {
				t.Errorf("GET /v1/topics shows limits %+v for e2e.conc.topic; want concurrency 3 and a share", l)
			}
		})
	}
}
