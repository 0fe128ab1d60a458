package api

import (
	"context"
	"net/http"
	"strings"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
	"github.com/ontimehq/ontime/internal/topics"
)

// Topics is what the topic routes need from the engine (topics.Admin).
type Topics interface {
	List(ctx context.Context) (topics.Listing, error)
	Get(ctx context.Context, topic string) (*store.TopicStats, error)
	Pause(ctx context.Context, topic string) (*store.TopicStats, error)
	Resume(ctx context.Context, topic string) (*store.TopicStats, error)
	Requeue(ctx context.Context, topic string) (int64, error)
	// Settings is the topics' settings (nil: none, the views carry none
	// and PUT answers 404).
	Settings() *topics.Settings
	PutSettings(ctx context.Context, topic string, in apiv1.TopicSettings) (*store.TopicStats, error)
}

// TopicView converts a topic's stats to its JSON view: a count for every
// status, zeros included, so clients need not know which are absent.
func TopicView(ts store.TopicStats) apiv1.Topic {
	v := apiv1.Topic{Topic: ts.Topic, Counts: make(map[string]int64, 6), Paused: ts.Paused, Known: topics.Known(ts)}
	for st := task.StatusPending; st <= task.StatusCancelled; st++ {
		v.Counts[st.String()] = ts.Counts[st]
	}
	if !ts.OldestDueAt.IsZero() {
		d := ts.OldestDueAt.UTC()
		v.OldestDueAt = &d
	}
	return v
}

// topicsHandler serves GET /v1/topics and POST /v1/topics/{topic}:pause,
// :resume, :requeue.
type topicsHandler struct {
	*handler
	svc Topics
}

// view is ts's view with the topic's settings.
func (h *topicsHandler) view(ts store.TopicStats) apiv1.Topic {
	v := TopicView(ts)
	if s := h.svc.Settings(); s != nil {
		eff := s.Settings(ts.Topic)
		w, src := eff.Wire(), eff.Sources
		v.Settings, v.Sources = &w, &src
		if d, ok := s.Dynamic(ts.Topic); ok {
			dw := d.Wire()
			v.Dynamic = &dw
		}
	}
	return v
}

// get answers GET /v1/topics/{topic}: the topic's view, counted now.
func (h *topicsHandler) get(w http.ResponseWriter, r *http.Request) {
	topic := r.PathValue("topic")
	if err := task.ValidateTopic(topic); err != nil {
		h.fail(w, r, err)
		return
	}
	ts, err := h.svc.Get(r.Context(), topic)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, h.view(*ts))
}

// put answers PUT /v1/topics/{topic}: the body replaces what an earlier
// PUT set ({} removes it), for every node; the answer is the topic's view.
func (h *topicsHandler) put(w http.ResponseWriter, r *http.Request) {
	topic := r.PathValue("topic")
	if err := task.ValidateTopic(topic); err != nil {
		h.fail(w, r, err)
		return
	}
	if h.svc.Settings() == nil {
		h.fail(w, r, notFound("this node keeps no topic settings"))
		return
	}
	var in apiv1.TopicSettings
	if err := h.decodeJSON(w, r, 64<<10, &in); err != nil {
		h.fail(w, r, err)
		return
	}
	ts, err := h.svc.PutSettings(r.Context(), topic, in)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, h.view(*ts))
}

func (h *topicsHandler) list(w http.ResponseWriter, r *http.Request) {
	if r.URL.RawQuery != "" {
		q, err := parseQuery(r.URL.RawQuery)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		for k := range q {
			h.fail(w, r, badRequest(k, "unknown query parameter (GET /v1/topics takes none)"))
			return
		}
	}
	l, err := h.svc.List(r.Context())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := apiv1.TopicList{Topics: make([]apiv1.Topic, len(l.Topics)), CountedAt: l.CountedAt.UTC()}
	for i, t := range l.Topics {
		out.Topics[i] = h.view(t)
		if h.opts.TopicLimits != nil {
			out.Topics[i].Limits = h.opts.TopicLimits(t.Topic)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *topicsHandler) op(w http.ResponseWriter, r *http.Request) {
	topic, op, ok := strings.Cut(r.PathValue("topicop"), ":")
	if !ok || (op != "pause" && op != "resume" && op != "requeue") {
		h.fail(w, r, notFound("no such endpoint; POST /v1/topics/{topic}:pause, :resume or :requeue"))
		return
	}
	if err := task.ValidateTopic(topic); err != nil {
		h.fail(w, r, err)
		return
	}
	if op == "requeue" {
		n, err := h.svc.Requeue(r.Context(), topic)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, apiv1.TopicRequeue{Requeued: n})
		return
	}
	change := h.svc.Pause
	if op == "resume" {
		change = h.svc.Resume
	}
	ts, err := change(r.Context(), topic)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, h.view(*ts))
}
