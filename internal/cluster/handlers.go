package cluster

import (
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"time"
)

// Handlers is which live nodes have a Go handler for which topic, as the
// coordinator last read the membership: every node publishes the topics
// it handles with its registration (dbcoord's heartbeat, etcdcoord's
// membership key) and reads everyone's with each round, so the submit
// path asks a cached set, never the cluster, whether a task without a
// target can be delivered, and the completer whom to hand such a task to.
type Handlers struct {
	mu     sync.RWMutex
	by     map[string][]string // topic → live node IDs, sorted
	loaded chan struct{}       // closed by the first Set
	once   sync.Once
}

// NewHandlers returns an empty set, not loaded.
func NewHandlers() *Handlers { return &Handlers{loaded: make(chan struct{})} }

// Set replaces the set with the topics of live nodes (node ID → topics).
func (h *Handlers) Set(live map[string][]string) {
	by := map[string][]string{}
	for node, topics := range live {
		for _, t := range topics {
			by[t] = append(by[t], node)
		}
	}
	for _, nodes := range by {
		slices.Sort(nodes)
	}
	h.mu.Lock()
	h.by = by
	h.mu.Unlock()
	h.once.Do(func() { close(h.loaded) })
}

// Nodes returns the live nodes that handle topic (nil: none, or not loaded
// yet). The caller must not change the slice.
func (h *Handlers) Nodes(topic string) []string {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.by[topic]
}

// Loaded is closed once the set was read at least once.
func (h *Handlers) Loaded() <-chan struct{} { return h.loaded }

// Member is a node's membership value in etcd: its API address, the
// topics it handles, its process (when it started, its incarnation:
// see store.Incarnation; its build version; zero from nodes of earlier
// versions) and its zone.
type Member struct {
	Addr        string    `json:"addr"`
	Topics      []string  `json:"topics,omitempty"`
	Started     time.Time `json:"started,omitzero"`
	Incarnation int64     `json:"incarnation,omitempty"`
	Version     string    `json:"version,omitempty"`
	Zone        string    `json:"zone,omitempty"` // cluster.zone
}

// EncodeMember is m as etcdcoord keeps it under the node's key.
func EncodeMember(m Member) string {
	b, _ := json.Marshal(m) // strings only: cannot fail
	return string(b)
}

// DecodeMember reads EncodeMember back. A value that is not a JSON object
// is the bare address a node of an earlier version wrote.
func DecodeMember(v string) Member {
	var m Member
	if strings.HasPrefix(v, "{") && json.Unmarshal([]byte(v), &m) == nil {
		return m
	}
	return Member{Addr: v}
}
