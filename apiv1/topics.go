package apiv1

import "time"

// Topic is one topic's view: the answer of GET /v1/topics (a list of them)
// and of POST /v1/topics/{topic}:pause and :resume. A resume removes the
// pause, so a topic without tasks is no longer listed after it.
type Topic struct {
	Topic string `json:"topic"`
	// Counts has one entry per status (pending, claimed, running, done,
	// dead, cancelled), zeros included.
	Counts map[string]int64 `json:"counts"`
	// OldestDueAt is the earliest due time of the topic's pending tasks;
	// null when it has none. Past it and not paused, the topic lags.
	OldestDueAt *time.Time `json:"oldest_due_at"`
	// Paused: the topic delivers nothing, cluster wide; its tasks wait.
	Paused bool `json:"paused"`
	// Known: the topic has tasks (of any status). A topic may be paused
	// ahead of its first task; false in the answer of a pause says that
	// no task of this name exists yet (a typo pauses nothing anyone uses).
	Known bool `json:"known"`
	// Limits: the topic's cluster-wide rate and concurrency (README
	// "Cluster-wide limits") and this node's share of them; absent when
	// the topic sets none.
	Limits *TopicLimits `json:"limits,omitempty"`
}

// TopicLimits is a topic's cluster-wide limits as one node sees them.
type TopicLimits struct {
	Rate             float64 `json:"rate"`              // calls per second, all nodes together; 0: none
	Concurrency      int     `json:"concurrency"`       // calls in flight, all nodes together; 0: none
	RateShare        float64 `json:"rate_share"`        // what this node may use now (with Redis: the whole, shared call by call)
	ConcurrencyShare int     `json:"concurrency_share"` // likewise
	Throttled        int64   `json:"throttled"`         // calls of this node that waited for a limit
}

// TopicList answers GET /v1/topics: every topic that has tasks or is
// paused, sorted by name.
type TopicList struct {
	Topics []Topic `json:"topics"`
	// CountedAt is when the counts were taken. Each node keeps them in a
	// cache recounted in the background every few seconds (counting every
	// task table per request would cost as much as the tables are big);
	// the paused flags are the node's current ones.
	CountedAt time.Time `json:"counted_at"`
}

// TopicRequeue answers POST /v1/topics/{topic}:requeue: how many dead
// tasks went back to pending, due now.
type TopicRequeue struct {
	Requeued int64 `json:"requeued"`
}
