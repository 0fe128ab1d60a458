package topics

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ontimehq/ontime/apiv1"
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
	st       AdminStore
	w        *Watcher
	counts   *Counts
	wake     Waker
	settings *Settings // nil: no settings (topic views carry none)
}

// NewAdmin builds the topic operations over st; w is this node's watcher
// (a pause made here applies here before the answer), counts its count
// cache (List answers from it), wake its scanners (requeued tasks are due
// now), settings the topics' settings (nil: none; the views carry them
// and PUT /v1/topics/{topic} changes them).
func NewAdmin(st AdminStore, w *Watcher, counts *Counts, wake Waker, settings *Settings) (*Admin, error) {
	if st == nil || w == nil || counts == nil {
		return nil, errors.New("topics: Admin needs a store, a watcher and a count cache")
	}
	return &Admin{st: st, w: w, counts: counts, wake: wake, settings: settings}, nil
}

// Settings is the topics' settings; nil when the admin has none.
func (a *Admin) Settings() *Settings { return a.settings }

// Get returns topic's view, counted now (its task tables are read).
func (a *Admin) Get(ctx context.Context, topic string) (*store.TopicStats, error) {
	if err := task.ValidateTopic(topic); err != nil {
		return nil, err
	}
	return a.one(ctx, topic)
}

// PutSettings replaces what PUT set for topic (Settings.Put) and returns
// the topic's view.
func (a *Admin) PutSettings(ctx context.Context, topic string, in apiv1.TopicSettings) (*store.TopicStats, error) {
	if a.settings == nil {
		return nil, errors.New("topics: no settings")
	}
	if _, err := a.settings.Put(ctx, topic, in); err != nil {
		return nil, err
	}
	return a.one(ctx, topic)
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
// Topics with settings but no task are listed too, with zero counts.
func (a *Admin) List(ctx context.Context) (Listing, error) {
	l, err := a.counts.List(ctx)
	if err != nil || a.settings == nil {
		return l, err
	}
	named := a.settings.Named()
	if len(named) == 0 {
		return l, nil
	}
	have := make(map[string]bool, len(l.Topics))
	for _, t := range l.Topics {
		have[t.Topic] = true
	}
	var extra []store.TopicStats
	for _, t := range named {
		if !have[t] {
			extra = append(extra, store.TopicStats{Topic: t, Counts: map[task.Status]int64{}, Paused: a.w.Paused(t)})
		}
	}
	if len(extra) > 0 {
		// A copy: the cache's listing is shared by every answer.
		l.Topics = append(slices.Clip(l.Topics), extra...)
		slices.SortFunc(l.Topics, func(x, y store.TopicStats) int { return strings.Compare(x.Topic, y.Topic) })
	}
	return l, nil
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
