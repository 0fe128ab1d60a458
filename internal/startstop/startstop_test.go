package startstop_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/startstop"
)

// loop is a minimal service: one goroutine that runs until stopped.
type loop struct {
	startstop.Base
	runs  atomic.Int32
	exits atomic.Int32
	cause atomic.Value
}

func (l *loop) Start(ctx context.Context) error {
	ctx, ok, started, stopped := l.StartInit(ctx)
	if !ok {
		return nil
	}
	go func() {
		defer stopped()
		l.runs.Add(1)
		started()
		<-ctx.Done()
		l.cause.Store(context.Cause(ctx))
		time.Sleep(10 * time.Millisecond) // exiting takes a moment: Stop must wait for it
		l.exits.Add(1)
	}()
	return nil
}

var _ startstop.Service = (*loop)(nil)

func TestStopBeforeStartReturns(t *testing.T) {
	t.Parallel()
	var l loop
	l.Stop()
	l.Stop()
	if got := l.runs.Load(); got != 0 {
		t.Fatalf("runs = %d, want 0", got)
	}
}

func TestStartIsIdempotentAndStartedCloses(t *testing.T) {
	t.Parallel()
	var l loop
	started := l.Started() // asked before Start: must close once it runs
	for range 3 {
		if err := l.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("Started not closed")
	}
	l.Stop()
	if got := l.runs.Load(); got != 1 {
		t.Fatalf("runs = %d, want 1 (a second Start of a running service does nothing)", got)
	}
	if c, _ := l.cause.Load().(error); !errors.Is(c, startstop.ErrStop) {
		t.Fatalf("cause = %v, want ErrStop", c)
	}
}

// Every concurrent Stop returns only after the service's goroutine exited;
// run under -race this also checks the bookkeeping is race free.
func TestConcurrentStop(t *testing.T) {
	t.Parallel()
	var l loop
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-l.Started()
	var wg sync.WaitGroup
	var early atomic.Int32
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.Stop()
			if l.exits.Load() != 1 {
				early.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := early.Load(); n != 0 {
		t.Fatalf("%d Stop calls returned before the service exited", n)
	}
	if got := l.exits.Load(); got != 1 {
		t.Fatalf("exits = %d, want 1", got)
	}
}

func TestRestartAfterStop(t *testing.T) {
	t.Parallel()
	var l loop
	for i := range 2 {
		if err := l.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		<-l.Started()
		l.Stop()
		if got := int(l.exits.Load()); got != i+1 {
			t.Fatalf("round %d: exits = %d", i, got)
		}
	}
}

func TestParentCancelStops(t *testing.T) {
	t.Parallel()
	var l loop
	ctx, cancel := context.WithCancel(context.Background())
	if err := l.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case <-l.Stopped():
	case <-time.After(5 * time.Second):
		t.Fatal("not stopped after the parent context ended")
	}
	l.Stop() // still fine afterwards
}

// failing fails to start.
type failing struct{ startstop.Base }

func (f *failing) Start(context.Context) error { return errors.New("boom") }

func TestStartAllStopsStartedOnFailure(t *testing.T) {
	t.Parallel()
	var a, b loop
	err := startstop.StartAll(context.Background(), &a, &b, &failing{})
	if err == nil {
		t.Fatal("want the failing service's error")
	}
	if a.exits.Load() != 1 || b.exits.Load() != 1 {
		t.Fatalf("exits a=%d b=%d: services started before the failure must be stopped", a.exits.Load(), b.exits.Load())
	}
}
