// Package startstop is the one lifecycle every background service of a node
// has (modelled on river's rivershared/startstop): Start(ctx) launches the
// service's goroutines and returns at once, Stop() ends them and returns when
// they have exited, and may be called any number of times, from any number
// of goroutines, before or after Start. Started() is closed once the service
// runs.
//
// A service embeds Base. One whose work is one goroutine writes its Start
// as
//
//	func (s *S) Start(ctx context.Context) error {
//		return s.Go(ctx, s.run) // run returns when ctx is cancelled
//	}
//
// and one with several goroutines (or work to do before they run) uses
// StartInit, as Go does, calling started() once they run and stopped() when
// the last has exited. When stopping takes more than cancelling the context
// (flushing a queue, draining a lane), the service overrides Stop to do
// that work around StopInit/the stopped signal. Whoever builds a service
// stops it. Every is the loop of a service that wakes on a period.
package startstop

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrStop is the cause of the context a service runs with once Stop was
// called (context.Cause), so a service can tell a stop from its parent
// context ending.
var ErrStop = errors.New("service stopped")

// Service is what the node's composition root starts in pipeline order and
// stops in reverse.
type Service interface {
	// Start launches the service and returns without blocking. Starting a
	// running service does nothing.
	Start(ctx context.Context) error
	// Stop ends the service and waits until its goroutines have exited.
	// Idempotent and safe to call concurrently.
	Stop()
	// Started is closed once the service runs.
	Started() <-chan struct{}
}

// Base does the bookkeeping of Service. The zero value is ready to use.
type Base struct {
	mu      sync.Mutex
	cancel  context.CancelCauseFunc
	started chan struct{}
	stopped chan struct{}
	running bool
}

// StartInit prepares a start. ok is false when the service is already
// running (nothing to do). Otherwise the caller launches its goroutines with
// ctx (cancelled by Stop), calls started() once they run and stopped() when
// the last of them exits. ctx does not end with the parent's cancellation of
// values only: it is derived from parent, so cancelling parent stops the
// service too.
func (b *Base) StartInit(parent context.Context) (ctx context.Context, ok bool, started, stopped func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.running {
		return nil, false, nil, nil
	}
	b.running = true
	ctx, b.cancel = context.WithCancelCause(parent)
	startedCh := make(chan struct{})
	if b.started == nil || isClosed(b.started) {
		b.started = startedCh
	} else {
		startedCh = b.started // someone already waits on this one
	}
	stoppedCh := make(chan struct{})
	b.stopped = stoppedCh
	var once1, once2 sync.Once
	return ctx, true, func() { once1.Do(func() { close(startedCh) }) }, func() { once2.Do(func() { close(stoppedCh) }) }
}

// Go is the Start of a service whose work is one goroutine: it runs
// run(ctx) until ctx ends (Stop, or the parent's end), and does nothing
// when the service is already running.
func (b *Base) Go(ctx context.Context, run func(ctx context.Context)) error {
	ctx, ok, started, stopped := b.StartInit(ctx)
	if !ok {
		return nil
	}
	go func() {
		started()
		defer stopped()
		run(ctx)
	}()
	return nil
}

// Every calls f(ctx) every d until ctx ends, the first time d from now. A
// call that takes longer than d is followed by the next at once, and the
// periods it overran are skipped (a time.Ticker's drops).
func Every(ctx context.Context, d time.Duration, f func(ctx context.Context)) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		f(ctx)
	}
}

// Sleep waits d, or less when ctx ends first.
func Sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// StopInit begins a stop: it cancels the service's context and returns the
// channel closed when the service has stopped. ok is false when the
// service is not running (never started, or already stopped).
func (b *Base) StopInit() (stopped <-chan struct{}, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.running {
		return b.stopped, false
	}
	b.running = false
	b.cancel(ErrStop)
	return b.stopped, true
}

// Stop cancels the service's context and waits for it to stop. Every
// concurrent caller returns only once the service has stopped.
func (b *Base) Stop() {
	stopped, _ := b.StopInit()
	if stopped != nil {
		<-stopped
	}
}

// Started returns a channel closed once the service runs.
func (b *Base) Started() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.started == nil {
		b.started = make(chan struct{})
	}
	return b.started
}

// Stopped returns a channel closed once the service has stopped; nil
// before the first Start.
func (b *Base) Stopped() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stopped
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// StartAll starts services in order. If one fails, those already started
// are stopped in reverse order and its error is returned.
func StartAll(ctx context.Context, services ...Service) error {
	for i, s := range services {
		if err := s.Start(ctx); err != nil {
			StopAllReverse(services[:i]...)
			return err
		}
	}
	return nil
}

// StopAllReverse stops services in reverse order, each after the one after
// it has stopped: senders before receivers when services are listed in
// pipeline order.
func StopAllReverse(services ...Service) {
	for i := len(services) - 1; i >= 0; i-- {
		services[i].Stop()
	}
}
