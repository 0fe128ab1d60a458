package deliver

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/ontimehq/ontime/internal/metrics"
	"github.com/ontimehq/ontime/internal/task"
	"github.com/ontimehq/ontime/internal/tracing"
)

// ErrNoHandler: a task without a target reached a node with no Go handler
// for its topic (a *NoHandlerError). It never reached anyone, so it uses
// no attempt: the completion stage hands it to a live node that has the
// handler, or defers it, visibly, until one comes back.
var ErrNoHandler = errors.New("no handler registered for topic")

// NoHandlerError is ErrNoHandler for one topic on one node.
type NoHandlerError struct {
	Topic string
	Node  string
}

func (e *NoHandlerError) Error() string {
	return fmt.Sprintf("%s %q on node %s", ErrNoHandler, e.Topic, e.Node)
}

// Is makes errors.Is(err, ErrNoHandler) true.
func (e *NoHandlerError) Is(target error) bool { return target == ErrNoHandler }

// Outcomes is told the result of every task handed to Router.Send, exactly
// once (the completion stage).
type Outcomes interface {
	Finish(t *task.Task, err error)
}

// RouterConfig wires a Router. Dispatcher and Outcomes are required.
type RouterConfig struct {
	Dispatcher *Dispatcher
	Webhook    Sink // sink for http(s) targets; nil: such tasks fail
	Brokers    Sink // sink for mq:// targets; nil: such tasks fail
	Outcomes   Outcomes
	NodeID     string
	Metrics    *metrics.Metrics // nil: series kept but not registered
	// Tracer, when set (tracing on), continues each task's trace
	// (task.Traceparent) with "ontime.deliver" (the attempt, its outcome
	// and lateness), and gives the sink the deliver span's traceparent
	// (Delivery.Traceparent); nil: none.
	Tracer trace.Tracer
	// Timeout, when set, gives a topic's timeout per attempt (0: the
	// sink's own): topics.Settings, set by PUT or the config.
	Timeout func(topic string) time.Duration
}

// Router picks each due task's sink and lane: the Go handler of its topic
// when it has no target, the broker sink in the lane of its mq:// target,
// else the webhook sink in the lane of the target's scheme and host.
type Router struct {
	cfg RouterConfig
	m   *metrics.Metrics

	mu       sync.RWMutex
	handlers map[string]Sink
}

// NewRouter builds a router.
func NewRouter(cfg RouterConfig) (*Router, error) {
	if cfg.Dispatcher == nil || cfg.Outcomes == nil {
		return nil, errors.New("deliver: router needs a Dispatcher and Outcomes")
	}
	m := cfg.Metrics
	if m == nil {
		m = metrics.New(nil)
	}
	return &Router{cfg: cfg, m: m, handlers: map[string]Sink{}}, nil
}

// Handle registers the Go handler for tasks of topic that have no target.
func (r *Router) Handle(topic string, h Sink) error {
	if err := task.ValidateTopic(topic); err != nil {
		return err
	}
	if h == nil {
		return errors.New("deliver: nil handler")
	}
	r.mu.Lock()
	r.handlers[topic] = h
	r.mu.Unlock()
	return nil
}

// Topics lists the topics this node has Go handlers for: what it
// publishes to the cluster.
func (r *Router) Topics() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.handlers))
	for t := range r.handlers {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// Handles reports whether this node has a Go handler for topic.
func (r *Router) Handles(topic string) bool { return r.handler(topic) != nil }

func (r *Router) handler(topic string) Sink {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.handlers[topic]
}

// Send delivers tasks that are due, grouped by destination: tasks due
// together go to their lane in one DispatchAll. Each task's result goes to
// Outcomes. Deliveries run with the dispatcher's Context: cancelled only
// once the dispatcher's shutdown grace has passed.
func (r *Router) Send(tasks []*task.Task) {
	type lane struct {
		sink Sink
		jobs []Job
	}
	var lanes map[string]*lane
	var order []string
	sent := time.Now()
	// Each task's answer comes back through its inflight, all of them in
	// one allocation: a closure per task capturing what the metrics need
	// cost more than the metrics (BenchmarkRouterSend).
	fl := make([]inflight, len(tasks))
	for i, t := range tasks {
		late := sent.Sub(t.DueAt).Seconds()
		r.m.Lateness.Observe(late)
		// The topic's series, looked up once per task (one sync.Map load).
		ts := r.m.Topics.For(t.Topic)
		if t.Attempts <= 1 {
			ts.Lateness.Observe(late)
		}
		var sink Sink
		var dest string
		if t.Target == "" {
			sink, dest = r.handler(t.Topic), "handler:"+t.Topic
			if sink == nil {
				r.cfg.Outcomes.Finish(t, &NoHandlerError{Topic: t.Topic, Node: r.cfg.NodeID})
				continue
			}
		} else if strings.HasPrefix(t.Target, task.MQScheme) {
			sink, dest = r.cfg.Brokers, Destination(t.Target)
			if sink == nil {
				r.cfg.Outcomes.Finish(t, fmt.Errorf("no broker is configured on node %s", r.cfg.NodeID))
				continue
			}
		} else {
			sink, dest = r.cfg.Webhook, Destination(t.Target)
			if sink == nil {
				r.cfg.Outcomes.Finish(t, Permanent(errors.New("webhook delivery is not configured on this node")))
				continue
			}
		}
		if lanes == nil {
			lanes = map[string]*lane{}
		}
		l := lanes[dest]
		if l == nil {
			l = &lane{sink: sink}
			lanes[dest] = l
			order = append(order, dest)
		}
		job := Job{
			Delivery: Delivery{Dest: dest, ID: t.ID, Topic: t.Topic, Key: t.Key, Target: t.Target, Payload: t.Payload, DueAt: t.DueAt, Attempt: t.Attempts, Priority: t.Priority,
				Result: &fl[i].result},
			Done: fl[i].set(r, t, ts, sent),
		}
		if r.cfg.Timeout != nil {
			job.Delivery.Timeout = r.cfg.Timeout(t.Topic)
		}
		if r.cfg.Tracer != nil {
			r.traced(&job, t, dest)
		}
		l.jobs = append(l.jobs, job)
	}
	ctx := r.cfg.Dispatcher.Context()
	for _, dest := range order {
		r.cfg.Dispatcher.DispatchAll(ctx, dest, lanes[dest].sink, lanes[dest].jobs)
	}
}

// inflight is one task handed to a lane, until its answer.
type inflight struct {
	r    *Router
	t    *task.Task
	ts   *metrics.TopicSeries
	sent time.Time
	// result is the delivery's result, set by the sink (Delivery.Result).
	result ResultBox
}

func (f *inflight) set(r *Router, t *task.Task, ts *metrics.TopicSeries, sent time.Time) func(error) {
	f.r, f.t, f.ts, f.sent = r, t, ts, sent
	return f.done
}

// done records a delivery's answer in the metrics and hands it to
// Outcomes.
func (f *inflight) done(err error) {
	f.ts.Duration.Observe(time.Since(f.sent).Seconds())
	if destFailed(err) {
		dest := "handler:" // a Go handler's lane
		if f.t.Target != "" {
			dest = Destination(f.t.Target)
		}
		f.r.m.Dests.Failed(dest, err)
	}
	if err == nil && f.result.Data != nil {
		f.t.Result = f.result.Data
	}
	f.r.cfg.Outcomes.Finish(f.t, err)
}

// destFailed reports whether err is a failure of the destination: not a
// delivery that never reached it (lane full, breaker open, stopping), nor
// an answer that is an outcome the receiver chose (snooze, cancel), nor a
// missing Go handler.
func destFailed(err error) bool {
	if err == nil || errors.Is(err, ErrLaneFull) || errors.Is(err, ErrCircuitOpen) || errors.Is(err, ErrStopped) || errors.Is(err, ErrThrottled) ||
		errors.Is(err, ErrNoHandler) || IsCancel(err) {
		return false
	}
	_, snoozed := SnoozedFor(err)
	return !snoozed
}

// Destination is the lane key of a target. A webhook's is its scheme and
// host, so every path of one endpoint shares one concurrency limit and one
// breaker; a broker's is the whole mq://NAME/ADDRESS, so each exchange and
// routing key, subject, stream or MQTT topic has its own, and a queue
// nobody drains holds back only its own tasks. A webhook's key is in the
// form ParseDestination gives (lower case, no default port), so the
// config's destinations name lanes whatever the spelling of the targets.
func Destination(target string) string {
	if strings.HasPrefix(target, task.MQScheme) {
		return target
	}
	u, err := url.Parse(target)
	if err != nil {
		return target
	}
	return destKey(u.Scheme, u.Host)
}

// destKey is scheme://host[:port] in lower case, without the scheme's
// default port. strings.ToLower does not allocate for what is lower case
// already: the common target costs one concatenation, as before.
func destKey(scheme, host string) string {
	scheme, host = strings.ToLower(scheme), strings.ToLower(host)
	switch {
	case scheme == "http" && strings.HasSuffix(host, ":80"):
		host = strings.TrimSuffix(host, ":80")
	case scheme == "https" && strings.HasSuffix(host, ":443"):
		host = strings.TrimSuffix(host, ":443")
	}
	return scheme + "://" + host
}

// ParseDestination checks a webhook destination as the config names one,
// http(s)://host[:port] with nothing after the host (a trailing "/" is
// allowed), and returns its lane key (Destination's form).
func ParseDestination(s string) (string, error) {
	u, err := url.Parse(strings.TrimSuffix(s, "/"))
	if err != nil {
		return "", errors.New("is not a URL; want http(s)://host[:port]")
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https" && !strings.EqualFold(u.Scheme, "http") && !strings.EqualFold(u.Scheme, "https"):
		return "", fmt.Errorf("scheme %q is not http or https", u.Scheme)
	case u.Host == "" || u.Hostname() == "":
		return "", errors.New("has no host; want http(s)://host[:port]")
	case u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "":
		return "", errors.New("has more than scheme://host[:port]")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.ParseUint(p, 10, 16); err != nil || n == 0 {
			return "", fmt.Errorf("port %q is not 1..65535", p)
		}
	}
	return destKey(u.Scheme, u.Host), nil
}

// traced continues t's trace for one attempt: one span, "ontime.deliver",
// from the release to the attempt's outcome, child of the submit's span
// (t.Traceparent), with the lateness (due time → release) as an
// attribute; the sink sends its traceparent on, so the receiver's work is
// its child. A task submitted without a trace starts one here.
//
// One span rather than a fire span and a deliver span: the SDK's Start
// was most of tracing's cost per task (docs/performance-notes.md,
// "Tracing and request logs").
func (r *Router) traced(job *Job, t *task.Task, dest string) {
	now := time.Now()
	ctx := tracing.Continue(context.Background(), t.Traceparent)
	_, span := r.cfg.Tracer.Start(ctx, "ontime.deliver", trace.WithSpanKind(trace.SpanKindProducer), trace.WithTimestamp(now),
		trace.WithAttributes(attribute.String("ontime.task_id", t.ID), attribute.String("ontime.topic", t.Topic),
			attribute.Int("ontime.attempt", t.Attempts), attribute.String("ontime.destination", dest),
			attribute.Float64("ontime.lateness_seconds", now.Sub(t.DueAt).Seconds())))
	job.Delivery.Traceparent = tracing.Format(span.SpanContext())
	done := job.Done
	job.Done = func(err error) {
		span.SetAttributes(attribute.String("ontime.outcome", outcomeOf(t, err)))
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
		done(err)
	}
}

// outcomeOf names what an attempt's result makes of t, as the completer
// will: done, retry, or dead (a permanent failure or the last attempt).
func outcomeOf(t *task.Task, err error) string {
	switch {
	case err == nil:
		return "done"
	case IsPermanent(err) || t.Attempts >= t.MaxAttempts:
		return "dead"
	default:
		return "retry"
	}
}
