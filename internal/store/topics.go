package store

import (
	"context"
	"time"

	"github.com/ontimehq/ontime/internal/task"
)

// TopicStats describes one topic: what GET /v1/topics shows.
type TopicStats struct {
	Topic  string
	Counts map[task.Status]int64 // tasks per status; statuses with none are absent
	// OldestDueAt is the earliest due time of the topic's pending tasks;
	// zero when it has none.
	OldestDueAt time.Time
	Paused      bool
}

// Topics is what a store keeps about topics as a whole: whether each is
// paused (one small table in the first database, read by every node) and
// the counts operators look at.
type Topics interface {
	// SetTopicPaused pauses (true) or resumes (false) topic, cluster wide: it
	// is stored, and every node learns it from PausedTopics.
	SetTopicPaused(ctx context.Context, topic string, paused bool) error

	// PausedTopics lists the paused topics, sorted. Nodes poll it.
	PausedTopics(ctx context.Context) ([]string, error)

	// SetClaimFilter makes Claim, Scan and NextDue pass over pending tasks
	// of these topics (the paused ones, as this node last read them), so a
	// paused topic's backlog is neither claimed nor woken for. Expired
	// leases are still claimed: the fire stage hands those back.
	SetClaimFilter(paused []string)

	// TopicStats counts the tasks of every topic that has tasks or is
	// paused, sorted by topic; with topic != "" only that one (read
	// through the topic's index), also when it has no task.
	TopicStats(ctx context.Context, topic string) ([]TopicStats, error)

	// DueHistogram counts the pending tasks due in [from, from + n·step)
	// per topic, in n buckets of step: what falls due when. It reads each
	// table's scan index (seg, status, due_at) over that range only, so
	// its cost is the pending tasks in the range, never the whole table.
	DueHistogram(ctx context.Context, from time.Time, step time.Duration, n int) ([]DueCounts, error)

	// RequeueTopic moves every dead task of topic back to pending, due at
	// dueAt with its attempts reset, and returns how many it moved.
	RequeueTopic(ctx context.Context, topic string, dueAt time.Time) (int64, error)
}

// TopicSettings keeps what PUT /v1/topics/{topic} set for each topic, as
// an opaque document (internal/topics owns its form), in one small table
// of the first database that every node polls.
type TopicSettings interface {
	// SetTopicSettings stores topic's document; an empty one removes it.
	SetTopicSettings(ctx context.Context, topic string, settings []byte) error
	// AllTopicSettings reads every stored document, by topic.
	AllTopicSettings(ctx context.Context) (map[string][]byte, error)
}

// DueCounts is one topic's row of DueHistogram: Counts[i] tasks fall due
// in bucket i.
type DueCounts struct {
	Topic  string
	Counts []int64
}

// MaxDueBuckets bounds DueHistogram's n.
const MaxDueBuckets = 500
