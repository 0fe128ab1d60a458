package complete

import (
	"context"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// Unhandled is what becomes of a task without a target that reached a
// node with no Go handler for its topic (deliver.ErrNoHandler). It never
// reached anyone, so it uses no attempt:
//
//   - when a live node has the handler, the task goes back claimed by that
//     node (a new token, due as it was) and is handed off to it (the
//     store's handoffs, which it takes and puts in its hot tier): a
//     cluster need not register every handler on every node;
//   - when none has, the task waits, pending, with its reason as last
//     error ("no live node handles topic …"), counted in the metrics and
//     logged at WARN once per topic per minute, and is tried again after
//     four times as long as the topic has been unhandled, at most
//     MaxUnhandledWait: never retried into dead, delivered within that
//     wait of a handler's return.
//
// Nil: every such task waits as when no live node has the handler.
type Unhandled struct {
	// NodeID is this node's.
	NodeID string
	// Nodes returns the live nodes that have a Go handler for topic,
	// as the cluster's membership said last (this node's ID is skipped).
	Nodes func(topic string) []string
	// Handoffs leaves the tasks claimed for another node for it to take.
	Handoffs Handoffs
	// LeaseTTL is how long a handed-off claim waits for its node: past it
	// the task's item scanner claims it again.
	LeaseTTL time.Duration
}

// Handoffs is the store's mailbox of handed-off tasks.
type Handoffs interface {
	HandOff(ctx context.Context, node string, refs []store.Ref, now time.Time) error
}

// MaxUnhandledWait bounds how long a task no live node can deliver waits
// before it is tried again: how late it is delivered after a handler
// comes back. Each wait starts it and hands it back once (a claim, a
// start, an outcome): 10,000 such tasks cost under 170 of those a second
// at this bound, and their waits end together (rounded as the breaker's
// deferrals are), so they are claimed and started in batches.
const MaxUnhandledWait = time.Minute

// unhandledWarnEvery spaces the WARN lines of one unhandled topic.
const unhandledWarnEvery = time.Minute

// unhandledTopics tracks, per topic, since when no live node handles it
// (as this node has seen) and when that was last logged.
type unhandledTopics struct {
	mu sync.Mutex
	by map[string]*unhandledTopic
}

type unhandledTopic struct {
	since, last, warned time.Time
	count               int // deferred since the last WARN line
}

// seen records a task of topic deferred at now and returns since when the
// topic has been unhandled, and whether to log (with the count deferred
// since the last line). A topic not seen for longer than the longest wait
// was handled meanwhile: its outage starts again.
func (u *unhandledTopics) seen(topic string, now time.Time) (since time.Time, warn bool, count int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.by == nil {
		u.by = map[string]*unhandledTopic{}
	}
	t := u.by[topic]
	if t == nil || now.Sub(t.last) > 2*MaxUnhandledWait {
		t = &unhandledTopic{since: now}
		u.by[topic] = t
	}
	t.last = now
	t.count++
	if now.Sub(t.warned) >= unhandledWarnEvery {
		t.warned, count, t.count = now, t.count, 0
		return t.since, true, count
	}
	return t.since, false, 0
}

// handled forgets topic's outage: a node handles it again.
func (u *unhandledTopics) handled(topic string) {
	u.mu.Lock()
	delete(u.by, topic)
	u.mu.Unlock()
}

// unhandled sets o for a task that found no Go handler here (see
// Unhandled).
func (c *Completer) unhandled(o *store.Outcome, t *task.Task, err error, now time.Time) {
	o.NotAttempted = true
	if u := c.unhand; u != nil && u.Nodes != nil && u.Handoffs != nil {
		if node := pickNode(u.Nodes(t.Topic), u.NodeID, t.ID); node != "" {
			c.topics.handled(t.Topic)
			// Due as it was (it is due: fire released it), claimed for the
			// other node, which puts it in its tier when it takes it.
			o.RetryAt = t.DueAt
			o.Claim = &store.Lease{Owner: node, Until: now.Add(u.LeaseTTL), Token: store.NewToken()}
			o.Error = errText(fmt.Errorf("handed to node %s: %w", node, err))
			c.m.Outcomes.WithLabelValues("handed_off").Inc()
			return
		}
	}
	since, warn, count := c.topics.seen(t.Topic, now)
	d := c.unhandledWait(now, since)
	o.RetryAt = now.Add(d)
	o.Error = errText(fmt.Errorf("no live node handles topic %q (no Go handler registered for it, since %s): %w; tried again at %s",
		t.Topic, since.UTC().Format(time.RFC3339), err, o.RetryAt.UTC().Format(time.RFC3339)))
	c.m.Outcomes.WithLabelValues("unhandled").Inc()
	c.m.Topics.For(t.Topic).Unhandled.Inc()
	if warn {
		// An operator must hear of it, once a minute per topic: its
		// tasks wait for a handler nobody may be about to register.
		c.log.Warn("tasks wait: no live node handles their topic", "topic", t.Topic, "deferred", count, "since", since, "wait", d, "err", err)
	}
}

// unhandledWait is how long a task of a topic unhandled since since waits:
// four times the outage (as a breaker's deferral grows), at least the
// first retry's backoff, at most MaxUnhandledWait and the retry policy's
// Max; its end rounded up so that the topic's tasks come back together.
func (c *Completer) unhandledWait(now, since time.Time) time.Duration {
	maxd := MaxUnhandledWait
	if c.retry.Max > 0 {
		maxd = min(maxd, c.retry.Max)
	}
	d := min(max(outageGrowth*now.Sub(since), c.retry.Next(1, nil)), maxd)
	return roundUp(now, d, time.Second)
}

// pickNode picks one of nodes other than self for a task, by its ID, so
// that the tasks of a topic spread over the nodes that handle it.
func pickNode(nodes []string, self, id string) string {
	others := make([]string, 0, len(nodes))
	for _, n := range nodes {
		if n != self {
			others = append(others, n)
		}
	}
	if len(others) == 0 {
		return ""
	}
	h := fnv.New32a()
	h.Write([]byte(id))
	return others[int(h.Sum32()%uint32(len(others)))]
}

// handOff leaves the tasks of a written batch claimed for other nodes for
// them to take. A handoff not left is late, not lost: the claim ends
// after the lease and the task's item scanner claims it again.
func (c *Completer) handOff(ctx context.Context, batch []store.Outcome) {
	u := c.unhand
	if u == nil || u.Handoffs == nil {
		return
	}
	var by map[string][]store.Ref
	for _, o := range batch {
		if o.Claim == nil || o.Claim.Owner == u.NodeID || !o.NotAttempted {
			continue
		}
		if by == nil {
			by = map[string][]store.Ref{}
		}
		by[o.Claim.Owner] = append(by[o.Claim.Owner], store.Ref{ID: o.ID, Topic: o.Topic, DueAt: o.RetryAt, Token: o.Claim.Token})
	}
	for node, refs := range by {
		if err := u.Handoffs.HandOff(ctx, node, refs, time.Now()); err != nil {
			c.log.Warn("handing tasks off to a node that handles their topic failed; they wait for their claims to end", "node", node, "count", len(refs), "err", err)
		}
	}
}

// roundUp returns d, lengthened so that now+d is a multiple of q (since
// the Unix epoch), q doubled while that stays under a quarter of d: waits
// that end around the same time end at the same instant.
func roundUp(now time.Time, d, q time.Duration) time.Duration {
	if q <= 0 {
		return d
	}
	for 2*q <= d/4 {
		q *= 2
	}
	at := now.Add(d).UnixNano()
	at = (at + int64(q) - 1) / int64(q) * int64(q)
	return time.Unix(0, at).Sub(now)
}
