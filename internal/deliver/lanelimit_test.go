package deliver_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/deliver"
	"github.com/ontimehq/ontime/internal/stagetest"
)

// TestLaneConcurrencyOverride: destinations LaneConcurrency answers for
// run that many deliveries at once; the others keep PerDestConcurrency.
func TestLaneConcurrencyOverride(t *testing.T) {
	t.Parallel()
	disp, err := deliver.NewDispatcher(deliver.DispatcherConfig{PerDestConcurrency: 2, ShutdownGrace: time.Minute,
		LaneConcurrency: func(dest string) int {
			if strings.HasPrefix(dest, "mq://") {
				return 50
			}
			return 0
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
