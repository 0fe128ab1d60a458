package deliver

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/task"
)

type wgOutcomes struct{ wg *sync.WaitGroup }

func (o wgOutcomes) Finish(*task.Task, error) { o.wg.Done() }

// BenchmarkRouterSend: the router's cost per task on the delivery path —
// lateness, the per-topic series, the lane, the answer — with a sink that
// answers at once: 100 due tasks of 50 topics per Send, to one webhook
// destination. Per-topic metrics must not show here (issue 27):
//
//	go test ./internal/deliver -run '^$' -bench RouterSend -count 6
func BenchmarkRouterSend(b *testing.B) {
	p, _ := NewDispatcher(DispatcherConfig{PerDestConcurrency: 64})
	startDispatcher(b, p)
	var wg sync.WaitGroup
	sink := HandlerFunc(func(context.Context, Delivery) error { return nil })
	r, err := NewRouter(RouterConfig{Dispatcher: p, Webhook: sink, Outcomes: wgOutcomes{&wg}, NodeID: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	const batch = 100
	tasks := make([]*task.Task, batch)
	due := time.Now()
	for i := range tasks {
		tasks[i] = &task.Task{ID: fmt.Sprint(i), Topic: fmt.Sprintf("topic-%d", i%50), Target: "https://a.example/hook", DueAt: due, Attempts: 1}
	}
	cpu0 := cpuTime()
	for b.Loop() {
		wg.Add(batch)
		r.Send(tasks)
		wg.Wait()
	}
	// CPU time, not wall time, per task: on a shared machine the wall
	// time of a goroutine handover swings by 3×, the CPU spent far less.
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N*batch), "cpu_ns/task")
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
