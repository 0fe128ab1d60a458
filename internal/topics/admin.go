package topics

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// AdminStore is what the topic operations need of the store.
type AdminStore interface {
	SetTopicPaused(ctx context.Context, topic string, paused bool) error
	TopicStats(ctx context.Context, topic string) ([]store.TopicStats, error)
	RequeueTopic(ctx context.Context, topic string, dueAt time.Time) (int64, error)
}

// Admin serves the operations on topics (GET /v1/topics, :pause, :resume,
// :requeue and their Go equivalents on Node).
type Admin struct {
	st     AdminStore
	w      *Watcher
	counts *Counts
	wake   Waker
}

// NewAdmin builds the topic operations over st; w is this node's watcher
// (a pause made here applies here before the answer), counts its count
// cache (List answers from it), wake its scanners (requeued tasks are due
// now).
func NewAdmin(st AdminStore, w *Watcher, counts *Counts, wake Waker) (*Admin, error) {
	if st == nil || w == nil || counts == nil {
		return nil, errors.New("topics: Admin needs a store, a watcher and a count cache")
	}
	return &Admin{st: st, w: w, counts: counts, wake: wake}, nil
}

// Known reports whether ts's topic has tasks, of any status. A pause of a
// topic without any is legitimate (ahead of its first task) but may be a
// typo; the answers say which it is rather than succeed in silence.
func Known(ts store.TopicStats) bool {
	for _, n := range ts.Counts {
		if n > 0 {
			return true
		}
	}
	return false
}

// List returns every topic that has tasks or is paused, from the count
// cache: the counts are a few seconds old (Listing.CountedAt says how
// many), the paused flags this node's current ones.
func (a *Admin) List(ctx context.Context) (Listing, error) {
	return a.counts.List(ctx)
}

// Pause pauses topic cluster wide and returns its view. Other nodes stop
// claiming and starting its tasks within their poll (DefaultPoll); what
// they started before runs to its end.
func (a *Admin) Pause(ctx context.Context, topic string) (*store.TopicStats, error) {
	return a.set(ctx, topic, true)
}

// Resume resumes topic and returns its view; its overdue tasks are
// delivered at once. The pause is removed from the store, so a topic
// without tasks (a typo paused) is no longer listed.
func (a *Admin) Resume(ctx context.Context, topic string) (*store.TopicStats, error) {
	return a.set(ctx, topic, false)
}

func (a *Admin) set(ctx context.Context, topic string, paused bool) (*store.TopicStats, error) {
	if err := task.ValidateTopic(topic); err != nil {
		return nil, err
	}
	if err := a.st.SetTopicPaused(ctx, topic, paused); err != nil {
		return nil, err
	}
	a.w.Set(topic, paused)
	return a.one(ctx, topic)
}

func (a *Admin) one(ctx context.Context, topic string) (*store.TopicStats, error) {
	ts, err := a.st.TopicStats(ctx, topic)
	if err != nil {
		return nil, err
	}
	if len(ts) != 1 {
		return nil, fmt.Errorf("topic stats of %s: %d answers", topic, len(ts))
	}
	return &ts[0], nil
}

// Requeue moves every dead task of topic back to pending, due now, and
// returns how many.
func (a *Admin) Requeue(ctx context.Context, topic string) (int64, error) {
	if err := task.ValidateTopic(topic); err != nil {
		return 0, err
	}
	now := time.Now()
	n, err := a.st.RequeueTopic(ctx, topic, now)
	if n > 0 && a.wake != nil {
		a.wake.NotifyAll(now)
	}
	return n, err
}
