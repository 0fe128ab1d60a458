package ontime

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/internal/deliver"
	"github.com/ontimehq/ontime/internal/deliver/webhook"
	hotredis "github.com/ontimehq/ontime/internal/hot/redis"
	"github.com/ontimehq/ontime/internal/limit"
	"github.com/ontimehq/ontime/internal/startstop"
	"github.com/ontimehq/ontime/internal/task"
)

// TopicDefaults is what delivery control reads of the topics' settings
// (topics: {NAME: {priority, rate, concurrency}} and PUT
// /v1/topics/{topic}): a topic's default priority and its cluster-wide
// limits. nil (the default): no topic sets any. Read per task and per
// call, so an implementation answers from memory.
type TopicDefaults interface {
	// Priority is the topic's default priority; ok false when it sets none.
	Priority(topic string) (p int, ok bool)
	// Limits are the topic's rate (calls/s) and concurrency (calls in
	// flight), cluster wide; 0: no limit.
	Limits(topic string) (rate float64, concurrency int)
}

// limits builds the cluster-wide limits (docs/topics.md, "Cluster-wide limits"):
// with a cluster and the Redis hot tier, kept in Redis; with a cluster
// and no Redis, split into shares among the live nodes; on a node alone,
// its own (a destination's are its lane's: no gate). It returns the
// backend's service (nil: none to run).
type limits struct {
	backend interface {
		Gate(kind, name string, spec limit.Spec) limit.Gate
	}
	service startstop.Service
	cluster bool
	lease   time.Duration
	topics  TopicDefaults

	mu         sync.Mutex
	destGates  map[string]limit.Gate
	topicGates map[string]topicGate
}

type topicGate struct {
	rate float64
	conc int
	gate limit.Gate
}

func (n *Node) newLimits(m *limit.Metrics) (*limits, error) {
	cfg := n.cfg
	l := &limits{cluster: cfg.Cluster.Coordinator != "none", lease: cfg.deliveryTimeout() + time.Duration(cfg.Delivery.LeaseTTL),
		topics: n.topicDefaults, destGates: map[string]limit.Gate{}, topicGates: map[string]topicGate{}}
	if rt, ok := n.tier.(*hotredis.Tier); ok && l.cluster {
		r, err := limit.NewRedis(limit.RedisConfig{Client: rt.Client(), Prefix: cfg.Hot.RedisPrefix, Self: cfg.NodeID, Metrics: m})
		if err != nil {
			return nil, err
		}
		l.backend = r
		return l, nil
	}
	sc := limit.SharesConfig{Self: cfg.NodeID, Metrics: m, Logger: n.log}
	if l.cluster {
		sc.Live = func(ctx context.Context) ([]string, error) {
			live, err := n.liveNodes(ctx)
			if err != nil {
				return nil, err
			}
			ids := make([]string, len(live))
			for i, x := range live {
				ids[i] = x.ID
			}
			return ids, nil
		}
	}
	sh := limit.NewShares(sc)
	l.backend = sh
	if l.cluster {
		l.service = sh // alone, the node's share is the whole: nothing to follow
	}
	return l, nil
}

// topicGateFunc is the dispatcher's TopicGate: nil when no topic can set
// limits, so a delivery asks nothing.
func (l *limits) topicGateFunc() func(topic string) deliver.Gate {
	if l.topics == nil {
		return nil
	}
	return l.topicGate
}

// limitServices is the limits' backend service, when it has one.
func (n *Node) limitServices() []startstop.Service {
	if n.limits == nil || n.limits.service == nil {
		return nil
	}
	return []startstop.Service{n.limits.service}
}

// destGate is a webhook destination's gate: in a cluster, for a
// destination of the config with a rate or a concurrency.
func (l *limits) destGate(dest string, d webhook.Destination, configured bool) deliver.Gate {
	if !l.cluster || !configured || (d.Rate == 0 && d.Concurrency == 0) {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	g, ok := l.destGates[dest]
	if !ok {
		g = l.backend.Gate(limit.KindDestination, dest, limit.Spec{Rate: d.Rate, Concurrency: d.Concurrency, Lease: l.lease})
		l.destGates[dest] = g
	}
	return g
}

// topicGate is a topic's gate (Dispatcher's TopicGate), nil without
// limits.
func (l *limits) topicGate(topic string) deliver.Gate {
	if g := l.topicLimit(topic); g != nil {
		return g
	}
	return nil
}

// topicLimit is a topic's gate, nil without limits; made again when the
// topic's limits change.
func (l *limits) topicLimit(topic string) limit.Gate {
	if l.topics == nil {
		return nil
	}
	r, c := l.topics.Limits(topic)
	l.mu.Lock()
	defer l.mu.Unlock()
	tg, ok := l.topicGates[topic]
	if ok && tg.rate == r && tg.conc == c {
		return tg.gate
	}
	tg = topicGate{rate: r, conc: c}
	if r > 0 || c > 0 {
		tg.gate = l.backend.Gate(limit.KindTopic, topic, limit.Spec{Rate: r, Concurrency: c, Lease: l.lease})
	}
	l.topicGates[topic] = tg
	return tg.gate
}

// topicView is a topic's limits for GET /v1/topics; nil without.
func (l *limits) topicView(topic string) *apiv1.TopicLimits {
	if l == nil || l.topics == nil {
		return nil
	}
	g := l.topicLimit(topic)
	if g == nil {
		return nil
	}
	v := g.View()
	return &apiv1.TopicLimits{Rate: v.Rate, Concurrency: v.Concurrency, RateShare: v.RateShare, ConcurrencyShare: v.ConcurrencyShare,
		Throttled: v.Throttled}
}

// laneGates wraps laneConfig: each configured webhook destination's lane
// gets its gate.
func (l *limits) laneGates(lanes func(dest string) deliver.LaneConfig, dests map[string]webhook.Destination) func(dest string) deliver.LaneConfig {
	return func(dest string) deliver.LaneConfig {
		c := lanes(dest)
		if strings.HasPrefix(dest, task.MQScheme) {
			return c
		}
		d, ok := dests[dest]
		c.Gate = l.destGate(dest, d, ok)
		return c
	}
}

// settingsDefaults gives the topics' settings (n.settings: the config's
// topics section under what PUT /v1/topics/{topic} stored) as the node's
// TopicDefaults. It reads n.settings at each call: the settings are built
// after the limits.
type settingsDefaults struct{ n *Node }

func (d settingsDefaults) Priority(topic string) (int, bool) {
	if d.n.settings == nil {
		return 0, false
	}
	p := d.n.settings.Priority(topic)
	return p, p > 0
}

func (d settingsDefaults) Limits(topic string) (rate float64, concurrency int) {
	if d.n.settings == nil {
		return 0, 0
	}
	return d.n.settings.Limits(topic)
}
