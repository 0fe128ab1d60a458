// Package redisstream publishes to Redis Streams: one XADD per task, its
// fields the payload and the ontime-* headers, optionally trimmed with
// MAXLEN ~ n. Success is the reply (the entry's ID).
//
// Publishes are pipelined: a few writer goroutines each take every XADD
// waiting at that moment and send them in one pipeline, so a burst costs
// one round trip per batch, not per task. go-redis redials a lost
// connection by itself; an XADD whose reply was lost with its connection is
// sent again (at least once: the stream may then hold it twice, and
// consumers drop duplicates by ontime-task-id).
package redisstream

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontimehq/ontime/internal/deliver/broker"
)

// Defaults of the pipeline.
const (
	writers  = 4   // pipelines in flight at once
	maxBatch = 512 // XADDs per pipeline
)

// FieldPayload is the stream field that carries the task's payload; the
// others are the ontime-* headers.
const FieldPayload = "payload"

// ParseURL splits ontime's own maxlen parameter (approximate trimming,
// MAXLEN ~ n) from go-redis's options.
func ParseURL(raw string) (*redis.Options, int64, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, 0, err
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return nil, 0, fmt.Errorf("scheme %q: want redis:// or rediss://", u.Scheme)
	}
	q := u.Query()
	var maxLen int64
	if v := q.Get("maxlen"); v != "" {
		maxLen, err = strconv.ParseInt(v, 10, 64)
		if err != nil || maxLen < 1 {
			return nil, 0, fmt.Errorf("maxlen=%q: want a positive integer", v)
		}
	}
	q.Del("maxlen")
	u.RawQuery = q.Encode()
	opt, err := redis.ParseURL(u.String())
	if err != nil {
		return nil, 0, err
	}
	return opt, maxLen, nil
}

// CheckURL reports whether raw is a URL the publisher accepts.
func CheckURL(raw string) error {
	_, _, err := ParseURL(raw)
	return err
}

// Kind registers redis:// and rediss:// URLs with a broker.Registry.
func Kind() broker.Kind {
	return broker.Kind{Schemes: []string{"redis", "rediss"}, CheckURL: CheckURL,
		New: func(o broker.Options) (broker.Publisher, error) { return New(o) }}
}

// Publisher publishes to one Redis server.
type Publisher struct {
	*broker.Base
	cfg    broker.Options
	opt    *redis.Options
	maxLen int64
	client *redis.Client // made by run, used by its goroutines only
	reqs   chan *xadd
	// lost tells the prober a pipeline lost its connection: publishes then
	// wait for a PING to answer instead of each redialling a dead server.
	lost chan error
}

type xadd struct {
	stream string
	m      *broker.Message
	done   chan error // buffered 1
}

// New builds a publisher of a redis:// or rediss:// URL (go-redis's syntax,
// plus ?maxlen=N); its writers run once started. cfg.Timeout
// (delivery.timeout) is how long a pipeline waits for its replies: Redis
// answers in order on a live connection, so waiting beats sending again,
// which would add the entries twice. Default 10s; a read_timeout in the URL
// wins.
func New(cfg broker.Options) (*Publisher, error) {
	opt, maxLen, err := ParseURL(cfg.URL)
	if err != nil {
		return nil, err
	}
	opt.PoolSize = writers + 2
	opt.MaxRetries = -1 // a lost reply is ours to retry, knowing what it was
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if !strings.Contains(cfg.URL, "read_timeout=") {
		opt.ReadTimeout = cfg.Timeout
	}
	return &Publisher{Base: broker.NewBase(cfg.Name, cfg.Logger), cfg: cfg, opt: opt, maxLen: maxLen,
		reqs: make(chan *xadd, 4096), lost: make(chan error, 1)}, nil
}

// Kind implements broker.Publisher.
func (p *Publisher) Kind() string { return "redis" }

// CheckAddress judges a stream key: anything non-empty.
func (p *Publisher) CheckAddress(address string) error { return CheckAddress(address) }

// CheckAddress is Publisher.CheckAddress without a publisher.
func CheckAddress(key string) error {
	if key == "" {
		return errors.New("the stream key is empty")
	}
	return nil
}

// Start runs the writers until Stop.
func (p *Publisher) Start(ctx context.Context) error { return p.Go(ctx, p.run) }

// run is the prober and the writers, until ctx ends.
func (p *Publisher) run(ctx context.Context) {
	p.client = redis.NewClient(p.opt)
	var wg sync.WaitGroup
	wg.Go(func() { p.probe(ctx) })
	for range writers {
		wg.Go(func() { p.write(ctx) })
	}
	wg.Wait()
	// Whatever is still queued was given up by its caller (the dispatcher
	// drained first); answer it anyway.
	for {
		select {
		case r := <-p.reqs:
			r.done <- fmt.Errorf("%w: publisher stopped", broker.ErrConnLost)
		default:
			_ = p.client.Close()
			return
		}
	}
}

// probe marks the link up once the server answers a PING, and down (then
// probes again with backoff) when a pipeline lost its connection.
func (p *Publisher) probe(ctx context.Context) {
	broker.KeepUp(ctx, p.Log, p.Link, "broker unreachable; retrying", "broker reachable again",
		func(ctx context.Context) (struct{}, error) {
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			return struct{}{}, p.client.Ping(pctx).Err()
		},
		func(ctx context.Context, _ struct{}) error {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case err := <-p.lost:
				p.Link.Down(err)
				return err
			}
		})
}

// write sends what is queued, in pipelines, until ctx ends.
func (p *Publisher) write(ctx context.Context) {
	batch := make([]*xadd, 0, maxBatch)
	for {
		select {
		case <-ctx.Done():
			return
		case r := <-p.reqs:
			batch = append(batch[:0], r)
		}
	more:
		for len(batch) < maxBatch {
			select {
			case r := <-p.reqs:
				batch = append(batch, r)
			default:
				break more
			}
		}
		p.send(batch)
		clear(batch)
	}
}

func (p *Publisher) send(batch []*xadd) {
	// Not the service's context: a pipeline sent is answered, even while
	// stopping; the timeout bounds a broker that stopped answering.
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.Timeout+time.Second)
	defer cancel()
	pipe := p.client.Pipeline()
	cmds := make([]*redis.StringCmd, len(batch))
	for i, r := range batch {
		vals := make([]any, 0, 2+2*len(r.m.Headers))
		vals = append(vals, FieldPayload, r.m.Body)
		for _, h := range r.m.Headers {
			vals = append(vals, h.Name, h.Value)
		}
		if r.m.Traceparent != "" {
			vals = append(vals, broker.HeaderTraceparent, r.m.Traceparent)
		}
		args := &redis.XAddArgs{Stream: r.stream, Values: vals}
		if p.maxLen > 0 {
			args.MaxLen, args.Approx = p.maxLen, true
		}
		cmds[i] = pipe.XAdd(ctx, args)
	}
	_, _ = pipe.Exec(ctx)
	for i, r := range batch {
		err := classify(cmds[i].Err())
		if i == 0 && errors.Is(err, broker.ErrConnLost) {
			select {
			case p.lost <- err:
			default:
			}
		}
		r.done <- err
	}
}

// classify tells a reply of the server (the broker refused the entry: a
// failed attempt with its reason) from a lost connection or an answer that
// never came (sent again).
func classify(err error) error {
	if err == nil {
		return nil
	}
	var re redis.Error
	if errors.As(err, &re) && strings.HasPrefix(re.Error(), "OOM ") {
		// Past maxmemory: back-pressure, not a bad entry.
		return broker.BackPressure(fmt.Errorf("XADD refused: %w", err))
	}
	if errors.As(err, &re) && !isConnStateReply(re.Error()) {
		return fmt.Errorf("XADD refused: %w", err)
	}
	return fmt.Errorf("%w: %v", broker.ErrConnLost, err)
}

// isConnStateReply: replies that say the server cannot take writes right
// now (loading its data, a replica, busy with a script), not that the
// entry is wrong.
func isConnStateReply(s string) bool {
	for _, p := range []string{"LOADING", "READONLY", "BUSY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN"} {
		if len(s) >= len(p) && s[:len(p)] == p {
			return true
		}
	}
	return false
}

// Publish implements broker.Publisher.
func (p *Publisher) Publish(ctx context.Context, stream string, m *broker.Message) error {
	return p.PublishBatch(ctx, stream, []*broker.Message{m})[0]
}

// PublishBatch implements broker.BatchPublisher: the XADDs join the queue
// the writers pipeline, then every reply is awaited.
func (p *Publisher) PublishBatch(ctx context.Context, stream string, ms []*broker.Message) []error {
	errs := make([]error, len(ms))
	if _, err := p.Link.Wait(ctx); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	rs := make([]*xadd, len(ms))
	for i, m := range ms {
		rs[i] = &xadd{stream: stream, m: m, done: make(chan error, 1)}
		select {
		case p.reqs <- rs[i]:
		case <-ctx.Done():
			for j := i; j < len(ms); j++ {
				errs[j] = fmt.Errorf("XADD not sent: %w", ctx.Err())
				rs[j] = nil
			}
		}
		if rs[i] == nil {
			break
		}
	}
	for i, r := range rs {
		if r == nil {
			break
		}
		select {
		case errs[i] = <-r.done:
		case <-ctx.Done():
			errs[i] = fmt.Errorf("no XADD reply: %w", ctx.Err())
		}
	}
	return errs
}
