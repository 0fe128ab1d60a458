// Command clientsubmit measures the Go client's submit rate against a
// running node, sequentially and from several goroutines, the baseline the
// other languages' clients are measured against (scripts/client-bench.sh
// runs it beside them on the same node). Each line it prints is
//
//	RESULT client=go mode=sequential threads=1 submits=N seconds=S rate=R cpu_us=C
//
// cpu_us is the process's CPU time (user + system) per submit, the figure
// the machine's load changes least.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ontimehq/ontime/client"
)

func main() {
	server := flag.String("server", "http://127.0.0.1:7070", "the node's URL")
	token := flag.String("token", os.Getenv("ONTIME_TOKEN"), "API token")
	seconds := flag.Float64("seconds", 5, "length of each measurement")
	threads := flag.Int("threads", 16, "goroutines of the concurrent measurement")
	warmup := flag.Float64("warmup", 1, "seconds of submits before measuring")
	flag.Parse()
	if err := run(*server, *token, time.Duration(*seconds*float64(time.Second)), time.Duration(*warmup*float64(time.Second)), *threads); err != nil {
		fmt.Fprintln(os.Stderr, "clientsubmit:", err)
		os.Exit(1)
	}
}

func run(server, token string, d, warmup time.Duration, threads int) error {
	c, err := client.New(server, client.WithToken(token))
	if err != nil {
		return err
	}
	ctx := context.Background()
	topic := fmt.Sprintf("bench.client.go.%d", time.Now().UnixNano())
	req := client.TaskRequest{Topic: topic, Delay: "1h", Target: "http://127.0.0.1:9/bench", Payload: []byte(`{"n":1}`)}
	if _, err := measure(ctx, c, req, warmup, threads); err != nil {
		return err
	}
	for _, n := range []int{1, threads} {
		cpu0 := cpuTime()
		got, err := measure(ctx, c, req, d, n)
		if err != nil {
			return err
		}
		cpu := cpuTime() - cpu0
		mode := "sequential"
		if n > 1 {
			mode = "concurrent"
		}
		fmt.Printf("RESULT client=go mode=%s threads=%d submits=%d seconds=%.2f rate=%.1f cpu_us=%.1f\n", mode, n, got, d.Seconds(), float64(got)/d.Seconds(), float64(cpu.Microseconds())/float64(max(got, 1)))
	}
	return nil
}

// measure submits from n goroutines for d and returns how many succeeded.
func measure(ctx context.Context, c *client.Client, req client.TaskRequest, d time.Duration, n int) (int64, error) {
	var done atomic.Int64
	var (
		mu       sync.Mutex
		firstErr error
	)
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				if _, _, err := c.Submit(ctx, req); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	return done.Load(), nil
}

// cpuTime is the CPU time (user + system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
