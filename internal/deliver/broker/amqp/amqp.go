// Package amqp publishes to RabbitMQ (AMQP 0-9-1) with publisher confirms
// and the mandatory flag: a message is delivered when the broker confirms
// it; a nack, or a return because no queue is bound for it, is a failed
// attempt with the broker's reason.
//
// One connection and one confirm-mode channel per broker carry every lane's
// publishes, pipelined: a publish takes the channel's next delivery tag,
// writes the message and waits for that tag's confirm, while other
// publishes go out behind it. One goroutine per connection reads confirms
// and returns. RabbitMQ sends a message's basic.return before its
// basic.ack, and the client hands them over in that order on channels this
// goroutine reads, so by the time a confirm resolves a publish, its return
// (if any) has been seen.
package amqp

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/ontimehq/ontime/internal/deliver/broker"
)

// CheckURL reports whether raw is an AMQP URL the client accepts.
func CheckURL(raw string) error {
	_, err := amqp.ParseURI(raw)
	return err
}

// Kind registers amqp:// and amqps:// URLs with a broker.Registry.
func Kind() broker.Kind {
	return broker.Kind{Schemes: []string{"amqp", "amqps"}, CheckURL: CheckURL,
		New: func(o broker.Options) (broker.Publisher, error) { return New(o) }}
}

// Publisher publishes to one RabbitMQ broker.
type Publisher struct {
	*broker.Base
	cfg broker.Options

	pubMu sync.Mutex // orders publishes: tag taken and message written together
	conn  *amqp.Connection
	ch    *amqp.Channel // nil while disconnected

	pendMu  sync.Mutex // never held while blocking
	pending map[uint64]*pending

	exMu      sync.Mutex
	exchanges map[string]bool // exchanges known to exist
}

type pending struct {
	id, attempt string
	exchange    string
	done        chan error // buffered 1; the confirm loop resolves it once
	returned    *amqp.Return
}

// New builds a publisher of an amqp:// or amqps:// URL; it connects once
// started.
func New(cfg broker.Options) (*Publisher, error) {
	if err := CheckURL(cfg.URL); err != nil {
		return nil, err
	}
	return &Publisher{Base: broker.NewBase(cfg.Name, cfg.Logger), cfg: cfg,
		pending: map[uint64]*pending{}, exchanges: map[string]bool{}}, nil
}

// Kind implements broker.Publisher.
func (p *Publisher) Kind() string { return "amqp" }

var exchangeName = regexp.MustCompile(`^[A-Za-z0-9_.:-]*$`)

// CheckAddress judges EXCHANGE/ROUTING_KEY; an empty EXCHANGE is the
// default exchange, whose routing key is a queue name.
func (p *Publisher) CheckAddress(address string) error { return CheckAddress(address) }

// CheckAddress is Publisher.CheckAddress without a publisher.
func CheckAddress(address string) error {
	exchange, key, ok := strings.Cut(address, "/")
	switch {
	case !ok:
		return errors.New("want EXCHANGE/ROUTING_KEY (mq://NAME//QUEUE for the default exchange)")
	case len(exchange) > 255:
		return fmt.Errorf("exchange is %d bytes; at most 255", len(exchange))
	case !exchangeName.MatchString(exchange):
		return fmt.Errorf("exchange %q: allowed are A-Z a-z 0-9 and : . _ -", exchange)
	case len(key) > 255:
		return fmt.Errorf("routing key is %d bytes; at most 255", len(key))
	case exchange == "" && key == "":
		return errors.New("the default exchange needs a queue name as routing key: mq://NAME//QUEUE")
	}
	return nil
}

// Start connects in the background and keeps the connection up until Stop.
func (p *Publisher) Start(ctx context.Context) error { return p.Go(ctx, p.run) }

// run connects, serves the connection until it is lost, and reconnects
// with backoff, until ctx ends.
func (p *Publisher) run(ctx context.Context) {
	broker.KeepUp(ctx, p.Log, p.Link, "broker connection failed; retrying", "broker connected",
		func(context.Context) (*session, error) { return p.connect() },
		func(ctx context.Context, s *session) error {
			err := p.serve(ctx, s)
			p.teardown(err)
			return err
		})
}

// session is one connection's notification channels.
type session struct {
	confirms  chan amqp.Confirmation
	returns   chan amqp.Return
	chClose   chan *amqp.Error
	connClose chan *amqp.Error
}

func (p *Publisher) connect() (*session, error) {
	conn, err := amqp.DialConfig(p.cfg.URL, amqp.Config{
		Heartbeat:  10 * time.Second,
		Locale:     "en_US",
		Properties: amqp.Table{"connection_name": "ontime " + p.cfg.Name},
		Dial:       amqp.DefaultDial(5 * time.Second),
	})
	if err != nil {
		return nil, err
	}
	ch, err := conn.Channel()
	if err != nil {
		conn.Close()
		return nil, err
	}
	if err := ch.Confirm(false); err != nil {
		conn.Close()
		return nil, fmt.Errorf("confirm mode: %w", err)
	}
	s := &session{
		// Confirms may queue (the client blocks on a full channel while
		// holding its own lock, so keep room); returns must not, so that a
		// message's return is taken before its confirm is handed over.
		confirms:  ch.NotifyPublish(make(chan amqp.Confirmation, 8192)),
		returns:   ch.NotifyReturn(make(chan amqp.Return)),
		chClose:   ch.NotifyClose(make(chan *amqp.Error, 1)),
		connClose: conn.NotifyClose(make(chan *amqp.Error, 1)),
	}
	p.pubMu.Lock()
	p.conn, p.ch = conn, ch
	p.pubMu.Unlock()
	return s, nil
}

// serve resolves publishes from confirms and returns until the channel or
// the connection closes (its error) or ctx ends.
func (p *Publisher) serve(ctx context.Context, s *session) error {
	confirms, returns := s.confirms, s.returns
	for {
		select {
		case <-ctx.Done():
			return errors.New("publisher stopped")
		case r, ok := <-returns:
			if !ok {
				returns = nil
				continue
			}
			p.markReturned(r)
		case c, ok := <-confirms:
			if !ok {
				confirms = nil
				continue
			}
			p.resolve(c)
		case e := <-s.chClose:
			if e == nil {
				return errors.New("channel closed")
			}
			return e
		case e := <-s.connClose:
			if e == nil {
				return errors.New("connection closed")
			}
			return e
		}
	}
}

func (p *Publisher) markReturned(r amqp.Return) {
	attempt, _ := r.Headers[broker.HeaderAttempt].(string)
	p.pendMu.Lock()
	defer p.pendMu.Unlock()
	// The oldest unconfirmed publish of this task and attempt: a return
	// precedes its own confirm, so it cannot be a confirmed one.
	var best uint64
	for tag, pd := range p.pending {
		if pd.returned == nil && pd.id == r.MessageId && pd.attempt == attempt && (best == 0 || tag < best) {
			best = tag
		}
	}
	if best != 0 {
		p.pending[best].returned = &r
	}
}

func (p *Publisher) resolve(c amqp.Confirmation) {
	p.pendMu.Lock()
	pd := p.pending[c.DeliveryTag]
	delete(p.pending, c.DeliveryTag)
	p.pendMu.Unlock()
	if pd == nil {
		return // its publisher gave up waiting
	}
	switch {
	case !c.Ack:
		// RabbitMQ nacks what a full queue refuses (x-overflow:
		// reject-publish) and what it could not store: back-pressure.
		pd.done <- broker.BackPressure(errors.New("the broker nacked the message (publisher confirm negative)"))
	case pd.returned != nil:
		r := pd.returned
		pd.done <- fmt.Errorf("unroutable: the broker returned the message: %d %s (exchange %q, routing key %q)",
			r.ReplyCode, r.ReplyText, r.Exchange, r.RoutingKey)
	default:
		pd.done <- nil
	}
}

// noExchange finds the exchange a 404 channel error names.
var noExchange = regexp.MustCompile(`no exchange '([^']*)'`)

// teardown ends a connection: publishes awaiting a confirm are failed with
// ErrConnLost (Set publishes them again), except those to an exchange the
// broker said does not exist, which fail with that reason.
func (p *Publisher) teardown(cause error) {
	p.Link.Down(cause)
	p.pubMu.Lock()
	conn := p.conn
	p.conn, p.ch = nil, nil
	p.pubMu.Unlock()
	var missing string
	var ae *amqp.Error
	if errors.As(cause, &ae) && ae.Code == amqp.NotFound {
		if m := noExchange.FindStringSubmatch(ae.Reason); m != nil {
			missing = m[1]
			p.exMu.Lock()
			delete(p.exchanges, missing)
			p.exMu.Unlock()
		}
	}
	p.pendMu.Lock()
	failed := p.pending
	p.pending = map[uint64]*pending{}
	p.pendMu.Unlock()
	for _, pd := range failed {
		if missing != "" && pd.exchange == missing {
			pd.done <- fmt.Errorf("exchange %q does not exist: %s", missing, ae.Reason)
		} else {
			pd.done <- fmt.Errorf("%w: %v", broker.ErrConnLost, cause)
		}
	}
	if conn != nil {
		_ = conn.Close()
	}
}

// Publish implements broker.Publisher.
func (p *Publisher) Publish(ctx context.Context, address string, m *broker.Message) error {
	return p.PublishBatch(ctx, address, []*broker.Message{m})[0]
}

// PublishBatch implements broker.BatchPublisher: the messages are written
// under one hold of the channel, each with its delivery tag, then every
// confirm is awaited.
func (p *Publisher) PublishBatch(ctx context.Context, address string, ms []*broker.Message) []error {
	errs := make([]error, len(ms))
	all := func(err error) []error {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	exchange, key, _ := strings.Cut(address, "/")
	if _, err := p.Link.Wait(ctx); err != nil {
		return all(err)
	}
	if err := p.checkExchange(ctx, exchange); err != nil {
		return all(err)
	}
	pds := make([]*pending, len(ms))
	tags := make([]uint64, len(ms))
	msgs := make([]amqp.Publishing, len(ms))
	now := time.Now()
	for i, m := range ms {
		headers := make(amqp.Table, len(m.Headers))
		for _, h := range m.Headers {
			headers[h.Name] = h.Value
		}
		if m.Traceparent != "" {
			headers[broker.HeaderTraceparent] = m.Traceparent
		}
		pds[i] = &pending{id: m.ID, attempt: m.Headers[1].Value, exchange: exchange, done: make(chan error, 1)}
		msgs[i] = amqp.Publishing{
			Headers:      headers,
			ContentType:  "application/json",
			DeliveryMode: amqp.Persistent,
			MessageId:    m.ID,
			Timestamp:    now,
			Body:         m.Body,
		}
	}
	p.pubMu.Lock()
	ch := p.ch
	if ch == nil {
		p.pubMu.Unlock()
		return all(fmt.Errorf("%w: %v", broker.ErrConnLost, p.Link.Err()))
	}
	for i := range ms {
		tags[i] = ch.GetNextPublishSeqNo()
		p.pendMu.Lock()
		p.pending[tags[i]] = pds[i]
		p.pendMu.Unlock()
		if err := ch.PublishWithContext(ctx, exchange, key, true, false, msgs[i]); err != nil {
			p.forget(tags[i], pds[i])
			if errors.Is(err, amqp.ErrClosed) {
				err = fmt.Errorf("%w: %v", broker.ErrConnLost, err)
			}
			for j := i; j < len(ms); j++ {
				errs[j] = err
				pds[j] = nil
			}
			break
		}
	}
	p.pubMu.Unlock()
	for i, pd := range pds {
		if pd == nil {
			continue
		}
		select {
		case errs[i] = <-pd.done:
		case <-ctx.Done():
			p.forget(tags[i], pd)
			errs[i] = fmt.Errorf("no publisher confirm: %w", ctx.Err())
		}
	}
	return errs
}

func (p *Publisher) forget(tag uint64, pd *pending) {
	p.pendMu.Lock()
	if p.pending[tag] == pd {
		delete(p.pending, tag)
	}
	p.pendMu.Unlock()
}

// checkExchange makes sure a named exchange exists before the first
// publish to it: publishing to a missing exchange closes the channel (404),
// failing every publish in flight on it. A passive declare on a channel of
// its own answers instead; an exchange that exists is remembered.
func (p *Publisher) checkExchange(ctx context.Context, exchange string) error {
	if exchange == "" {
		return nil
	}
	p.exMu.Lock()
	known := p.exchanges[exchange]
	p.exMu.Unlock()
	if known {
		return nil
	}
	p.pubMu.Lock()
	conn := p.conn
	p.pubMu.Unlock()
	if conn == nil {
		return fmt.Errorf("%w: %v", broker.ErrConnLost, p.Link.Err())
	}
	done := make(chan error, 1)
	go func() {
		ch, err := conn.Channel()
		if err != nil {
			done <- fmt.Errorf("%w: %v", broker.ErrConnLost, err)
			return
		}
		err = ch.ExchangeDeclarePassive(exchange, amqp.ExchangeDirect, false, false, false, false, nil)
		var ae *amqp.Error
		switch {
		case err == nil:
			_ = ch.Close()
		case errors.As(err, &ae) && ae.Code == amqp.NotFound:
			err = fmt.Errorf("exchange %q does not exist: %s", exchange, ae.Reason)
		case errors.As(err, &ae):
			err = fmt.Errorf("exchange %q: %s", exchange, ae.Reason)
		default:
			err = fmt.Errorf("%w: %v", broker.ErrConnLost, err)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			p.exMu.Lock()
			p.exchanges[exchange] = true
			p.exMu.Unlock()
		}
		return err
	case <-ctx.Done():
		return fmt.Errorf("checking exchange %q: %w", exchange, ctx.Err())
	}
}
