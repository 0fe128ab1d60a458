package deliver_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/deliver"
	"github.com/ontimehq/ontime/internal/stagetest"
)

// A destination that asks for a wait (a Retry-After) gets no call until
// it is over: what its lane holds and what is dispatched to it meanwhile
// is refused with a ThrottledError due at the end of the wait (no
// attempt made), other lanes go on, the breaker does not count it, and
// once the wait is over the lane calls again. MaxHold caps the wait.
func TestLaneHoldsOnRetryAfter(t *testing.T) {
	t.Parallel()
	disp, err := deliver.NewDispatcher(deliver.DispatcherConfig{PerDestConcurrency: 1, ShutdownGrace: time.Minute,
		MaxHold: 400 * time.Millisecond, Breaker: deliver.BreakerConfig{FailureThreshold: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if err := disp.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer disp.Stop()
	var mu sync.Mutex
	calls := map[string][]time.Time{}
	var asked atomic.Bool
	sink := deliver.HandlerFunc(func(ctx context.Context, d deliver.Delivery) error {
		mu.Lock()
		calls[d.Target] = append(calls[d.Target], time.Now())
		mu.Unlock()
		if d.Target == "http://slow" && asked.CompareAndSwap(false, true) {
			return deliver.RetryAfter(errors.New("HTTP 429"), time.Hour) // capped at MaxHold
		}
		return nil
	})
	type result struct {
		err error
		at  time.Time
	}
	results := make(chan result, 100)
	dispatch := func(dest string, n int) {
		jobs := make([]deliver.Job, n)
		for i := range jobs {
			jobs[i] = deliver.Job{Delivery: deliver.Delivery{ID: dest, Target: dest}, Done: func(err error) { results <- result{err, time.Now()} }}
		}
		disp.DispatchAll(context.Background(), dest, sink, jobs)
	}
	start := time.Now()
	dispatch("http://slow", 5) // the first asks for a wait; the four queued behind it are refused
	var throttled, asking int
	for range 5 {
		r := <-results
		var te *deliver.ThrottledError
		switch {
		case errors.As(r.err, &te):
			throttled++
			if !errors.Is(r.err, deliver.ErrThrottled) || te.Until.Sub(start) < 390*time.Millisecond || te.Until.Sub(start) > time.Second {
				t.Fatalf("refusal %v: until %s after the start; want the capped wait, 400ms", r.err, te.Until.Sub(start))
			}
		default:
			if d, ok := deliver.RetryAfterOf(r.err); !ok || d != time.Hour {
				t.Fatalf("the asking answer: %v", r.err)
			}
			asking++
		}
	}
	if throttled != 4 || asking != 1 {
		t.Fatalf("%d refused, %d asked; want 4 and 1", throttled, asking)
	}
	// Meanwhile: the lane refuses at once, another lane delivers.
	dispatch("http://slow", 1)
	if r := <-results; !errors.Is(r.err, deliver.ErrThrottled) {
		t.Fatalf("dispatched during the wait: %v", r.err)
	}
	dispatch("http://fast", 1)
	if r := <-results; r.err != nil {
		t.Fatalf("another lane: %v", r.err)
	}
	if st := disp.Stats()["http://slow"]; st.Breaker != "closed" {
		t.Fatalf("breaker %s: a Retry-After must not count against it", st.Breaker)
	}
	mu.Lock()
	if n := len(calls["http://slow"]); n != 1 {
		t.Fatalf("%d calls to the waiting destination during its wait", n)
	}
	mu.Unlock()
	// After the wait, the lane calls again.
	stagetest.Eventually(t, "the wait over", func() bool { return time.Since(start) > 450*time.Millisecond })
	dispatch("http://slow", 1)
	if r := <-results; r.err != nil {
		t.Fatalf("after the wait: %v", r.err)
	}
	mu.Lock()
	defer mu.Unlock()
	if c := calls["http://slow"]; len(c) != 2 || c[1].Sub(c[0]) < 400*time.Millisecond {
		t.Fatalf("calls to the waiting destination: %v", c)
	}
}
