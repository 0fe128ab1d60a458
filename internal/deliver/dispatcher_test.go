package deliver

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type result struct {
	mu   sync.Mutex
	errs map[string]error
	wg   sync.WaitGroup
}

func newResult(n int) *result {
	r := &result{errs: map[string]error{}}
	r.wg.Add(n)
	return r
}

func (r *result) done(id string) func(error) {
	return func(err error) {
		r.mu.Lock()
		if _, dup := r.errs[id]; dup {
			panic("done called twice for " + id)
		}
		r.errs[id] = err
		r.mu.Unlock()
		r.wg.Done()
	}
}

func waitGroup(t *testing.T, wg *sync.WaitGroup, d time.Duration) {
	t.Helper()
	c := make(chan struct{})
	go func() { wg.Wait(); close(c) }()
	select {
	case <-c:
	case <-time.After(d):
		t.Fatalf("not done within %s", d)
	}
}

// A hanging destination fills only its own lane: every delivery to another
// destination completes while it hangs.
func TestHangingDestinationIsolated(t *testing.T) {
	p, err := NewDispatcher(DispatcherConfig{PerDestConcurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	startDispatcher(t, p)
	release := make(chan struct{})
	var inSlow, maxSlow atomic.Int32
	slow := HandlerFunc(func(ctx context.Context, d Delivery) error {
		n := inSlow.Add(1)
		for {
			m := maxSlow.Load()
			if n <= m || maxSlow.CompareAndSwap(m, n) {
				break
			}
		}
		<-release
		inSlow.Add(-1)
		return nil
	})
	fast := HandlerFunc(func(ctx context.Context, d Delivery) error { return nil })
	ctx := context.Background()
	rs, rf := newResult(50), newResult(200)
	for i := range 50 {
		dispatchOne(p, ctx, "slow", slow, Delivery{ID: fmt.Sprint("s", i)}, rs.done(fmt.Sprint("s", i)))
	}
	for i := range 200 {
		dispatchOne(p, ctx, "fast", fast, Delivery{ID: fmt.Sprint("f", i)}, rf.done(fmt.Sprint("f", i)))
	}
	waitGroup(t, &rf.wg, 10*time.Second)
	for id, err := range rf.errs {
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
	// The slow lane's workers start as the scheduler gets to them; once they
	// have, exactly the limit is in flight and the rest waits in its queue.
	deadline := time.Now().Add(10 * time.Second)
	for p.Stats()["slow"].InFlight < 4 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if st := p.Stats()["slow"]; st.InFlight != 4 || st.Queued != 46 {
		t.Fatalf("slow lane: %+v, want 4 in flight and 46 queued", st)
	}
	close(release)
	waitGroup(t, &rs.wg, 10*time.Second)
	if m := maxSlow.Load(); m != 4 {
		t.Fatalf("slow destination saw %d concurrent deliveries, limit 4", m)
	}
	p.Stop()
}

func TestBreakerOpensFailsFastAndRecovers(t *testing.T) {
	p, _ := NewDispatcher(DispatcherConfig{PerDestConcurrency: 1, Breaker: BreakerConfig{FailureThreshold: 3, OpenFor: 300 * time.Millisecond}})
	startDispatcher(t, p)
	var calls atomic.Int32
	var healthy atomic.Bool
	sink := HandlerFunc(func(ctx context.Context, d Delivery) error {
		calls.Add(1)
		if healthy.Load() {
			return nil
		}
		return errors.New("boom")
	})
	ctx := context.Background()
	r := newResult(3)
	for i := range 3 {
		dispatchOne(p, ctx, "d", sink, Delivery{}, r.done(fmt.Sprint(i)))
	}
	waitGroup(t, &r.wg, 5*time.Second)
	// Open: fails fast without calling the sink.
	r2 := newResult(1)
	dispatchOne(p, ctx, "d", sink, Delivery{}, r2.done("x"))
	waitGroup(t, &r2.wg, 5*time.Second)
	if !errors.Is(r2.errs["x"], ErrCircuitOpen) || calls.Load() != 3 {
		t.Fatalf("open breaker: err %v, calls %d", r2.errs["x"], calls.Load())
	}
	if p.Stats()["d"].Breaker != "open" {
		t.Fatalf("stats %+v", p.Stats()["d"])
	}
	// After OpenFor a probe goes through; success closes the breaker.
	healthy.Store(true)
	time.Sleep(400 * time.Millisecond)
	r3 := newResult(1)
	dispatchOne(p, ctx, "d", sink, Delivery{}, r3.done("probe"))
	waitGroup(t, &r3.wg, 5*time.Second)
	if r3.errs["probe"] != nil {
		t.Fatalf("probe: %v", r3.errs["probe"])
	}
	r4 := newResult(5)
	for i := range 5 {
		dispatchOne(p, ctx, "d", sink, Delivery{}, r4.done(fmt.Sprint(i)))
	}
	waitGroup(t, &r4.wg, 5*time.Second)
	for _, err := range r4.errs {
		if err != nil {
			t.Fatalf("after recovery: %v", err)
		}
	}
}

func TestLaneFullAndStop(t *testing.T) {
	p, _ := NewDispatcher(DispatcherConfig{PerDestConcurrency: 1, PerDestQueue: 2})
	startDispatcher(t, p)
	block := make(chan struct{})
	sink := HandlerFunc(func(ctx context.Context, d Delivery) error { <-block; return nil })
	ctx := context.Background()
	r := newResult(4)
	for i := range 4 {
		dispatchOne(p, ctx, "d", sink, Delivery{}, r.done(fmt.Sprint(i)))
		time.Sleep(20 * time.Millisecond) // let the worker take the first
	}
	// 1 in flight + 2 queued; the 4th is refused.
	r.mu.Lock()
	full := r.errs["3"]
	r.mu.Unlock()
	if !errors.Is(full, ErrLaneFull) {
		t.Fatalf("4th dispatch: %v, want ErrLaneFull", full)
	}
	stopped := make(chan struct{})
	go func() { p.Stop(); close(stopped) }()
	time.Sleep(50 * time.Millisecond)
	r5 := newResult(1)
	dispatchOne(p, ctx, "d", sink, Delivery{}, r5.done("late"))
	if !errors.Is(r5.errs["late"], ErrStopped) {
		t.Fatalf("dispatch after stop: %v", r5.errs["late"])
	}
	select {
	case <-stopped:
		t.Fatal("Stop returned with deliveries in flight")
	default:
	}
	close(block)
	<-stopped
	waitGroup(t, &r.wg, 5*time.Second)
	// Idle lanes leave no goroutine behind.
	p2, _ := NewDispatcher(DispatcherConfig{})
	startDispatcher(t, p2)
	base := runtime.NumGoroutine()
	r6 := newResult(100)
	for i := range 100 {
		dispatchOne(p2, ctx, fmt.Sprint("dest", i), HandlerFunc(func(context.Context, Delivery) error { return nil }), Delivery{}, r6.done(fmt.Sprint(i)))
	}
	waitGroup(t, &r6.wg, 5*time.Second)
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base+2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > base+2 {
		t.Fatalf("%d goroutines left after 100 idle lanes (base %d)", n, base)
	}
	// A lane retires when its last worker finds the queue empty, just after
	// the last done callback: allow it that moment.
	for len(p2.Stats()) != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := len(p2.Stats()); n != 0 {
		t.Fatalf("idle lanes not retired: %d", n)
	}
}

func TestRetryPolicy(t *testing.T) {
	p := RetryPolicy{Base: time.Second, Max: time.Hour, Jitter: 0.2}
	mid := func() float64 { return 0.5 } // no jitter
	for a, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 5: 16 * time.Second, 13: time.Hour, 1000: time.Hour} {
		if got := p.Next(a, mid); got != want {
			t.Errorf("attempt %d: %s, want %s", a, got, want)
		}
	}
	lo, hi := p.Next(3, func() float64 { return 0 }), p.Next(3, func() float64 { return 0.999999 })
	if lo != time.Duration(float64(4*time.Second)*0.8) || hi < 4*time.Second || hi > time.Duration(float64(4*time.Second)*1.2) {
		t.Fatalf("jitter bounds: %s .. %s", lo, hi)
	}
	if d := (RetryPolicy{}).Next(math.MaxInt32, nil); d <= 0 || d > 2*time.Hour {
		t.Fatalf("huge attempt: %s", d)
	}
}

func TestPermanentAndPanic(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", Permanent(errors.New("bad payload")))
	if !IsPermanent(err) || IsPermanent(errors.New("x")) || Permanent(nil) != nil {
		t.Fatal("Permanent/IsPermanent")
	}
	h := HandlerFunc(func(context.Context, Delivery) error { panic("oops") })
	if err := h.Deliver(context.Background(), Delivery{}); err == nil {
		t.Fatal("a panicking handler returned nil")
	}
}

func BenchmarkDispatchNoop(b *testing.B) {
	p, _ := NewDispatcher(DispatcherConfig{})
	startDispatcher(b, p)
	sink := HandlerFunc(func(context.Context, Delivery) error { return nil })
	var wg sync.WaitGroup
	ctx := context.Background()
	for b.Loop() {
		wg.Add(1)
		dispatchOne(p, ctx, "d", sink, Delivery{}, func(error) { wg.Done() })
	}
	wg.Wait()
}

// DispatchAll queues what fits, refuses the rest with ErrLaneFull, and
// runs the queue with never more deliveries at once than
// PerDestConcurrency, each job exactly once.
func TestDispatchAllBurst(t *testing.T) {
	const conc, queue, n = 8, 40000, 50000
	p, err := NewDispatcher(DispatcherConfig{PerDestConcurrency: conc, PerDestQueue: queue})
	if err != nil {
		t.Fatal(err)
	}
	startDispatcher(t, p)
	gate := make(chan struct{})
	var running, peak atomic.Int32
	var delivered sync.Map
	sink := HandlerFunc(func(ctx context.Context, d Delivery) error {
		<-gate
		k := running.Add(1)
		for {
			m := peak.Load()
			if k <= m || peak.CompareAndSwap(m, k) {
				break
			}
		}
		if _, dup := delivered.LoadOrStore(d.ID, true); dup {
			t.Errorf("%s delivered twice", d.ID)
		}
		running.Add(-1)
		return nil
	})
	r := newResult(n)
	jobs := make([]Job, n)
	for i := range jobs {
		id := fmt.Sprint(i)
		jobs[i] = Job{Delivery: Delivery{ID: id}, Done: r.done(id)}
	}
	ctx := context.Background()
	p.DispatchAll(ctx, "d", sink, jobs[:n/2])
	p.DispatchAll(ctx, "d", sink, jobs[n/2:])
	close(gate)
	waitGroup(t, &r.wg, 30*time.Second)
	full, ok := 0, 0
	for i := range n {
		switch err := r.errs[fmt.Sprint(i)]; {
		case err == nil:
			ok++
		case errors.Is(err, ErrLaneFull):
			full++
			if i < queue {
				t.Fatalf("job %d refused while the lane had room", i)
			}
		default:
			t.Fatalf("job %d: %v", i, err)
		}
	}
	// The gate holds the first job of each worker, so at most conc jobs
	// left the queue before it filled.
	if ok < queue || ok > queue+conc || ok+full != n {
		t.Fatalf("%d delivered, %d refused; want about %d delivered", ok, full, queue)
	}
	if m := peak.Load(); m > conc {
		t.Fatalf("%d deliveries at once, concurrency is %d", m, conc)
	}
	st := p.Stats()["d"]
	if st.Queued != 0 || st.InFlight != 0 {
		t.Fatalf("after the burst: %+v", st)
	}
}

// BenchmarkDispatchAllBurst: a burst of 50,000 in batches of 200 from 250
// goroutines, as the engine releases tasks due at one instant.
func BenchmarkDispatchAllBurst(b *testing.B) {
	p, _ := NewDispatcher(DispatcherConfig{PerDestConcurrency: 64, PerDestQueue: 1 << 20})
	startDispatcher(b, p)
	sink := HandlerFunc(func(context.Context, Delivery) error { return nil })
	ctx := context.Background()
	for b.Loop() {
		var wg sync.WaitGroup
		wg.Add(50000)
		var senders sync.WaitGroup
		for range 250 {
			senders.Add(1)
			go func() {
				defer senders.Done()
				jobs := make([]Job, 200)
				for i := range jobs {
					jobs[i] = Job{Done: func(error) { wg.Done() }}
				}
				p.DispatchAll(ctx, "d", sink, jobs)
			}()
		}
		senders.Wait()
		wg.Wait()
	}
	b.ReportMetric(float64(b.N*50000)/b.Elapsed().Seconds(), "deliveries/s")
}

// dispatchOne queues one delivery.
func dispatchOne(p *Dispatcher, ctx context.Context, dest string, sink Sink, d Delivery, done func(error)) {
	p.DispatchAll(ctx, dest, sink, []Job{{Delivery: d, Done: done}})
}

// startDispatcher starts p and stops it when the test ends.
func startDispatcher(tb testing.TB, p *Dispatcher) {
	tb.Helper()
	if err := p.Start(context.Background()); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(p.Stop)
}

// A delivery that waits on its context (a Go handler that honours it) ends
// when the shutdown grace has passed: Stop cannot hang on it.
func TestStopCancelsInFlightAfterGrace(t *testing.T) {
	p, err := NewDispatcher(DispatcherConfig{ShutdownGrace: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	entered := make(chan struct{})
	sink := HandlerFunc(func(ctx context.Context, d Delivery) error {
		close(entered)
		<-ctx.Done()
		return ctx.Err()
	})
	r := newResult(1)
	dispatchOne(p, p.Context(), "d", sink, Delivery{}, r.done("x"))
	<-entered
	stopped := make(chan struct{})
	go func() { p.Stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(30 * time.Second):
		t.Fatal("Stop hangs on a delivery that waits for its context")
	}
	waitGroup(t, &r.wg, 5*time.Second)
	if !errors.Is(r.errs["x"], context.Canceled) {
		t.Fatalf("in-flight delivery ended with %v, want context.Canceled", r.errs["x"])
	}
	if p.Context().Err() == nil {
		t.Fatal("Context still live after Stop")
	}
}
