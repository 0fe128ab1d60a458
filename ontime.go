// Package ontime is a distributed delayed-task scheduler you can embed.
//
// A Node stores tasks in sharded task tables (SQLite by default, MySQL or
// PostgreSQL), preheats the ones due soon into a hot tier (in-process or
// Redis) and delivers each on time, at least once, to a webhook, to a
// message broker named in Config.Brokers (target mq://NAME/ADDRESS) or to a
// Go handler registered with Handle. `ontime serve` is a thin wrapper around a
// Node and its HTTP API.
//
//	node, err := ontime.NewNode(ctx, ontime.DefaultConfig())
//	node.Handle("order.cancel", func(ctx context.Context, d *ontime.Delivery) error { … })
//	node.Start(ctx)
//	node.Submit(ctx, ontime.TaskSpec{Topic: "order.cancel", Key: "order-42", Delay: 30 * time.Minute})
package ontime

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/internal/api"
	"github.com/ontimehq/ontime/internal/complete"
	"github.com/ontimehq/ontime/internal/console"
	"github.com/ontimehq/ontime/internal/deliver"
	"github.com/ontimehq/ontime/internal/deliver/webhook"
	"github.com/ontimehq/ontime/internal/fire"
	"github.com/ontimehq/ontime/internal/handoff"
	"github.com/ontimehq/ontime/internal/hot"
	"github.com/ontimehq/ontime/internal/hot/memory"
	hotredis "github.com/ontimehq/ontime/internal/hot/redis"
	"github.com/ontimehq/ontime/internal/limit"
	"github.com/ontimehq/ontime/internal/metrics"
	"github.com/ontimehq/ontime/internal/operation"
	"github.com/ontimehq/ontime/internal/outboxrelay"
	"github.com/ontimehq/ontime/internal/retain"
	"github.com/ontimehq/ontime/internal/router"
	"github.com/ontimehq/ontime/internal/scan"
	"github.com/ontimehq/ontime/internal/scanjob"
	"github.com/ontimehq/ontime/internal/schedule"
	"github.com/ontimehq/ontime/internal/startstop"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/store/sqlstore"
	"github.com/ontimehq/ontime/internal/submit"
	"github.com/ontimehq/ontime/internal/task"
	"github.com/ontimehq/ontime/internal/topics"
	"github.com/ontimehq/ontime/internal/tracing"
)

// Errors a Node returns; match with errors.Is.
var (
	ErrNotFound = store.ErrNotFound  // no task with this ID
	ErrConflict = store.ErrConflict  // the task's state forbids the change
	ErrInvalid  = task.ErrInvalid    // bad input; errors.As to *FieldError names the field
	ErrNotReady = submit.ErrNotReady // the node is not started, or stopping
	// ErrNoHandler refuses a task without a target whose topic no live
	// node has a Go handler for and the config gives no default target
	// (topics.NAME.target): nobody could deliver it. It is an ErrInvalid
	// too, a *FieldError on "target".
	ErrNoHandler = task.ErrNoHandler
)

// FieldError is bad input in one named field.
type FieldError = task.FieldError

// Delivery is what a handler receives: one attempt to deliver one task.
type Delivery struct {
	ID      string
	Topic   string
	Key     string
	Payload json.RawMessage
	DueAt   time.Time
	Attempt int // 1 for the first delivery

	result   *deliver.ResultBox
	maxBytes int
}

// ErrResultTooLarge: a result longer than delivery.max_result_bytes.
var ErrResultTooLarge = errors.New("result over delivery.max_result_bytes")

// SetResult keeps v, marshalled to JSON (a json.RawMessage or []byte is
// taken as it is and must be valid JSON), as the task's result once the
// handler returns nil: GET /v1/tasks/{id} shows it as result, until the
// task's retention.done. A later call replaces an earlier one; a handler
// that returns an error keeps none. It fails, keeping nothing, when the
// JSON is longer than delivery.max_result_bytes (ErrResultTooLarge) or
// invalid; with max_result_bytes 0 it keeps nothing and returns nil.
func (d *Delivery) SetResult(v any) error {
	var b []byte
	switch x := v.(type) {
	case json.RawMessage:
		b = x
	case []byte:
		b = x
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			return fmt.Errorf("ontime: result: %w", err)
		}
	}
	var out bytes.Buffer
	if !utf8.Valid(b) || json.Compact(&out, b) != nil || out.Len() == 0 {
		return errors.New("ontime: result: not a valid JSON value")
	}
	b = out.Bytes()
	if d.result == nil || d.maxBytes <= 0 {
		return nil
	}
	if len(b) > d.maxBytes {
		return fmt.Errorf("ontime: result of %d bytes: %w (%d)", len(b), ErrResultTooLarge, d.maxBytes)
	}
	d.result.Data = b
	return nil
}

// Handler processes a delivery. A nil error completes the task; an error
// schedules a retry with backoff until max_attempts, then the task is dead.
// Wrap an error with Permanent to make the task dead at once; return
// Snooze(d) to have it delivered again in d without using an attempt, or
// Cancel(err) to stop it for good (status cancelled). A handler that has
// something to answer calls d.SetResult before returning nil: the task
// keeps it as its result (GET /v1/tasks/{id} shows it).
type Handler func(ctx context.Context, d *Delivery) error

// Permanent marks a handler error as not worth retrying: the task is dead
// (and can be requeued).
func Permanent(err error) error { return deliver.Permanent(err) }

// Snooze, returned by a handler, delivers the task again d from now
// without counting the attempt: "not yet" (a resource still busy, a rate
// limit), unlike an error, which backs off and counts towards
// max_attempts. last_error says "snoozed for d".
func Snooze(d time.Duration) error { return deliver.Snooze(d) }

// Cancel, returned by a handler, stops the task for good: no retry, status
// cancelled (final, like DELETE /v1/tasks/{id}; unlike dead, which means
// "failed" and is what requeue is for), err kept as its last error. Use
// it when the work no longer makes sense (the order was paid meanwhile).
func Cancel(err error) error { return deliver.Cancel(err) }

// VerifySignature checks a webhook's Ontime-Signature header (its v2
// signatures) against the raw body and the target URL the task was
// submitted with, accepting any of secrets (during a rotation, the new and
// the old), and rejects timestamps further than tolerance from now:
// receivers use it. docs/security.md has the recipe for other languages.
func VerifySignature(header, target string, body []byte, now time.Time, tolerance time.Duration, secrets ...string) error {
	return webhook.Verify(header, target, body, now, tolerance, secrets...)
}

// TaskSpec is a task to submit. Give at most one of DueAt and Delay;
// neither means now.
type TaskSpec struct {
	Topic       string
	Key         string // unique within the topic; the shard key
	DueAt       time.Time
	Delay       time.Duration
	Payload     json.RawMessage // any JSON value; nil means null
	Target      string          // webhook URL, mq://BROKER/ADDRESS, or "" for the topic's default target, else its Go handler
	MaxAttempts int             // 0: the topic's max_attempts, else the configured default
	// Retry is the task's own retry policy; nil: its topic's, else the
	// node's (see Retry).
	Retry *Retry
	// Priority, 0 (lowest) to 9, orders the task among those due at once
	// (docs/topics.md, "Priorities"); nil: the topic's default, else 0.
	Priority *int
	// Replace (if_exists: replace): when the key names a live task, update
	// it with this spec's fields (like Update) instead of returning it.
	Replace bool
}

// Task is a stored task.
type Task struct {
	ID          string
	Topic       string
	Key         string
	DueAt       time.Time // of the next attempt
	FirstDueAt  time.Time // the due time it was submitted with; retries move DueAt only
	MovedBy     string    // what last set DueAt since the submit: "retry", "update", "requeue"; "" when nothing did
	Payload     json.RawMessage
	Target      string
	MaxAttempts int
	Priority    int
	Status      string // pending, claimed, running, done, dead, cancelled
	Attempts    int
	CreatedAt   time.Time
	UpdatedAt   time.Time // of a final task: when it ended
	LastError   string
	// Result: what the delivery that made the task done answered (a
	// webhook's 2xx JSON body, a handler's Delivery.SetResult); nil when none.
	Result json.RawMessage
	Retry  *Retry // the task's own retry policy; nil: none
	// NextAttemptReason says why a pending or claimed task that was
	// attempted or moved is due at DueAt ("retry: attempt 3 of 5 after:
	// webhook answered HTTP 503, Retry-After 30s"); "" otherwise.
	NextAttemptReason string
}

// Retry is a retry policy: a backoff (Backoff "exponential" or "fixed",
// Initial, Max) or an explicit Schedule of waits, the last repeated, with
// Jitter (0..1); durations as Go durations ("30s"). What it leaves out is
// the node's (delivery.retry_base, delivery.retry_max, jitter 0.2). The
// same in the config (topics.NAME.retry) and the API.
type Retry = apiv1.Retry

// TopicSettings are a topic's settings (PUT /v1/topics/{topic}).
type TopicSettings = apiv1.TopicSettings

func viewOf(t *task.Task) *Task {
	v := &Task{ID: t.ID, Topic: t.Topic, Key: t.Key, DueAt: t.DueAt, FirstDueAt: t.FirstDueAt, MovedBy: t.MovedBy.String(), Payload: t.Payload, Target: t.Target,
		MaxAttempts: t.MaxAttempts, Priority: t.Priority, Status: t.Status.String(), Attempts: t.Attempts, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt, LastError: t.LastError,
		NextAttemptReason: t.NextAttemptReason(), Result: json.RawMessage(t.Result)}
	if r, ok, err := task.DecodeRetry(t.Retry); ok && err == nil {
		w := Retry(r.Spec())
		v.Retry = &w
	}
	return v
}

// Node is one ontime node and the composition root of its pipeline:
//
//	submit ─► store ─► scan ─► hot tier ─► fire ─► deliver ─► complete
//
// NewNode builds every stage with its dependencies; Start starts them
// receivers first (complete, deliver, the Redis tier's listener, fire,
// scan, then the coordinator that assigns what to scan) and Stop stops
// them in reverse, senders before receivers, so nothing is handed to a
// stage that has stopped. The node built the store and the hot tier, so it
// closes them, last.
type Node struct {
	// mark is the node's store mark, which hears of an expansion's
	// cutover (store_mark.go, TopologyChanged).
	mark *storeMark
	// expander runs POST /v1/store:expand (store_expand.go); nil
	// without WithExpander.
	expander *Expander
	// handlers are the Handle calls made, for SwitchTopology.
	handlers []handlerReg
	cfg      Config
	log      *slog.Logger
	store    *sqlstore.Store
	tier     hot.Tier
	reg      *prometheus.Registry
	submit   *submit.Service
	scan     *scan.Scanner
	topics   *topics.Watcher
	admin    *topics.Admin
	// settings resolves each topic's settings (config_topics.go): the
	// lookup the delivery path and the topic routes use.
	settings *topics.Settings
	counts   *topics.Counts
	router   *deliver.Router
	sched    *schedule.Service
	ops      *operation.Service // bulk operations
	cluster  *clusterRun        // nil without a coordinator
	sec      *secrets           // the config's secrets, read (config_security.go)
	jobs     *scanjob.Service
	relays   []*outboxrelay.Relay // the config's outboxes
	// samples feeds the console's charts; lanes its open breakers.
	samples *console.Sampler
	lanes   metrics.Lanes
	// audit writes the API's audit lines (audit.go); auditFile is
	// audit.file, open until closeResources, reopened on SIGHUP.
	audit     *api.Auditor
	auditFile *auditFile
	// tracing is the tracer provider (tracing.go); tracer its tracer, nil
	// when tracing is off.
	tracing *tracing.Provider
	tracer  trace.Tracer
	// services in start order; stopped in reverse.
	services []startstop.Service
	// topicDefaults gives topics' priorities and limits (nil: none);
	// limits holds the cluster-wide limits (limits.go).
	topicDefaults TopicDefaults
	limits        *limits
	// inc is this process's incarnation: published by the coordinator,
	// carried by every claim token this process makes (store.Incarnation).
	inc *store.Incarnation

	// deliveryLease is a started task's running lease beyond its wait for
	// the due time: a handler timeout must be shorter.
	deliveryLease time.Duration
	// firing: started and not stopping; retries go straight to the hot
	// tier only meanwhile.
	firing atomic.Bool
	// created is when NewNode built the node: the start the cluster view
	// shows for a node without a coordinator (the coordinators register
	// their own). version is the build's (metrics.BuildVersion).
	created time.Time
	version string
	// joinedAt is when Start started the coordinator (handlers.go); set
	// before the submit path opens.
	joinedAt time.Time

	lifeMu   sync.Mutex
	started  bool
	stopDone chan struct{} // closed when Stop has finished; nil before the first Stop
	stopErr  error
}

// NodeOption adjusts a Node beyond its Config.
type NodeOption func(*nodeOptions)

type nodeOptions struct {
	expander *Expander
	topics   TopicDefaults
	logger   *slog.Logger
	resolver Resolver
	tracer   trace.TracerProvider
}

// WithLogger sets the node's logger (default: discard).
func WithLogger(l *slog.Logger) NodeOption { return func(o *nodeOptions) { o.logger = l } }

// WithTopicDefaults gives the node the topics' default priorities and
// cluster-wide limits (TopicDefaults); without it no topic sets any.
func WithTopicDefaults(t TopicDefaults) NodeOption {
	return func(o *nodeOptions) { o.topics = t }
}

// NewNode validates cfg, opens (and migrates) the store and the hot tier,
// and builds the node. Nothing is scanned or delivered until Start.
func NewNode(ctx context.Context, cfg Config, opts ...NodeOption) (_ *Node, err error) {
	var o nodeOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
	if err := cfg.loadFiles(); err != nil {
		return nil, err
	}
	cfg.fill()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	sec, err := cfg.resolveSecrets(os.LookupEnv)
	if err != nil {
		return nil, err
	}
	// Every log line and error from here on is masked: a driver's error
	// may quote a DSN, a client's a URL with its password.
	red := sec.redactor()
	o.logger = slog.New(red.Handler(o.logger.Handler()))
	defer func() { err = red.Error(err) }()
	if cfg.Store.Driver == "sqlite" {
		if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
			return nil, fmt.Errorf("data_dir: %w", err)
		}
	}
	st, err := sqlstore.Open(ctx, sqlstore.Config{Driver: cfg.Store.Driver, DSNs: cfg.Store.Databases,
		Tables: cfg.Store.Tables, Segments: cfg.Store.Segments, MaxConns: cfg.Store.MaxConnections, KeyHold: time.Duration(cfg.Retention.KeyHold), Logger: o.logger})
	if err != nil {
		return nil, err
	}
	// Unset, the tables are what the store records (or a new store's),
	// and the tier's entries its tier's default: Config reports both.
	cfg.Store.Tables = st.Tables()
	cfg.Hot.MaxEntries = cfg.Hot.maxEntries()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), newStoreCollector(st))
	n := &Node{cfg: cfg, log: o.logger, store: st, reg: reg, sec: sec, inc: store.NewIncarnation(), topicDefaults: o.topics,
		created: time.Now(), version: metrics.BuildVersion(), expander: o.expander}
	if n.topicDefaults == nil {
		// The topics' settings (config, then PUT /v1/topics/{topic}), built
		// in build before anything runs.
		n.topicDefaults = settingsDefaults{n}
	}
	if err := n.openAudit(); err != nil {
		n.closeResources()
		return nil, err
	}
	if err := n.openTracing(ctx, o.tracer); err != nil {
		n.closeResources()
		return nil, err
	}
	if err := n.build(ctx, o.resolver); err != nil {
		n.closeResources()
		return nil, err
	}
	for i, jc := range cfg.Jobs {
		if err := n.jobs.AddSQL(ctx, jc.spec()); err != nil {
			n.closeResources()
			return nil, jobError(i, err)
		}
	}
	if err := n.addOutboxes(); err != nil {
		n.closeResources()
		return nil, err
	}
	if cfg.Cluster.Coordinator != "none" {
		if err := n.newCoordinator(ctx, st); err != nil {
			n.closeResources()
			return nil, fmt.Errorf("cluster: %w", err)
		}
	}
	return n, nil
}

// build opens the hot tier and builds the stages, each from the ones it
// hands work to.
func (n *Node) build(ctx context.Context, resolver Resolver) error {
	cfg := n.cfg
	window := time.Duration(cfg.Hot.Window)
	var (
		drain        func() []hot.Entry  // the memory tier's: fire hands its entries back at Stop
		tierListener []startstop.Service // the Redis tier's wake-up listener and resync
	)
	switch cfg.Hot.Tier {
	case "memory":
		t, err := memory.New(memory.Config{Visibility: time.Duration(cfg.Delivery.LeaseTTL)})
		if err != nil {
			return fmt.Errorf("hot: %w", err)
		}
		n.tier, drain = t, t.Drain
	case "redis":
		var tlsCfg *tls.Config
		if cfg.Hot.RedisCAFile != "" {
			var err error
			if tlsCfg, err = tlsFiles("hot.redis", cfg.Hot.RedisCAFile, "", ""); err != nil {
				return err
			}
		}
		t, err := hotredis.New(ctx, hotredis.Config{Addrs: cfg.Hot.RedisAddrs, Password: n.sec.redisPassword, TLS: tlsCfg,
			Prefix: cfg.Hot.RedisPrefix, Slots: cfg.Hot.Slots, Visibility: time.Duration(cfg.Delivery.LeaseTTL), Logger: n.log,
			// Redis lost the entries: the scanners claim this node's tasks
			// again, which adds them back (n.scan exists before the tier runs).
			OnLost: func() { n.scan.TierLost() }})
		if err != nil {
			return err
		}
		n.tier, tierListener = t, []startstop.Service{t}
	}
	m := metrics.NewWith(n.reg, cfg.metricsOptions())
	planner := hot.NewPlanner(FireLead, maxFireLead(cfg.Hot.MaxFireLead, window)).AssumeStart(hot.ColdStart)
	// A started task's running lease covers the wait until its due time
	// (at most maxLead) and its delivery, which may last the webhook
	// timeout; the claim lease is the margin beyond that.
	maxLead := max(maxFireLead(cfg.Hot.MaxFireLead, window), FireLead)
	deliveryLease := cfg.deliveryTimeout() + time.Duration(cfg.Delivery.LeaseTTL)
	// An outbox relay of this node waiting on a task that just ended lets
	// its key's next message go at once, without reading the task back
	// (n.relays is built before anything runs). Without outboxes nothing
	// listens, and the completer does not sort its batches for nobody.
	var written func([]store.Outcome)
	if len(cfg.Outboxes) > 0 {
		written = func(batch []store.Outcome) {
			for _, r := range n.relays {
				r.TasksEnded(batch)
			}
		}
	}
	comp, err := complete.New(complete.Config{Store: n.store, Logger: n.log, Metrics: m, Lease: maxLead + deliveryLease,
		Retry: deliver.RetryPolicy{Base: time.Duration(cfg.Delivery.RetryBase), Max: time.Duration(cfg.Delivery.RetryMax)},
		// A failed attempt waits by the task's own retry policy, else its
		// topic's (n.settings is built below, before anything runs).
		Policy: func(t *task.Task) task.Retry { return n.settings.RetryOf(t) },
		// Nodes' clocks are each within MaxClockSkew of the first
		// database's.
		Written:   written,
		ClockSkew: 2 * sqlstore.MaxClockSkew,
		Hot: &complete.HotRetry{Tier: n.tier, Planner: planner, NodeID: cfg.NodeID, Incarnation: n.inc, Window: window, LeaseTTL: time.Duration(cfg.Delivery.LeaseTTL),
			Open: n.firing.Load},
		// A task without a target this node has no handler for goes to a
		// live node that has one (handlers.go), or waits for one.
		Unhandled: &complete.Unhandled{NodeID: cfg.NodeID, Nodes: n.handlerNodes, Handoffs: n.store, LeaseTTL: time.Duration(cfg.Delivery.LeaseTTL)}})
	if err != nil {
		return err
	}
	n.deliveryLease = deliveryLease
	dests := cfg.destinations()
	if n.limits, err = n.newLimits(limit.NewMetrics(n.reg)); err != nil {
		return err
	}
	disp, err := deliver.NewDispatcher(deliver.DispatcherConfig{
		PerDestConcurrency: cfg.Delivery.Concurrency,
		Lanes:              n.limits.laneGates(laneConfig(cfg.Delivery.BrokerConcurrency, dests), dests),
		TopicGate:          n.limits.topicGateFunc(),
		Breaker:            deliver.BreakerConfig{FailureThreshold: cfg.Delivery.BreakerFailures, OpenFor: time.Duration(cfg.Delivery.BreakerOpenFor)},
		ShutdownGrace:      time.Duration(cfg.Delivery.ShutdownGrace),
		// A Retry-After holds a lane as long as it holds its task: at
		// most delivery.retry_max.
		MaxHold: time.Duration(cfg.Delivery.RetryMax),
		Logger:  n.log,
	})
	if err != nil {
		return fmt.Errorf("delivery: %w", err)
	}
	targets, err := cfg.targetPolicy(resolver)
	if err != nil {
		return err
	}
	wh, err := webhook.New(webhook.Config{Keys: n.sec.keys, Timeout: time.Duration(cfg.Delivery.Timeout),
		Concurrency: cfg.Delivery.Concurrency, Destinations: dests,
		Policy: targets, Echo: cfg.echoPolicy(), Redact: n.sec.redactor().String, MaxResultBytes: cfg.Delivery.MaxResultBytes})
	if err != nil {
		return fmt.Errorf("delivery: %w", err)
	}
	brokers, err := newBrokers(cfg.Brokers, time.Duration(cfg.Delivery.Timeout), n.log)
	if err != nil {
		return err
	}
	rc := deliver.RouterConfig{Dispatcher: disp, Webhook: redactingSink{wh, n.sec.redactor()}, Outcomes: comp, NodeID: cfg.NodeID, Metrics: m,
		Tracer: n.tracer}
	brokers.Trace(n.tracer)
	limits := task.Limits{MaxPayloadBytes: cfg.Delivery.MaxPayloadBytes, DefaultMaxAttempts: cfg.Delivery.MaxAttempts,
		CheckTarget: targets.CheckTarget, Handled: n.handled}
	if n.topicDefaults != nil {
		limits.TopicPriority = n.topicDefaults.Priority
	}
	if brokers.Len() > 0 {
		rc.Brokers, limits.Brokers = brokers, brokers
	}
	if err := cfg.checkTopicTargets(limits); err != nil {
		return err
	}
	// The topics' settings: the config's layer under what PUT
	// /v1/topics/{topic} stored, over the node's defaults. Submits take
	// a topic's target and max_attempts from it, the completer its retry
	// policy, the router its timeout.
	layers, err := cfg.topicLayers()
	if err != nil {
		return err
	}
	checkLimits := limits
	n.settings, err = topics.NewSettings(topics.SettingsConfig{Store: n.store, Config: layers, Logger: n.log,
		Defaults: topics.Defaults{MaxAttempts: cfg.Delivery.MaxAttempts, Timeout: time.Duration(cfg.Delivery.Timeout),
			Retry: task.Retry{Backoff: task.BackoffExponential, Initial: time.Duration(cfg.Delivery.RetryBase), Max: time.Duration(cfg.Delivery.RetryMax), Jitter: task.DefaultJitter}},
		CheckTarget: func(t string) error { return checkTarget(checkLimits, t) }})
	if err != nil {
		return err
	}
	limits.TopicTarget, limits.TopicMaxAttempts, rc.Timeout = n.settings.Target, n.settings.MaxAttempts, n.settings.Timeout
	n.router, err = deliver.NewRouter(rc)
	if err != nil {
		return err
	}
	firer, err := fire.New(fire.Config{Store: n.store, Tier: n.tier, Planner: planner, Sender: misfireScreen{n: n, outcomes: comp}, Outcomes: comp,
		HeldBytes: comp.HeldBytes, Wait: comp.Wait, Drain: drain,
		MaxLead: maxLead, DeliveryLease: deliveryLease, MaxBytes: cfg.Hot.MaxBytes, Paused: pausedTopics{n}, Logger: n.log, Metrics: m})
	if err != nil {
		return err
	}
	n.scan, err = scan.New(scan.Config{Store: n.store, Tier: n.tier, Planner: planner, NodeID: cfg.NodeID, Incarnation: n.inc, MaxEntries: cfg.Hot.maxEntries(),
		Window: window, LeaseTTL: time.Duration(cfg.Delivery.LeaseTTL), Logger: n.log, Metrics: m, Live: n.liveNodes, Wait: comp.Wait, Tracer: n.tracer,
		// Overdue tasks are claimed running while the fire stage has room,
		// not preheated into the tier.
		Runner: firer})
	if err != nil {
		return err
	}
	// In a cluster, other nodes hand this one the tasks without a target
	// they have no handler for, when this one has (handlers.go).
	var handoffs []startstop.Service
	if cfg.Cluster.Coordinator != "none" {
		recv, err := handoff.New(handoff.Config{Store: n.store, Tier: n.tier, Planner: planner, NodeID: cfg.NodeID, Logger: n.log,
			Active: func() bool { return len(n.router.Topics()) > 0 }})
		if err != nil {
			return err
		}
		handoffs = append(handoffs, recv)
	}
	n.topics, err = topics.New(topics.Config{Store: n.store, Waker: n.scan, Logger: n.log})
	if err != nil {
		return err
	}
	// The per-topic counts of GET /v1/topics and the console, read in the
	// background on every node (any node serves the API): from the counts
	// the writes maintain on SQLite and PostgreSQL, by COUNT(*) on MariaDB.
	if n.counts, err = topics.NewCounts(topics.CountsConfig{Store: n.store, Paused: n.topics, Logger: n.log}); err != nil {
		return err
	}
	// The counts' deltas (PostgreSQL's statement triggers) folded into
	// their totals every second, by one node at a time.
	folder, err := topics.NewFolder(topics.FolderConfig{Store: n.store, Logger: n.log})
	if err != nil {
		return err
	}
	if n.admin, err = topics.NewAdmin(n.store, n.topics, n.counts, n.scan, n.settings); err != nil {
		return err
	}
	// Group commit: one group per database at a time (MariaDB: per
	// table), written while the next one gathers. SQLite has one writer.
	// A server engine could commit several groups at once, but on one
	// machine with the node, its clients and its webhooks two writers
	// split the same submits into smaller groups, each a statement and a
	// commit more: 16 keyed clients with webhooks took 1.08–1.12× as many
	// submits with one writer as with two on PostgreSQL and MariaDB, four
	// and eight took fewer still, and a steady 1,000/s was as late
	// (BENCHMARKS.md, "The workloads users run"). A group gathers what
	// queued during the previous commit, so one writer's groups grow with
	// the load. MariaDB groups per table: a group of one table is one
	// INSERT, where several tables' rows take a transaction (BEGIN and
	// COMMIT round trips). PostgreSQL groups per database: several
	// tables' rows are one statement too (COPY, or the keyed statement),
	// and sixteen lanes of one-row commits, one per table, crowded out the
	// Starts and outcomes of the tasks they made: 16 keyed clients with
	// webhooks, tasks due 2 s ahead, delivered p99 2.5–2.9 s late per
	// table against 64–115 ms per database, for 0.89× the accepted rate.
	byTable := cfg.Store.Driver == "mysql"
	n.submit, err = submit.New(submit.Config{Store: n.store, Tier: n.tier, Planner: planner, Notifier: n.scan,
		Topology: router.Topology{Databases: len(cfg.Store.Databases), Tables: cfg.Store.Tables},
		Segments: cfg.Store.Segments, NodeID: cfg.NodeID, Incarnation: n.inc, Window: window, LeaseTTL: time.Duration(cfg.Delivery.LeaseTTL),
		Limits: limits, Logger: n.log, Metrics: m, GroupByTable: byTable, GroupWriters: 1, Tracer: n.tracer,
		// A task due at once goes from its insert to delivery, inserted
		// running: no tier, no Start.
		Runner: firer})
	if err != nil {
		return err
	}
	jobSender := scanjob.NewWebhookSender(n.sec.keys, targets, time.Duration(cfg.Delivery.Timeout))
	jobSenders := map[string]scanjob.Sender{"http": jobSender, "https": jobSender}
	if brokers.Len() > 0 {
		jobSenders["mq"] = scanjob.MQSender{Brokers: brokers}
	}
	n.jobs, err = scanjob.New(scanjob.Config{State: n.store, NodeID: cfg.NodeID, Logger: n.log, Metrics: metrics.NewJobs(n.reg),
		Senders: jobSenders, Retention: time.Duration(cfg.Retention.Done), // runs are kept as long as done tasks
		Handover: time.Duration(cfg.Cluster.LeaseTTL) / 2})
	if err != nil {
		return err
	}
	cleaner, err := retain.New(retain.Config{Store: n.store, Items: n.scan.Owned, Done: time.Duration(cfg.Retention.Done),
		Cancelled: time.Duration(cfg.Retention.Cancelled), Dead: time.Duration(cfg.Retention.Dead), Logger: n.log, Registerer: n.reg})
	if err != nil {
		return err
	}
	g := metrics.NewGauges(metrics.GaugesConfig{Tasks: n.store, Hot: n.tier, Lanes: disp, Topics: m.Topics, Dests: m.Dests,
		Cluster: n.clusterState, ItemLags: n.itemLags, HeldBytes: comp.HeldBytes, Window: window, Logger: n.log})
	n.reg.MustRegister(g)
	// The console's charts sample two of the node's series each second:
	// a registry of their own, so a sample runs no other collector (the
	// gauges count the store).
	sampled := prometheus.NewRegistry()
	sampled.MustRegister(m.Outcomes, m.Lateness)
	n.samples, n.lanes = console.NewSampler(sampled), disp
	if err := n.buildSchedules(); err != nil {
		return err
	}
	// Bulk operations: every node runs an executor; the lease on an
	// operation's row makes one node at a time run it, and another take
	// over within cluster.lease_ttl of its runner's death.
	n.ops, err = operation.New(operation.Config{Store: n.store, NodeID: cfg.NodeID, PageSize: cfg.Operations.PageSize,
		PagePause: time.Duration(cfg.Operations.PagePause), LeaseTTL: time.Duration(cfg.Cluster.LeaseTTL), Keep: time.Duration(cfg.Retention.Done),
		Logger: n.log})
	if err != nil {
		return err
	}
	n.mark = newStoreMark(n.store, n.cfg.NodeID, n.log)
	// The start order. Each service starts before those that hand it work,
	// so nothing is handed to a service that is not running yet; Stop runs
	// the list in reverse, so each stops after all that feed it (senders
	// before receivers). Start appends the coordinator, which assigns what
	// to scan: it starts last and stops first, handing this node's items to
	// the others before the pipeline stops.
	type services = []startstop.Service
	n.services = slices.Concat(
		// The store's mark of this node (store_mark.go): first to start,
		// last to stop, so a cutover waits for every write to end.
		services{n.mark},
		// The gauges' counting worker only reads: it needs nothing
		// running, and serves scrapes until the rest has stopped.
		services{g},
		// The console's sampler reads counters only; like the gauges it
		// serves until the rest has stopped.
		services{n.samples},
		// audit.file's SIGHUP watch: only reopens a file.
		n.auditServices(),
		// The completer writes the outcomes delivery reports: running
		// before the first delivery, stopped after the last one reported.
		services{comp},
		// Broker connections: before the lanes that publish on them,
		// stopped after the dispatcher's drain, which waits for their
		// confirms.
		brokers.Services(),
		// The cluster-wide limits' shares follow the live nodes before the
		// lanes that enter them run.
		n.limitServices(),
		// The dispatcher's lanes deliver what fire releases.
		services{disp},
		// Redis only: the tier's wake-up listener runs before the fire
		// loops that wait on it (the memory tier has no lifecycle).
		tierListener,
		// Fire empties the hot tier into the dispatcher; stopping, it
		// waits for the tasks it started to reach their lanes, then hands
		// back what a memory tier still holds (Drain).
		services{firer},
		// The scanner claims due tasks into the hot tier fire empties; in
		// a cluster, the handoff receiver puts there the tasks other
		// nodes hand this one.
		services{n.scan},
		handoffs,
		// Scan jobs send through the brokers and webhooks themselves; the
		// cleaner deletes old rows of the items the scanner owns.
		services{n.jobs, cleaner},
		// Schedules submit tasks: after every stage they feed. Bulk
		// operations write the store only.
		services{n.sched, n.ops},
		// The topics watcher wakes the scanners when a topic resumes
		// (Start has read the pause flags once already, before any claim).
		services{n.topics},
		// The topic settings' poll: other nodes' PUTs.
		services{n.settings},
		// The count cache only reads, while the API asks for counts; the
		// folder moves PostgreSQL's count deltas into their totals.
		services{n.counts, folder},
	)
	return nil
}

// closeResources closes what NewNode opened: the hot tier and the store.
func (n *Node) closeResources() error {
	var errs []error
	if n.jobs != nil {
		n.jobs.Close() // the scan jobs' source databases
	}
	for _, r := range n.relays {
		r.Close() // the outboxes' databases
	}
	if n.tier != nil {
		if err := n.tier.Close(); err != nil {
			errs = append(errs, fmt.Errorf("hot tier: %w", err))
		}
	}
	if err := n.store.Close(); err != nil {
		errs = append(errs, fmt.Errorf("store: %w", err))
	}
	if err := n.closeAudit(); err != nil {
		errs = append(errs, fmt.Errorf("audit.file: %w", err))
	}
	if err := n.closeTracing(); err != nil {
		errs = append(errs, fmt.Errorf("tracing: %w", err))
	}
	return errors.Join(errs...)
}

// Handle registers h for tasks of topic submitted without a target.
// Register before Start: the node publishes its topics to the cluster
// when it joins. A task without a target is accepted only while a live
// node has a handler for its topic (or the topic has a default target in
// the config); one fired on a node without the handler is handed to a
// live node that has it, or, when none has, waits without using an
// attempt until one is back (its last_error says why; metric
// ontime_tasks_unhandled_total, a WARN line a minute per topic).
//
// h runs with a context that ends after the topic's handler timeout
// (HandlerTimeout; default delivery.timeout). Until h returns, this node
// keeps the task's running lease alive, so no other node claims it, even
// when h overruns its timeout: the timeout only cancels h's context.
func (n *Node) Handle(topic string, h Handler, opts ...HandleOption) error {
	if h == nil {
		return errors.New("ontime: nil handler")
	}
	o := handleOptions{timeout: time.Duration(n.cfg.Delivery.Timeout)}
	explicit := len(opts) > 0
	for _, opt := range opts {
		opt(&o)
	}
	if o.timeout <= 0 || o.timeout >= n.deliveryLease {
		return fmt.Errorf("ontime: handler timeout of topic %q: %s; want more than 0 and less than the running lease %s (delivery.timeout + delivery.lease_ttl)",
			topic, o.timeout, n.deliveryLease)
	}
	err := n.router.Handle(topic, deliver.HandlerFunc(func(ctx context.Context, d deliver.Delivery) error {
		timeout := o.timeout
		if d.Timeout > 0 && !explicit {
			timeout = d.Timeout // the topic's timeout setting
		}
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		// The handler's spans continue the task's trace (tracing on).
		ctx = tracing.Continue(ctx, d.Traceparent)
		err := h(ctx, &Delivery{ID: d.ID, Topic: d.Topic, Key: d.Key, Payload: d.Payload, DueAt: d.DueAt, Attempt: d.Attempt,
			result: d.Result, maxBytes: n.cfg.Delivery.MaxResultBytes})
		if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("handler of topic %q timed out after %s: %w", d.Topic, timeout, err)
		}
		return err
	}))
	if err == nil {
		// Kept for the node that replaces this one at a cutover
		// (SwitchTopology).
		n.handlers = append(n.handlers, handlerReg{topic: topic, h: h, opts: opts})
	}
	return err
}

// HandleOption adjusts one topic's handler (Node.Handle).
type HandleOption func(*handleOptions)

type handleOptions struct {
	timeout time.Duration
}

// HandlerTimeout bounds each call of the topic's handler: its context ends
// d after the call began. d must be positive and shorter than the running
// lease (delivery.timeout + delivery.lease_ttl). Default delivery.timeout.
func HandlerTimeout(d time.Duration) HandleOption {
	return func(o *handleOptions) { o.timeout = d }
}

// Start starts scanning and delivering; it returns at once. Alone, the
// node scans every sharding item; in a cluster, those the leader assigns.
// A node starts once; after Stop it cannot start again.
func (n *Node) Start(ctx context.Context) error {
	n.lifeMu.Lock()
	defer n.lifeMu.Unlock()
	switch {
	case n.stopDone != nil:
		return errors.New("ontime: node stopped")
	case n.started:
		return errors.New("ontime: node already started")
	}
	if err := n.store.Ping(ctx); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if err := n.putConfigSchedules(ctx); err != nil {
		return err
	}
	// The pipeline outlives the caller's context: Stop ends it.
	ctx = context.WithoutCancel(ctx)
	// The paused topics before the first claim: a node starting while a
	// topic is paused must not deliver it.
	if err := n.topics.Refresh(ctx); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	// The topics' settings stored by PUT, before the first submit or
	// delivery.
	if err := n.settings.Refresh(ctx); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if n.cluster == nil {
		n.scan.SetItems(n.store.Items())
		n.jobs.OwnAll()
	} else {
		n.cluster.coord.AddItems(n.jobs.ItemKeys()...)
	}
	services := n.services
	if n.cluster != nil {
		services = append(services[:len(services):len(services)], n.cluster)
	}
	n.joinedAt = time.Now()
	if err := startstop.StartAll(ctx, services...); err != nil {
		return err
	}
	n.services = services
	n.started = true
	n.firing.Store(true)
	n.submit.SetReady(true)
	n.log.Info("node started", "node", n.cfg.NodeID, "window", time.Duration(n.cfg.Hot.Window), "items", len(n.store.Items()))
	return nil
}

// Check reaches what NewNode connected to, without starting anything:
// the store (every database) and the hot tier (Redis, when it is the
// tier). With NewNode it is `ontime serve --check`: NewNode has validated
// the config, opened and migrated the store, built the coordinator's
// client and registered the scan jobs and outboxes. Brokers are dialled
// when the node starts, not here.
func (n *Node) Check(ctx context.Context) error {
	if err := n.store.Ping(ctx); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if _, err := n.tier.Len(ctx); err != nil {
		return fmt.Errorf("hot: %w", err)
	}
	return nil
}

// Stop refuses new submits, hands this node's items to the others, stops
// claiming, lets in-flight deliveries finish within delivery.shutdown_grace,
// writes their outcomes, releases what the hot tier still holds and closes
// the tier and the store. It may be called any number of times, from any
// number of goroutines: each call returns when the node has stopped, or
// with ctx's error when ctx ends first (the stop goes on).
func (n *Node) Stop(ctx context.Context) error {
	n.lifeMu.Lock()
	if n.stopDone == nil {
		n.stopDone = make(chan struct{})
		go func() {
			defer close(n.stopDone)
			n.stopErr = n.stop()
		}()
	}
	done := n.stopDone
	n.lifeMu.Unlock()
	select {
	case <-done:
		return n.stopErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (n *Node) stop() error {
	n.submit.SetReady(false)
	n.firing.Store(false)
	if n.started {
		startstop.StopAllReverse(n.services...)
		n.log.Info("node stopped", "node", n.cfg.NodeID)
	} else if n.cluster != nil {
		n.cluster.Stop() // built, never started: its client still needs closing
	}
	return n.closeResources()
}

// Submit stores one task and returns it; created is false when a task with
// the same topic and key existed (nothing was written).
func (n *Node) Submit(ctx context.Context, s TaskSpec) (t *Task, created bool, err error) {
	res, err := n.submit.Submit(ctx, []task.Spec{specOf(s)})
	if err != nil {
		return nil, false, err
	}
	if res[0].Err != nil {
		return nil, false, res[0].Err
	}
	return viewOf(res[0].Task), !res[0].Existing, nil
}

// SubmitBatch stores many tasks in as few statements as the store allows.
// It answers one result per spec, in order: the task, whether it was
// created (false: its topic and key existed), or the error of that spec
// (a *FieldError; nothing of it was written). err is for the whole call.
func (n *Node) SubmitBatch(ctx context.Context, specs []TaskSpec) ([]BatchResult, error) {
	in := make([]task.Spec, len(specs))
	for i, s := range specs {
		in[i] = specOf(s)
	}
	res, err := n.submit.Submit(ctx, in)
	if err != nil {
		return nil, err
	}
	out := make([]BatchResult, len(res))
	for i, r := range res {
		if r.Err != nil {
			out[i].Err = r.Err
			continue
		}
		out[i] = BatchResult{Task: viewOf(r.Task), Created: !r.Existing}
	}
	return out, nil
}

// BatchResult is one answer of SubmitBatch.
type BatchResult struct {
	Task    *Task
	Created bool
	Err     error
}

func specOf(s TaskSpec) task.Spec {
	sp := task.Spec{Topic: s.Topic, Key: s.Key, Payload: s.Payload, Target: s.Target, MaxAttempts: s.MaxAttempts, Priority: s.Priority, Replace: s.Replace}
	if s.Retry != nil {
		r := task.RetrySpec(*s.Retry)
		sp.Retry = &r
	}
	sp.DueAt, sp.Delay = dueSpec(s.DueAt, s.Delay)
	return sp
}

// Get returns a task by ID.
func (n *Node) Get(ctx context.Context, id string) (*Task, error) {
	return viewed(n.submit.Get(ctx, id))
}

// Cancel cancels a pending task; ErrConflict once it is running or final.
func (n *Node) Cancel(ctx context.Context, id string) (*Task, error) {
	return viewed(n.submit.Cancel(ctx, id))
}

// HTTPHandler serves the HTTP API v1 for this node: every route, from the
// services below (internal/api routes.go holds the table); beside it the
// web console at /ui/ (internal/console), a client of that same handler,
// and GET / redirecting to it.
func (n *Node) HTTPHandler() http.Handler {
	h := n.apiHandler()
	c, err := console.New(console.Options{API: h, Auth: n.auth(), Samples: n.samples, Breakers: n.openBreakers,
		Upcoming: n.upcoming, Logger: n.log})
	if err != nil {
		// The console's templates are embedded and parsed by its tests:
		// this is a build that was never tested. The API still serves.
		n.log.Error("console disabled", "err", err)
		return h
	}
	return console.Mount(h, c)
}

// upcoming is the console's Coming up: the store's due histogram.
func (n *Node) upcoming(ctx context.Context, from time.Time, step time.Duration, buckets int) ([]console.DueCounts, error) {
	hs, err := n.store.DueHistogram(ctx, from, step, buckets)
	if err != nil {
		return nil, err
	}
	out := make([]console.DueCounts, len(hs))
	for i, h := range hs {
		out[i] = console.DueCounts{Topic: h.Topic, Counts: h.Counts}
	}
	return out, nil
}

// openBreakers lists the destinations whose breaker is not closed.
func (n *Node) openBreakers() map[string]string {
	out := map[string]string{}
	if n.lanes == nil {
		return out
	}
	for dest, l := range n.lanes.Levels() {
		if l.Breaker != "closed" {
			out[dest] = l.Breaker
		}
	}
	return out
}

// apiHandler is the HTTP API v1 alone.
func (n *Node) apiHandler() http.Handler {
	return api.NewHandler(api.Services{
		Tasks:     n.submit,
		Keys:      n.submit,
		Topics:    n.admin,
		Schedules: n.sched,
		Ops:       n.ops,
		Jobs:      jobsAPI{n},
		Cluster:   n,
		Outboxes:  outboxAPI{n},
		Store:     n,
		Metrics:   promhttp.HandlerFor(n.reg, promhttp.HandlerOpts{Registry: n.reg}),
	}, api.Options{
		TopicLimits:          n.limits.topicView,
		MaxPayloadBytes:      n.cfg.Delivery.MaxPayloadBytes,
		MaxBatchBytes:        int64(n.cfg.HTTP.MaxBatchBytes),
		MaxInflightBodyBytes: n.cfg.HTTP.MaxInflightBodyBytes,
		Logger:               n.log,
		Auth:                 n.auth(),
		SlowRequest:          time.Duration(n.cfg.HTTP.SlowRequest),
		Audit:                n.audit,
		Tracer:               n.tracer,
	})
}

// Config returns the node's effective configuration.
func (n *Node) Config() Config { return n.cfg }

// NewLogger builds a JSON-lines slog logger at level (see Config.Logger).
func NewLogger(w io.Writer, level string) *slog.Logger {
	return newLogger(w, level, "json")
}

// FireLead is how long before its due time a task leaves the hot tier and
// is marked running, when nothing else is due with it: it keeps the store
// write off the lateness path (see hot.Planner).
const FireLead = 20 * time.Millisecond

// maxFireLead maps hot.max_fire_lead to the planner's max, where zero turns
// spreading off (every task leaves FireLead ahead). A task cannot be fired
// before it is in the hot tier, so the window caps it.
func maxFireLead(d Duration, window time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return min(time.Duration(d), window)
}
