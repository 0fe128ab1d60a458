package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/ontimehq/ontime/internal/startstop"
)

// Base is what every publisher embeds: the start-stop bookkeeping, the
// Link its publishes wait on, and a logger naming the broker.
type Base struct {
	startstop.Base
	Link *Link
	Log  *slog.Logger
}

// NewBase returns the base of the publisher of the broker the config names
// name; log may be nil.
func NewBase(name string, log *slog.Logger) *Base {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Base{Link: NewLink(), Log: log.With("broker", name)}
}

// Go is a publisher's Start: it runs keep in the background, once, until
// Stop, and returns at once. keep connects, keeps the connection up
// (marking Link) and returns when ctx ends; Publish waits on Link meanwhile.
func (b *Base) Go(ctx context.Context, keep func(ctx context.Context)) error {
	ctx, ok, started, stopped := b.StartInit(ctx)
	if !ok {
		return nil // already running
	}
	go func() {
		started()
		defer stopped()
		keep(ctx)
	}()
	return nil
}

// Backoff is the wait before try (0-based) of a reconnect or a republish:
// base·2^try capped at max, less up to a quarter of jitter, so connections
// that dropped together do not redial together.
func Backoff(try int, base, maxd time.Duration) time.Duration {
	d := maxd
	if try < 30 {
		d = min(base<<try, maxd)
	}
	return d - time.Duration(rand.Int64N(int64(d)/4+1))
}

// Link is a publisher's view of its connection: whether it is up, the
// error that took it down, and a context per connection, cancelled when
// that connection is lost, so a publish can tell that the connection it
// used is gone.
type Link struct {
	mu      sync.Mutex
	up      chan struct{}   // closed while connected
	conn    context.Context // of the current connection
	lost    context.CancelFunc
	lastErr error
}

// NewLink returns a link that is down.
func NewLink() *Link {
	conn, lost := context.WithCancel(context.Background())
	lost()
	return &Link{up: make(chan struct{}), conn: conn, lost: lost, lastErr: errors.New("not connected yet")}
}

// Up marks the connection up.
func (l *Link) Up() {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.up:
	default:
		l.conn, l.lost = context.WithCancel(context.Background())
		close(l.up)
	}
}

// Down marks the connection lost with err.
func (l *Link) Down(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil {
		err = errors.New("connection closed")
	}
	l.lastErr = err
	select {
	case <-l.up:
		l.up = make(chan struct{})
		l.lost()
	default:
	}
}

// Wait returns once the connection is up, with a context that ends when
// that connection is lost; or ctx's end, with the last connection error.
func (l *Link) Wait(ctx context.Context) (conn context.Context, err error) {
	l.mu.Lock()
	up := l.up
	l.mu.Unlock()
	select {
	case <-up:
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.up != up { // lost again meanwhile
			return nil, fmt.Errorf("%w: %v", ErrConnLost, l.lastErr)
		}
		return l.conn, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("not connected (%v): %w", l.Err(), ctx.Err())
	}
}

// Err is the error that last took the connection down.
func (l *Link) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastErr
}

// KeepUp keeps a publisher's connection up until ctx ends: it connects,
// marks link up and serves the connection until serve returns (the
// connection lost, or ctx's end), then connects again. A failed connect
// marks link down, is logged (failedMsg) on the first failure and every
// 20th, and is retried after Backoff(try, 100ms, 5s); the first success
// after failures is logged (againMsg). serve marks link down itself when
// the connection is lost; its error is logged unless ctx ended.
func KeepUp[S any](ctx context.Context, log *slog.Logger, link *Link, failedMsg, againMsg string,
	connect func(context.Context) (S, error), serve func(context.Context, S) error) {
	for try := 0; ctx.Err() == nil; {
		s, err := connect(ctx)
		if err != nil {
			link.Down(err)
			if try == 0 || try%20 == 0 {
				log.Warn(failedMsg, "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(Backoff(try, 100*time.Millisecond, 5*time.Second)):
			}
			try++
			continue
		}
		if try > 0 {
			log.Info(againMsg)
		}
		try = 0
		link.Up()
		err = serve(ctx, s)
		if ctx.Err() == nil {
			log.Warn("broker connection lost; reconnecting", "err", err)
		}
	}
}

// ReconnectDelay is the wait before reconnect try (0-based) of a client
// library that reconnects by itself (nats.go, autopaho): the Backoff that
// KeepUp uses.
func ReconnectDelay(try int) time.Duration {
	return Backoff(try, 100*time.Millisecond, 5*time.Second)
}
