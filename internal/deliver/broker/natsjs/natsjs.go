// Package natsjs publishes to NATS JetStream. Every message carries
// Nats-Msg-Id = the task ID, so the stream's duplicate window drops a
// redelivery; success is the stream's PubAck. A subject no stream captures
// gets no answer from JetStream ("no responders"): a failed attempt that
// says so.
//
// Publishes are asynchronous (many in flight on one connection, each
// waiting for its own PubAck future). nats.go reconnects by itself; a
// publish whose connection is lost before its PubAck is sent again on the
// next one, which the Msg-Id makes harmless.
package natsjs

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ontimehq/ontime/internal/deliver/broker"
)

// CheckURL reports whether raw is a nats:// URL (several may be given,
// comma-separated, as nats.go accepts).
func CheckURL(raw string) error {
	for _, one := range strings.Split(raw, ",") {
		u, err := url.Parse(strings.TrimSpace(one))
		if err != nil {
			return err
		}
		if u.Scheme != "nats" && u.Scheme != "tls" {
			return fmt.Errorf("scheme %q: want nats://", u.Scheme)
		}
		if u.Host == "" {
			return errors.New("no host")
		}
	}
	return nil
}

// Kind registers nats:// URLs with a broker.Registry.
func Kind() broker.Kind {
	return broker.Kind{Schemes: []string{"nats"}, CheckURL: CheckURL,
		New: func(o broker.Options) (broker.Publisher, error) { return New(o) }}
}

// Publisher publishes to one NATS server or cluster.
type Publisher struct {
	*broker.Base
	cfg broker.Options

	mu sync.Mutex
	nc *nats.Conn
	js jetstream.JetStream
}

// New builds a publisher of a nats://[user:pass@]host:port[,nats://…] URL;
// it connects once started.
func New(cfg broker.Options) (*Publisher, error) {
	if err := CheckURL(cfg.URL); err != nil {
		return nil, err
	}
	return &Publisher{Base: broker.NewBase(cfg.Name, cfg.Logger), cfg: cfg}, nil
}

// Kind implements broker.Publisher.
func (p *Publisher) Kind() string { return "nats" }

// CheckAddress judges a subject to publish to: tokens separated by dots,
// none empty, no wildcard.
func (p *Publisher) CheckAddress(address string) error { return CheckAddress(address) }

// CheckAddress is Publisher.CheckAddress without a publisher.
func CheckAddress(subject string) error {
	for i, tok := range strings.Split(subject, ".") {
		switch {
		case tok == "":
			return fmt.Errorf("subject token %d is empty", i+1)
		case tok == "*" || tok == ">":
			return errors.New("a subject to publish to has no wildcards (* or >)")
		case strings.ContainsAny(tok, " \t\r\n"):
			return errors.New("subject contains whitespace")
		}
	}
	return nil
}

// Start connects in the background; nats.go keeps the connection up (with
// backoff) until Stop.
func (p *Publisher) Start(ctx context.Context) error { return p.Go(ctx, p.run) }

func (p *Publisher) run(ctx context.Context) {
	// The handlers may run before Connect returns: the link is up only
	// once js is set too, by a handler or below.
	up := func(msg string) nats.ConnHandler {
		return func(*nats.Conn) {
			p.mu.Lock()
			ready := p.js != nil
			p.mu.Unlock()
			if ready {
				p.Link.Up()
			}
			p.Log.Info(msg)
		}
	}
	nc, err := nats.Connect(p.cfg.URL,
		nats.Name("ontime "+p.cfg.Name),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.CustomReconnectDelay(broker.ReconnectDelay),
		// Publishes wait for a connection instead of piling up in a
		// buffer whose fate a lost connection leaves unknown.
		nats.ReconnectBufSize(-1),
		nats.ConnectHandler(up("broker connected")),
		nats.ReconnectHandler(up("broker reconnected")),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			p.Link.Down(err)
			if err != nil {
				p.Log.Warn("broker connection lost; reconnecting", "err", err)
			}
		}),
		nats.ClosedHandler(func(*nats.Conn) { p.Link.Down(errors.New("connection closed")) }),
	)
	if err != nil {
		p.Link.Down(err)
		p.Log.Error("broker connection failed", "err", err)
		<-ctx.Done()
		return
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(16384))
	if err != nil {
		nc.Close()
		p.Link.Down(err)
		p.Log.Error("jetstream", "err", err)
		<-ctx.Done()
		return
	}
	p.mu.Lock()
	p.nc, p.js = nc, js
	p.mu.Unlock()
	if nc.IsConnected() {
		p.Link.Up()
	}
	<-ctx.Done()
	// Publishes in flight were drained by the dispatcher's stop; what
	// is left is flushed and closed.
	_ = nc.Drain()
	nc.Close()
}

// Publish implements broker.Publisher.
func (p *Publisher) Publish(ctx context.Context, subject string, m *broker.Message) error {
	return p.PublishBatch(ctx, subject, []*broker.Message{m})[0]
}

// PublishBatch implements broker.BatchPublisher: every message is sent
// asynchronously, then every PubAck awaited.
func (p *Publisher) PublishBatch(ctx context.Context, subject string, ms []*broker.Message) []error {
	errs := make([]error, len(ms))
	all := func(err error) []error {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	conn, err := p.Link.Wait(ctx)
	if err != nil {
		return all(err)
	}
	p.mu.Lock()
	js := p.js
	p.mu.Unlock()
	if js == nil {
		return all(fmt.Errorf("%w: not connected", broker.ErrConnLost))
	}
	futs := make([]jetstream.PubAckFuture, len(ms))
	for i, m := range ms {
		msg := &nats.Msg{Subject: subject, Data: m.Body, Header: make(nats.Header, len(m.Headers)+1)}
		for _, h := range m.Headers {
			msg.Header[h.Name] = []string{h.Value} // as written: ontime-* names, not canonicalized
		}
		if m.Traceparent != "" {
			msg.Header[broker.HeaderTraceparent] = []string{m.Traceparent}
		}
		msg.Header["Content-Type"] = []string{"application/json"}
		futs[i], err = js.PublishMsgAsync(msg, jetstream.WithMsgID(m.ID), jetstream.WithRetryAttempts(0))
		if err != nil {
			if errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, nats.ErrConnectionReconnecting) ||
				errors.Is(err, nats.ErrReconnectBufExceeded) || errors.Is(err, nats.ErrDisconnected) {
				err = fmt.Errorf("%w: %v", broker.ErrConnLost, err)
			}
			for j := i; j < len(ms); j++ {
				errs[j] = err
			}
			futs = futs[:i]
			break
		}
	}
	for i, f := range futs {
		select {
		case <-f.Ok():
			errs[i] = nil
		case err := <-f.Err():
			switch {
			case errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, nats.ErrNoResponders):
				errs[i] = fmt.Errorf("no JetStream stream captures subject %q (no responders)", subject)
			case errors.Is(err, jetstream.ErrAsyncPublishTimeout), errors.Is(err, nats.ErrConnectionClosed),
				errors.Is(err, nats.ErrDisconnected):
				errs[i] = fmt.Errorf("%w: %v", broker.ErrConnLost, err)
			case isFull(err):
				errs[i] = broker.BackPressure(fmt.Errorf("jetstream refused the message: %w", err))
			default:
				errs[i] = fmt.Errorf("jetstream refused the message: %w", err)
			}
		case <-conn.Done():
			errs[i] = fmt.Errorf("%w: %v", broker.ErrConnLost, p.Link.Err())
		case <-ctx.Done():
			errs[i] = fmt.Errorf("no PubAck: %w", ctx.Err())
		}
	}
	return errs
}

// jsStoreFailed is JetStream's error code of a message the stream would
// not store: with discard new, "maximum messages exceeded", "maximum
// bytes exceeded", "maximum messages per subject exceeded" (the server's
// JSStreamStoreFailedF).
const jsStoreFailed = 10077

// isFull reports a PubAck error that says the stream is full: the
// broker's back-pressure.
func isFull(err error) bool {
	var ae *jetstream.APIError
	return errors.As(err, &ae) && ae.ErrorCode == jsStoreFailed
}
