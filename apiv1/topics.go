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
	// Settings are the topic's effective settings: what its tasks without
	// values of their own get (Sources says from where).
	Settings *TopicSettings `json:"settings,omitempty"`
	// Sources says where each of Settings comes from.
	Sources *TopicSources `json:"sources,omitempty"`
	// Dynamic is what PUT /v1/topics/{topic} set; absent when nothing.
	Dynamic *TopicSettings `json:"dynamic,omitempty"`
	// Limits: the topic's cluster-wide rate and concurrency (docs/topics.md,
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

// Retry is a retry policy: a backoff — "exponential" (initial·2^(n−1), at
// most max) or "fixed" (initial every time) — or an explicit schedule of
// waits, the last one repeated. jitter (0..1) spreads each wait by ±that
// fraction. Durations are Go durations ("30s", "1h"). Fields left out take
// the node's (delivery.retry_base, delivery.retry_max, jitter 0.2).
type Retry struct {
	Backoff  string   `json:"backoff,omitempty"`
	Initial  string   `json:"initial,omitempty"`
	Max      string   `json:"max,omitempty"`
	Jitter   *float64 `json:"jitter,omitempty"`
	Schedule []string `json:"schedule,omitempty"`
}

// TopicSettings are a topic's settings: the body of PUT
// /v1/topics/{topic} (what it sets, replacing what an earlier PUT set; {}
// removes them), and a topic view's settings (effective values) and
// dynamic (what PUT set). A task's own value wins over its topic's, the
// topic's (PUT over the config's topics section) over the node's.
type TopicSettings struct {
	// Target is the default target of the topic's tasks submitted
	// without one.
	Target string `json:"target,omitempty"`
	// MaxAttempts is the max_attempts of the topic's tasks submitted
	// without one (1..1000).
	MaxAttempts int `json:"max_attempts,omitempty"`
	// Retry is the retry policy of the topic's tasks without their own.
	Retry *Retry `json:"retry,omitempty"`
	// Priority is the priority (0..9, higher first) of the topic's tasks
	// submitted without one.
	Priority *int `json:"priority,omitempty"`
	// Rate is the most deliveries per second of the topic, cluster wide;
	// 0: no limit.
	Rate float64 `json:"rate,omitempty"`
	// Concurrency is the most deliveries of the topic in flight, cluster
	// wide; 0: no limit.
	Concurrency int `json:"concurrency,omitempty"`
	// Timeout bounds each delivery attempt of the topic's tasks (a
	// webhook call, a Go handler's call): a Go duration, 10ms..1h.
	Timeout string `json:"timeout,omitempty"`
}

// TopicSources says where each effective setting of a topic comes from:
// "api" (PUT /v1/topics/{topic}), "config" (topics.NAME in ontime.yaml) or
// "node" (the delivery section's default, or none).
type TopicSources struct {
	Target      string `json:"target"`
	MaxAttempts string `json:"max_attempts"`
	Retry       string `json:"retry"`
	Priority    string `json:"priority"`
	Rate        string `json:"rate"`
	Concurrency string `json:"concurrency"`
	Timeout     string `json:"timeout"`
}
