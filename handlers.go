package ontime

import (
	"time"
)

// Who can deliver a task without a target: the Go handlers registered
// with Handle are per node, so each node publishes the topics it handles
// with its cluster membership (dbcoord's heartbeat, etcdcoord's key) and
// reads everyone's with each round; the submit path asks that cached set,
// never the cluster, and refuses a task no live node could deliver
// (ErrNoHandler) unless its topic has a default target in the config. A
// node that fires a task whose handler it has not hands it to a live node
// that has (internal/handoff); one whose handler is gone everywhere waits,
// unattempted and visible, until one is back (complete.Unhandled).

// handled reports whether a live node has a Go handler for topic: this
// one, or in a cluster one of those the membership last showed. Until the
// coordinator's first read, and at most a lease TTL after Start, a node
// waits for it before it refuses a topic it does not handle itself.
func (n *Node) handled(topic string) bool {
	if n.router.Handles(topic) {
		return true
	}
	if n.cluster == nil {
		return false
	}
	h := n.cluster.coord.Handlers()
	select {
	case <-h.Loaded():
	default:
		if wait := time.Until(n.joinedAt.Add(time.Duration(n.cfg.Cluster.LeaseTTL))); wait > 0 {
			t := time.NewTimer(wait)
			defer t.Stop()
			select {
			case <-h.Loaded():
			case <-t.C:
			}
		}
	}
	return len(h.Nodes(topic)) > 0
}

// handlerNodes lists the live nodes with a Go handler for topic, as the
// membership last showed (none without a cluster).
func (n *Node) handlerNodes(topic string) []string {
	if n.cluster == nil {
		return nil
	}
	return n.cluster.coord.Handlers().Nodes(topic)
}
