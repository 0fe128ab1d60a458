package complete_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/complete"
	"github.com/ontimehq/ontime/internal/stagetest"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/store/sqlstore"
	"github.com/ontimehq/ontime/internal/task"
)

// finishLog is the real store noting the size of each outcome write.
type finishLog struct {
	*sqlstore.Store
	mu    sync.Mutex
	sizes []int
}

func (f *finishLog) Finish(ctx context.Context, outs []store.Outcome) error {
	f.mu.Lock()
	f.sizes = append(f.sizes, len(outs))
	f.mu.Unlock()
	return f.Store.Finish(ctx, outs)
}

func (f *finishLog) log() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.sizes)
}

// The first outcome of an idle node is written at once; outcomes arriving
// within the flush gap after a write are not written one transaction each
// (each taking the store's writer from the submits) but together when the
// gap ends. The gap's timer is the test's: what is asserted is which
// outcomes share a write, not how long anything took.
func TestFlushGapGathersOutcomes(t *testing.T) {
	t.Parallel()
	st := stagetest.Store(t)
	tasks := startedTasks(t, st, 4, time.Minute)
	fl := &finishLog{Store: st}
	c, err := complete.New(complete.Config{Store: fl, Lease: time.Minute, FlushGap: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	gap := make(chan time.Time)
	waiting := make(chan struct{}, 1)
	complete.SetGapTimer(c, func(time.Duration) <-chan time.Time {
		select {
		case waiting <- struct{}{}:
		default:
		}
		return gap
	})
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.Expect(tasks, time.Now().Add(time.Minute))
	c.Finish(tasks[0], nil)
	stagetest.Eventually(t, "first outcome written", func() bool { return c.Busy() == int64(len(tasks)-1) })
	<-waiting // the writer waits out the gap (an hour, unless the test ends it)
	for _, tk := range tasks[1:] {
		c.Finish(tk, nil)
	}
	if got := fl.log(); !slices.Equal(got, []int{1}) {
		t.Fatalf("writes during the gap: %v; want only the first, of 1", got)
	}
	close(gap)
	stagetest.Eventually(t, "every outcome written", func() bool { return c.Busy() == 0 })
	c.Stop()
	if got := fl.log(); !slices.Equal(got, []int{1, 3}) {
		t.Fatalf("writes of %v outcomes; want [1 3]: the first at once, the three of the gap together", got)
	}
	if n := stagetest.Count(t, st, task.StatusDone); n != int64(len(tasks)) {
		t.Fatalf("%d done, want %d", n, len(tasks))
	}
}

// Stopping does not wait for the gap: the outcomes queued are written at
// once, however long the gap.
func TestStopWritesWithoutTheGap(t *testing.T) {
	t.Parallel()
	st := stagetest.Store(t)
	tasks := startedTasks(t, st, 3, time.Minute)
	c, err := complete.New(complete.Config{Store: st, Lease: time.Minute, FlushGap: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	waiting := make(chan struct{}, 1)
	complete.SetGapTimer(c, func(time.Duration) <-chan time.Time {
		select {
		case waiting <- struct{}{}:
		default:
		}
		return nil // never ends
	})
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.Expect(tasks, time.Now().Add(time.Minute))
	c.Finish(tasks[0], nil)
	<-waiting
	for _, tk := range tasks[1:] {
		c.Finish(tk, nil)
	}
	c.Stop()
	if n := stagetest.Count(t, st, task.StatusDone); n != int64(len(tasks)) {
		t.Fatalf("%d done after Stop, want %d", n, len(tasks))
	}
}
