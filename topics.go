package ontime

import (
	"context"
	"time"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
	"github.com/ontimehq/ontime/internal/topics"
)

// TopicInfo is one topic as GET /v1/topics shows it.
type TopicInfo struct {
	Topic string
	// Counts has the number of tasks per status name (pending, claimed,
	// running, done, dead, cancelled), zeros included.
	Counts map[string]int64
	// OldestDueAt is the earliest due time of the topic's pending tasks;
	// zero when there are none.
	OldestDueAt time.Time
	// Paused: the topic delivers nothing, cluster wide; its tasks wait.
	Paused bool
	// Known: the topic has tasks (of any status). False after PauseTopic:
	// no task of this name exists yet, and the pause waits for the first
	// (check the name).
	Known bool
	// CountedAt is when Counts were taken: the node recounts in the
	// background every few seconds (zero in the answers of a pause or a
	// resume, which count the topic then).
	CountedAt time.Time
	// Settings are the topic's effective settings (what its tasks without
	// values of their own get); Sources says where each comes from: "api"
	// (PutTopicSettings), "config" (topics.NAME), "node".
	Settings TopicSettings
	Sources  apiv1.TopicSources
}

func (n *Node) topicInfo(ts store.TopicStats) TopicInfo {
	out := TopicInfo{Topic: ts.Topic, Counts: make(map[string]int64, 6), OldestDueAt: ts.OldestDueAt, Paused: ts.Paused, Known: topics.Known(ts)}
	eff := n.settings.Settings(ts.Topic)
	out.Settings, out.Sources = eff.Wire(), eff.Sources
	for st := task.StatusPending; st <= task.StatusCancelled; st++ {
		out.Counts[st.String()] = ts.Counts[st]
	}
	return out
}

// Topics lists every topic that has tasks or is paused, by name. The
// counts come from the node's count cache, a few seconds old (CountedAt).
func (n *Node) Topics(ctx context.Context) ([]TopicInfo, error) {
	l, err := n.admin.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]TopicInfo, len(l.Topics))
	for i, t := range l.Topics {
		out[i] = n.topicInfo(t)
		out[i].CountedAt = l.CountedAt
	}
	return out, nil
}

// PauseTopic pauses topic on every node of the cluster: from the answer
// on this node, and within a quarter second on the others, its tasks are
// neither claimed nor started (those already running finish); they wait,
// and their due times pass. It returns the topic's view.
func (n *Node) PauseTopic(ctx context.Context, topic string) (*TopicInfo, error) {
	ts, err := n.admin.Pause(ctx, topic)
	if err != nil {
		return nil, err
	}
	v := n.topicInfo(*ts)
	return &v, nil
}

// ResumeTopic resumes a paused topic: the tasks whose due time passed
// meanwhile are delivered at once, the others at their due time. The pause
// is removed, so a topic without tasks is no longer listed.
func (n *Node) ResumeTopic(ctx context.Context, topic string) (*TopicInfo, error) {
	ts, err := n.admin.Resume(ctx, topic)
	if err != nil {
		return nil, err
	}
	v := n.topicInfo(*ts)
	return &v, nil
}

// RequeueTopic moves every dead task of topic back to pending, due now,
// attempts reset, and returns how many it moved.
func (n *Node) RequeueTopic(ctx context.Context, topic string) (int64, error) {
	return n.admin.Requeue(ctx, topic)
}

// PutTopicSettings replaces what an earlier PutTopicSettings (or PUT
// /v1/topics/{topic}) set for topic with s, for every node of the cluster:
// this node applies it before it returns, the others within a second. An
// empty s removes it. Bad values are a *FieldError naming the field
// ("retry.max"). It returns the topic's view.
func (n *Node) PutTopicSettings(ctx context.Context, topic string, s TopicSettings) (*TopicInfo, error) {
	ts, err := n.admin.PutSettings(ctx, topic, s)
	if err != nil {
		return nil, err
	}
	v := n.topicInfo(*ts)
	return &v, nil
}
