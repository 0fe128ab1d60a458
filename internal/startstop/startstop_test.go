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

// goLoop is a service started with Base.Go.
type goLoop struct {
	startstop.Base
	runs, exits atomic.Int32
}

func (l *goLoop) Start(ctx context.Context) error {
	return l.Go(ctx, func(ctx context.Context) {
		l.runs.Add(1)
		<-ctx.Done()
		time.Sleep(10 * time.Millisecond) // Stop must wait for the exit
		l.exits.Add(1)
	})
}

func TestGoRunsOnceAndStopWaits(t *testing.T) {
	t.Parallel()
	var l goLoop
	for range 3 {
		if err := l.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	<-l.Started()
	l.Stop()
	if r, e := l.runs.Load(), l.exits.Load(); r != 1 || e != 1 {
		t.Fatalf("runs %d, exits %d after Stop; want 1 and 1", r, e)
	}
	if err := l.Start(context.Background()); err != nil { // a stopped service starts again
		t.Fatal(err)
	}
	l.Stop()
	if r, e := l.runs.Load(), l.exits.Load(); r != 2 || e != 2 {
		t.Fatalf("runs %d, exits %d after a restart; want 2 and 2", r, e)
	}
}

func TestEveryCallsUntilCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	calls := make(chan struct{}, 1)
	done := make(chan struct{})
	var n atomic.Int32
	go func() {
		defer close(done)
		startstop.Every(ctx, time.Millisecond, func(got context.Context) {
			if got != ctx {
				t.Error("f was not given Every's context")
			}
			n.Add(1)
			select {
			case calls <- struct{}{}:
			default:
			}
		})
	}()
	for range 3 {
		<-calls
	}
	cancel()
	<-done // Every returns once ctx ends
	if got := n.Load(); got < 3 {
		t.Fatalf("%d calls before the cancel, want at least 3", got)
	}
}

func TestSleepEndsWithContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		startstop.Sleep(ctx, time.Hour)
	}()
	cancel()
	<-done // an hour's sleep returns once ctx ends
	// and a short one on its own
	startstop.Sleep(context.Background(), time.Millisecond)
}
