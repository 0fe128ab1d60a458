package store

import "time"

// The coordinator's records (sqlstore's ontime_nodes, ontime_leader and
// ontime_assignment for dbcoord; etcdcoord keeps the same in etcd). The
// cluster package decides who owns what; the store only keeps it.

// LeaderLease is the leader lease as a coordinator stores it: the node
// holding it, its term (the fencing token: it grows each time the lease
// changes hands) and when it expires unless renewed.
type LeaderLease struct {
	Node  string
	Term  int64
	Until time.Time
}

// Grant is one item's assignment as a coordinator stores it: the owner,
// from when it may act on the item (a handover from a live node waits for
// the old owner to let go), and the leader term that wrote it.
type Grant struct {
	Node  string
	Since time.Time
	Term  int64
}

// NodeStatus is one registered node.
type NodeStatus struct {
	ID        string
	Addr      string
	Heartbeat time.Time
	// Started is when the node's process started (zero: the coordinator
	// does not know): a change means it was restarted under the same ID.
	Started time.Time
	// Incarnation is the ID of the node's current process (Incarnation;
	// 0: unknown): a change means it was restarted under the same ID.
	Incarnation int64
	// Version is the node's build version (metrics.BuildVersion; '':
	// unknown, a node of an earlier version).
	Version string
	// Zone is the node's cluster.zone ("": none).
	Zone string
	// Topics are those the node has Go handlers for.
	Topics []string
	Live   bool
	Items  int
}

// Process is what a node registers of its current process: when it
// started, its incarnation's ID, its build version and the zone it runs
// in (cluster.zone, "": none).
type Process struct {
	Started     time.Time
	Incarnation int64
	Version     string
	Zone        string
}
