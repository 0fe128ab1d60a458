package topics

// Settings: each topic's delivery settings — target, max_attempts, retry,
// priority, rate, concurrency, timeout — from two layers: the config's
// topics section (fixed for the node's life) and what PUT
// /v1/topics/{topic} stored (the dynamic layer, one JSON document per
// topic in the store's first database, polled by every node). A setting
// of the dynamic layer wins over the config's, the config's over the
// node's default (the delivery section's, or none); a task's own value
// wins over all of them, which is its users' business (submit, complete).
//
// Lookups are on the delivery path (every submit without max_attempts,
// every failed attempt, every release to a lane), so the resolved
// settings of every topic with any are computed when a layer changes and
// kept behind one atomic pointer: a lookup is a load and a map read.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/internal/startstop"
	"github.com/ontimehq/ontime/internal/task"
)

// Bounds of the settings.
const (
	MaxPriority    = 9
	MaxRate        = 1e6    // deliveries per second
	MaxConcurrency = 100000 // deliveries in flight
	MinTimeout     = 10 * time.Millisecond
	MaxTimeout     = time.Hour
	// DefaultSettingsPoll is how often a node reads the dynamic layer: a
	// PUT made on another node takes effect here within it (on the node
	// that answered the PUT, before the answer).
	DefaultSettingsPoll = time.Second
)

// The values of TopicSettings.Sources' fields.
const (
	SourceAPI    = "api"
	SourceConfig = "config"
	SourceNode   = "node"
)

// Layer is one layer of a topic's settings, validated; zero fields are
// not set by it.
type Layer struct {
	Target      string
	MaxAttempts int
	Retry       *task.Retry
	Priority    *int
	Rate        float64
	Concurrency int
	Timeout     time.Duration
}

// Empty reports whether l sets nothing.
func (l Layer) Empty() bool { return reflect.ValueOf(l).IsZero() }

// ParseLayer validates a layer as users write it. Errors are
// *task.FieldErrors named prefix + field ("retry.max" for a PUT,
// "topics.NAME.retry.max" for the config). checkTarget, when set, judges
// a target as a submitted task's is (its syntax, the brokers, the target
// policy); nil: its syntax only.
func ParseLayer(prefix string, in apiv1.TopicSettings, checkTarget func(string) error) (Layer, error) {
	var l Layer
	bad := func(field, format string, args ...any) error {
		return &task.FieldError{Field: prefix + field, Message: fmt.Sprintf(format, args...)}
	}
	if in.Target != "" {
		check := task.ValidateTarget
		if checkTarget != nil {
			check = checkTarget
		}
		if err := check(in.Target); err != nil {
			msg := err.Error()
			var fe *task.FieldError
			if errors.As(err, &fe) {
				msg = fe.Message
			}
			return l, bad("target", "%s", msg)
		}
		l.Target = in.Target
	}
	if n := in.MaxAttempts; n != 0 {
		if n < 1 || n > task.MaxAttemptsLimit {
			return l, bad("max_attempts", "is %d; want 1 to %d", n, task.MaxAttemptsLimit)
		}
		l.MaxAttempts = n
	}
	if in.Retry != nil {
		r, err := task.ParseRetry(prefix+"retry", task.RetrySpec(*in.Retry))
		if err != nil {
			return l, err
		}
		l.Retry = &r
	}
	if in.Priority != nil {
		if p := *in.Priority; p < 0 || p > MaxPriority {
			return l, bad("priority", "is %d; want 0 to %d (higher first)", p, MaxPriority)
		}
		p := *in.Priority
		l.Priority = &p
	}
	if r := in.Rate; r != 0 {
		if math.IsNaN(r) || r < 0 || r > MaxRate {
			return l, bad("rate", "is %v; want deliveries per second, more than 0 and at most %g (0 or absent: no limit)", r, float64(MaxRate))
		}
		l.Rate = r
	}
	if c := in.Concurrency; c != 0 {
		if c < 0 || c > MaxConcurrency {
			return l, bad("concurrency", "is %d; want 1 to %d deliveries in flight (0 or absent: no limit)", c, MaxConcurrency)
		}
		l.Concurrency = c
	}
	if in.Timeout != "" {
		d, err := time.ParseDuration(in.Timeout)
		if err != nil {
			return l, bad("timeout", "%q is not a duration such as 30s", in.Timeout)
		}
		if d < MinTimeout || d > MaxTimeout {
			return l, bad("timeout", "%s is out of range %s..%s", d, MinTimeout, MaxTimeout)
		}
		l.Timeout = d
	}
	return l, nil
}

// Wire is l as users write it (ParseLayer reads it back).
func (l Layer) Wire() apiv1.TopicSettings {
	out := apiv1.TopicSettings{Target: l.Target, MaxAttempts: l.MaxAttempts, Rate: l.Rate, Concurrency: l.Concurrency}
	if l.Retry != nil {
		r := apiv1.Retry(l.Retry.Spec())
		out.Retry = &r
	}
	if l.Priority != nil {
		p := *l.Priority
		out.Priority = &p
	}
	if l.Timeout > 0 {
		out.Timeout = l.Timeout.String()
	}
	return out
}

// Defaults are the node's settings, for what no layer sets.
type Defaults struct {
	MaxAttempts int           // delivery.max_attempts
	Retry       task.Retry    // delivery.retry_base, retry_max; exponential, jitter 0.2
	Timeout     time.Duration // delivery.timeout
}

// TopicSettings are one topic's resolved settings: each field the
// dynamic layer's, else the config's, else the node's. Sources says which.
type TopicSettings struct {
	Target      string        // "" none: a Go handler, or the task's own
	MaxAttempts int           // never 0
	Retry       task.Retry    // filled (task.Retry.Fill): ready for Wait
	Priority    int           // 0..9
	Rate        float64       // deliveries per second, cluster wide; 0: no limit
	Concurrency int           // in flight, cluster wide; 0: no limit
	Timeout     time.Duration // per attempt; the node's delivery.timeout when no layer sets it
	Sources     apiv1.TopicSources
}

// SettingsStore is what Settings needs of the store (store.TopicSettings).
type SettingsStore interface {
	SetTopicSettings(ctx context.Context, topic string, settings []byte) error
	AllTopicSettings(ctx context.Context) (map[string][]byte, error)
}

// SettingsConfig wires Settings. Store is required.
type SettingsConfig struct {
	Store SettingsStore
	// Config is the config's layer, by topic, validated by the config.
	Config   map[string]Layer
	Defaults Defaults
	// CheckTarget judges a PUT's target as a submitted task's is; nil:
	// its syntax only.
	CheckTarget func(target string) error
	Poll        time.Duration // default DefaultSettingsPoll
	Logger      *slog.Logger
}

// Settings resolves each topic's settings; it is a startstop service
// that polls the dynamic layer, safe for concurrent use.
type Settings struct {
	startstop.Base
	cfg      SettingsConfig
	log      *slog.Logger
	node     TopicSettings // what a topic without any layer gets
	mu       sync.Mutex    // serialises apply
	dynamic  map[string]Layer
	raw      map[string]string // the dynamic layer's documents, to skip unchanged polls
	resolved atomic.Pointer[map[string]*TopicSettings]
	warned   map[string]string // topic → document already logged as unreadable
}

// NewSettings builds the resolver with the config's layer; the dynamic
// layer is read by Refresh and the poll.
func NewSettings(cfg SettingsConfig) (*Settings, error) {
	if cfg.Store == nil {
		return nil, errors.New("topics: Settings needs a Store")
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultSettingsPoll
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Defaults.MaxAttempts <= 0 {
		cfg.Defaults.MaxAttempts = task.DefaultMaxAttempts
	}
	d := cfg.Defaults.Retry
	if d.Initial <= 0 {
		d.Initial = time.Second
	}
	if d.Max <= 0 {
		d.Max = time.Hour
	}
	if d.Backoff == "" && len(d.Schedule) == 0 {
		// The zero Retry: the node's historic policy, jitter included.
		d.Backoff = task.BackoffExponential
		if d.Jitter == 0 {
			d.Jitter = task.DefaultJitter
		}
	}
	if d.Jitter < 0 {
		d.Jitter = task.DefaultJitter
	}
	cfg.Defaults.Retry = d
	s := &Settings{cfg: cfg, log: cfg.Logger, dynamic: map[string]Layer{}, raw: map[string]string{}, warned: map[string]string{}}
	s.node = s.resolve(Layer{}, Layer{})
	s.publish()
	return s, nil
}

// Settings returns topic's resolved settings (the node's defaults for a
// topic no layer names). It is the lookup the delivery path calls.
func (s *Settings) Settings(topic string) TopicSettings { return *s.lookup(topic) }

// lookup is topic's resolved settings, shared: callers must not change
// them. One atomic load and one map read, no copy.
func (s *Settings) lookup(topic string) *TopicSettings {
	if ts := (*s.resolved.Load())[topic]; ts != nil {
		return ts
	}
	return &s.node
}

// MaxAttempts is topic's max_attempts (the submit path's lookup).
func (s *Settings) MaxAttempts(topic string) int { return s.lookup(topic).MaxAttempts }

// Target is topic's default target, "" none (the submit path's lookup).
func (s *Settings) Target(topic string) string { return s.lookup(topic).Target }

// Priority is topic's priority (0..9; 0 when no layer sets it): the
// default of its tasks submitted without one.
func (s *Settings) Priority(topic string) int { return s.lookup(topic).Priority }

// Limits are topic's cluster-wide limits: deliveries per second and in
// flight; 0: none.
func (s *Settings) Limits(topic string) (rate float64, concurrency int) {
	ts := s.lookup(topic)
	return ts.Rate, ts.Concurrency
}

// Timeout is topic's timeout per attempt when a layer sets it, else 0
// (the sink's own: the destination's or the node's).
func (s *Settings) Timeout(topic string) time.Duration {
	if ts := s.lookup(topic); ts.Sources.Timeout != SourceNode {
		return ts.Timeout
	}
	return 0
}

// Named lists the topics any layer gives settings, sorted.
func (s *Settings) Named() []string {
	return slices.Sorted(maps.Keys(*s.resolved.Load()))
}

// Dynamic returns what PUT set for topic, when it set anything.
func (s *Settings) Dynamic(topic string) (Layer, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.dynamic[topic]
	return l, ok
}

// Defaults are the node's settings, resolved (what Settings gives a
// topic without any layer).
func (s *Settings) Defaults() TopicSettings { return s.node }

// Put replaces topic's dynamic layer with in (validated; errors name the
// field) and stores it for every node; an empty in removes it. It applies
// here before it returns; other nodes within their poll.
func (s *Settings) Put(ctx context.Context, topic string, in apiv1.TopicSettings) (Layer, error) {
	if err := task.ValidateTopic(topic); err != nil {
		return Layer{}, err
	}
	l, err := ParseLayer("", in, s.cfg.CheckTarget)
	if err != nil {
		return Layer{}, err
	}
	var doc []byte
	if !l.Empty() {
		if doc, err = json.Marshal(l.Wire()); err != nil {
			return Layer{}, fmt.Errorf("topic settings: %w", err)
		}
	}
	if err := s.cfg.Store.SetTopicSettings(ctx, topic, doc); err != nil {
		return Layer{}, err
	}
	s.mu.Lock()
	if l.Empty() {
		delete(s.dynamic, topic)
		delete(s.raw, topic)
	} else {
		s.dynamic[topic], s.raw[topic] = l, string(doc)
	}
	s.publishLocked()
	s.mu.Unlock()
	return l, nil
}

// Refresh reads the dynamic layer now and applies it.
func (s *Settings) Refresh(ctx context.Context) error {
	docs, err := s.cfg.Store.AllTopicSettings(ctx)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(docs) == len(s.raw) {
		same := true
		for t, d := range docs {
			if s.raw[t] != string(d) {
				same = false
				break
			}
		}
		if same {
			return nil // the common case of every poll
		}
	}
	dyn := make(map[string]Layer, len(docs))
	raw := make(map[string]string, len(docs))
	for t, d := range docs {
		raw[t] = string(d)
		var in apiv1.TopicSettings
		err := json.Unmarshal(d, &in)
		var l Layer
		if err == nil {
			l, err = ParseLayer("", in, s.cfg.CheckTarget)
		}
		if err != nil {
			// Stored by a node with other rules (another version, another
			// target policy): this node keeps to the config's layer for
			// the topic, and says so once per document.
			if s.warned[t] != string(d) {
				s.log.Warn("topic settings stored for the topic are not valid on this node; using its config's", "topic", t, "err", err)
				s.warned[t] = string(d)
			}
			continue
		}
		dyn[t] = l
	}
	s.dynamic, s.raw = dyn, raw
	s.publishLocked()
	return nil
}

func (s *Settings) publish() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.publishLocked()
}

// publishLocked resolves every topic a layer names; s.mu is held.
func (s *Settings) publishLocked() {
	out := make(map[string]*TopicSettings, len(s.cfg.Config)+len(s.dynamic))
	for t, c := range s.cfg.Config {
		ts := s.resolve(s.dynamic[t], c)
		out[t] = &ts
	}
	for t, d := range s.dynamic {
		if _, ok := out[t]; !ok {
			ts := s.resolve(d, Layer{})
			out[t] = &ts
		}
	}
	s.resolved.Store(&out)
}

// resolve merges the dynamic layer dyn over the config's conf over the
// node's defaults.
func (s *Settings) resolve(dyn, conf Layer) TopicSettings {
	def := s.cfg.Defaults
	ts := TopicSettings{MaxAttempts: def.MaxAttempts, Retry: def.Retry, Timeout: def.Timeout}
	src := apiv1.TopicSources{Target: SourceNode, MaxAttempts: SourceNode, Retry: SourceNode, Priority: SourceNode,
		Rate: SourceNode, Concurrency: SourceNode, Timeout: SourceNode}
	for _, l := range []struct {
		layer Layer
		name  string
	}{{conf, SourceConfig}, {dyn, SourceAPI}} {
		if l.layer.Target != "" {
			ts.Target, src.Target = l.layer.Target, l.name
		}
		if l.layer.MaxAttempts > 0 {
			ts.MaxAttempts, src.MaxAttempts = l.layer.MaxAttempts, l.name
		}
		if l.layer.Retry != nil {
			ts.Retry, src.Retry = l.layer.Retry.Fill(def.Retry), l.name
		}
		if l.layer.Priority != nil {
			ts.Priority, src.Priority = *l.layer.Priority, l.name
		}
		if l.layer.Rate > 0 {
			ts.Rate, src.Rate = l.layer.Rate, l.name
		}
		if l.layer.Concurrency > 0 {
			ts.Concurrency, src.Concurrency = l.layer.Concurrency, l.name
		}
		if l.layer.Timeout > 0 {
			ts.Timeout, src.Timeout = l.layer.Timeout, l.name
		}
	}
	ts.Sources = src
	return ts
}

// Start polls the dynamic layer until Stop.
func (s *Settings) Start(ctx context.Context) error {
	ctx, ok, started, stopped := s.StartInit(ctx)
	if !ok {
		return nil
	}
	go func() {
		defer stopped()
		started()
		failing := false
		startstop.Every(ctx, s.cfg.Poll, func(ctx context.Context) {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := s.Refresh(rctx)
			cancel()
			switch {
			case err != nil && ctx.Err() == nil && !failing:
				s.log.Warn("reading topic settings failed; keeping the last known ones", "err", err)
				failing = true
			case err == nil && failing:
				s.log.Info("reading topic settings works again")
				failing = false
			}
		})
	}()
	return nil
}

// Wire is ts as a topic view shows it: its effective settings.
func (ts TopicSettings) Wire() apiv1.TopicSettings {
	r := apiv1.Retry(ts.Retry.Spec())
	p := ts.Priority
	return apiv1.TopicSettings{Target: ts.Target, MaxAttempts: ts.MaxAttempts, Retry: &r, Priority: &p,
		Rate: ts.Rate, Concurrency: ts.Concurrency, Timeout: ts.Timeout.String()}
}

// RetryOf is the retry policy of a failed attempt of t: its own (stored
// with it), else its topic's, else the node's; filled, ready for Wait. A
// stored policy this node cannot read (written by a later version) gives
// way to the topic's.
func (s *Settings) RetryOf(t *task.Task) task.Retry {
	if t.Retry != "" {
		if r, ok, err := task.DecodeRetry(t.Retry); ok && err == nil {
			return r.Fill(s.cfg.Defaults.Retry)
		}
	}
	return s.lookup(t.Topic).Retry
}

// RetrySource says whose retry policy t's failures follow: "task", or
// its topic's source (SourceAPI, SourceConfig, SourceNode).
func (s *Settings) RetrySource(t *task.Task) string {
	if t.Retry != "" {
		if _, ok, err := task.DecodeRetry(t.Retry); ok && err == nil {
			return "task"
		}
	}
	return s.Settings(t.Topic).Sources.Retry
}
