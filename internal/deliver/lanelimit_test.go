package deliver_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/deliver"
	"github.com/ontimehq/ontime/internal/stagetest"
)

// TestLaneConcurrencyOverride: destinations Lanes gives a limit run that
// many deliveries at once; the others keep PerDestConcurrency.
func TestLaneConcurrencyOverride(t *testing.T) {
	t.Parallel()
	disp, err := deliver.NewDispatcher(deliver.DispatcherConfig{PerDestConcurrency: 2, ShutdownGrace: time.Minute,
		Lanes: func(dest string) deliver.LaneConfig {
			if strings.HasPrefix(dest, "mq://") {
				return deliver.LaneConfig{Limit: 50}
			}
			return deliver.LaneConfig{}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := disp.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer disp.Stop()
	release := make(chan struct{})
	var mu sync.Mutex
	inFlight, peak := map[string]int{}, map[string]int{}
	sink := deliver.HandlerFunc(func(ctx context.Context, d deliver.Delivery) error {
		mu.Lock()
		inFlight[d.Target]++
		peak[d.Target] = max(peak[d.Target], inFlight[d.Target])
		mu.Unlock()
		<-release
		mu.Lock()
		inFlight[d.Target]--
		mu.Unlock()
		return nil
	})
	var done atomic.Int64
	for _, dest := range []string{"mq://b/x", "http://h"} {
		jobs := make([]deliver.Job, 100)
		for i := range jobs {
			jobs[i] = deliver.Job{Delivery: deliver.Delivery{ID: dest, Target: dest}, Done: func(error) { done.Add(1) }}
		}
		disp.DispatchAll(context.Background(), dest, sink, jobs)
	}
	stagetest.Eventually(t, "lanes full", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return inFlight["mq://b/x"] == 50 && inFlight["http://h"] == 2
	})
	close(release)
	stagetest.Eventually(t, "all done", func() bool { return done.Load() == 200 })
	if peak["mq://b/x"] != 50 || peak["http://h"] != 2 {
		t.Errorf("peaks %v; want 50 for the broker lane, 2 for the webhook", peak)
	}
}

// batchSink records batch sizes and deliveries in flight; fail makes every
// delivery fail.
type batchSink struct {
	mu                   sync.Mutex
	inFlight, peak, most int
	singles              int // calls of Deliver
	batch                int // BatchSize; 0: deliver.MaxBatch
	seen                 map[string]int
	fail                 error
}

func (b *batchSink) Deliver(ctx context.Context, d deliver.Delivery) error {
	b.mu.Lock()
	b.singles++
	b.mu.Unlock()
	return b.DeliverBatch(ctx, []deliver.Delivery{d})[0]
}

func (b *batchSink) BatchSize(string) int {
	if b.batch == 0 {
		return deliver.MaxBatch
	}
	return b.batch
}

func (b *batchSink) DeliverBatch(ctx context.Context, ds []deliver.Delivery) []error {
	b.mu.Lock()
	b.inFlight += len(ds)
	b.peak = max(b.peak, b.inFlight)
	b.most = max(b.most, len(ds))
	for _, d := range ds {
		b.seen[d.ID]++
	}
	b.mu.Unlock()
	time.Sleep(time.Millisecond)
	b.mu.Lock()
	b.inFlight -= len(ds)
	b.mu.Unlock()
	errs := make([]error, len(ds))
	for i := range errs {
		errs[i] = b.fail
	}
	return errs
}

// TestBatchLanes: a BatchSink's lane hands it batches of at most MaxBatch
// within the lane's limit, delivers every job once, and its breaker opens
// on failures like any lane's.
func TestBatchLanes(t *testing.T) {
	t.Parallel()
	disp, err := deliver.NewDispatcher(deliver.DispatcherConfig{PerDestConcurrency: 300, ShutdownGrace: time.Minute,
		Breaker: deliver.BreakerConfig{FailureThreshold: 5, OpenFor: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	if err := disp.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer disp.Stop()
	sink := &batchSink{seen: map[string]int{}}
	var mu sync.Mutex
	outcomes := map[string]error{}
	const n = 5000
	jobs := make([]deliver.Job, n)
	for i := range jobs {
		id := "j" + strconv.Itoa(i)
		jobs[i] = deliver.Job{Delivery: deliver.Delivery{ID: id, Target: "mq://b/x"}, Done: func(err error) {
			mu.Lock()
			defer mu.Unlock()
			if _, dup := outcomes[id]; dup {
				t.Errorf("job %s: outcome twice", id)
			}
			outcomes[id] = err
		}}
	}
	disp.DispatchAll(context.Background(), "mq://b/x", sink, jobs)
	stagetest.Eventually(t, "all outcomes", func() bool { mu.Lock(); defer mu.Unlock(); return len(outcomes) == n })
	for id, err := range outcomes {
		if err != nil || sink.seen[id] != 1 {
			t.Fatalf("job %s: %v, delivered %d times", id, err, sink.seen[id])
		}
	}
	if sink.peak > 300 || sink.most > deliver.MaxBatch || sink.most < 2 {
		t.Errorf("peak in flight %d (limit 300), largest batch %d (at most %d, and batching at all)", sink.peak, sink.most, deliver.MaxBatch)
	}

	failing := &batchSink{seen: map[string]int{}, fail: errors.New("NO_ROUTE")}
	var opened atomic.Int64
	var refused atomic.Int64
	jobs = make([]deliver.Job, 1000)
	for i := range jobs {
		jobs[i] = deliver.Job{Delivery: deliver.Delivery{ID: strconv.Itoa(i)}, Done: func(err error) {
			opened.Add(1)
			if errors.Is(err, deliver.ErrCircuitOpen) {
				refused.Add(1)
			}
		}}
	}
	disp.DispatchAll(context.Background(), "mq://b/dead", failing, jobs)
	stagetest.Eventually(t, "all failed", func() bool { return opened.Load() == 1000 })
	if refused.Load() == 0 {
		t.Error("the breaker never opened")
	}
	if s := disp.Stats()["mq://b/dead"]; s.Breaker != "open" {
		t.Errorf("breaker %q", s.Breaker)
	}
}

// TestLaneBatchAndRate: a BatchSink's BatchSize sets its lane's batch (a
// batch size of 1 delivers one at a time, by Deliver); LaneConfig sets the
// lane's limit and rate: calls never come faster than the rate allows.
func TestLaneBatchAndRate(t *testing.T) {
	t.Parallel()
	cfgs := map[string]deliver.LaneConfig{
		"http://batch": {Limit: 30},
		"http://rated": {Rate: 40, Burst: 1},
	}
	batches := map[string]int{"http://batch": 10, "http://single": 1, "http://rated": 5}
	disp, err := deliver.NewDispatcher(deliver.DispatcherConfig{PerDestConcurrency: 4, ShutdownGrace: time.Minute,
		Lanes: func(dest string) deliver.LaneConfig { return cfgs[dest] }})
	if err != nil {
		t.Fatal(err)
	}
	if err := disp.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer disp.Stop()
	run := func(dest string, n int) *batchSink {
		sink := &batchSink{seen: map[string]int{}, batch: batches[dest]}
		var done atomic.Int64
		jobs := make([]deliver.Job, n)
		for i := range jobs {
			jobs[i] = deliver.Job{Delivery: deliver.Delivery{ID: strconv.Itoa(i), Target: dest}, Done: func(err error) {
				if err != nil {
					t.Errorf("%s: %v", dest, err)
				}
				done.Add(1)
			}}
		}
		disp.DispatchAll(context.Background(), dest, sink, jobs)
		stagetest.Eventually(t, dest+" done", func() bool { return done.Load() == int64(n) })
		for i := range n {
			if sink.seen[strconv.Itoa(i)] != 1 {
				t.Fatalf("%s: job %d delivered %d times", dest, i, sink.seen[strconv.Itoa(i)])
			}
		}
		return sink
	}
	if b := run("http://batch", 1000); b.most > 10 || b.most < 2 || b.peak > 30 || b.singles > 0 {
		t.Errorf("batch lane: largest batch %d (2..10), peak in flight %d (≤ 30), %d single calls", b.most, b.peak, b.singles)
	}
	if b := run("http://single", 50); b.singles != 50 || b.most != 1 {
		t.Errorf("batch-1 lane: %d single calls of 50, largest batch %d", b.singles, b.most)
	}
	// 100 jobs in batches of 5 are 20 calls or more; at 40/s after a
	// burst of 1, the last cannot start before 19/40 s.
	start := time.Now()
	sink := run("http://rated", 100)
	if took, least := time.Since(start), 19*time.Second/40; took < least*95/100 {
		t.Errorf("100 jobs, batches of ≤ 5, 40 calls/s: done in %s; the rate allows no less than %s", took, least)
	}
	if sink.most > 5 {
		t.Errorf("rated lane: batch of %d", sink.most)
	}
}
