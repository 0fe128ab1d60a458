// Command clients measures the submit rate of the Go, TypeScript and Python
// clients against one `ontime serve` node in one run, sequential (one
// caller) and 16 concurrent callers, and prints the table with each
// client's rate as a ratio of the Go client's in the same round.
//
//	cd bench && go run ./clients            # or: make bench-clients
//
// The node: SQLite in a temporary directory, the defaults otherwise. Each
// task is keyed and due in an hour (nothing is delivered during the run).
// Rounds interleave the clients, so a machine whose load changes during
// the run affects them alike; the table gives each cell's median over the
// rounds. The TypeScript client must be built (npm ci in
// clients/typescript builds it); python3 must be on PATH.
//
// On a machine shared with other work, run it at a higher priority
// (go build -o /tmp/bc ./clients && nice -n -10 /tmp/bc): the other load
// otherwise weighs most on the clients with fewest threads (Node's one
// event loop waits for the scheduler longest), which measures the machine
// more than the clients. The CPU time per submit is the figure least
// changed by the load.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ontimehq/ontime/client"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "clients:", err)
		os.Exit(1)
	}
}

type cell struct {
	client  string
	workers int
	variant string // "" or "no coalescing"
}

// result is one measurement: submits per second, and the client process's
// CPU time per submit (user + system), which the machine's load hardly
// changes.
type result struct {
	rate, cpuMicros float64
}

func run() error {
	secs := flag.Float64("secs", 2, "seconds per measurement")
	rounds := flag.Int("rounds", 5, "rounds (each measures every cell once)")
	conc := flag.Int("concurrency", 16, "callers of the concurrent cells")
	bin := flag.String("ontime", "", "ontime binary (default: go build ../cmd/ontime)")
	flag.Parse()

	root, err := filepath.Abs("..")
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "ontime-bench-clients-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if *bin == "" {
		*bin = filepath.Join(tmp, "ontime")
		if out, err := exec.Command("go", "build", "-o", *bin, filepath.Join(root, "cmd", "ontime")).CombinedOutput(); err != nil {
			return fmt.Errorf("go build: %v\n%s", err, out)
		}
	}
	tsBench := filepath.Join(root, "clients", "typescript", "dist", "bench", "submit.js")
	if _, err := os.Stat(tsBench); err != nil {
		return fmt.Errorf("%s: build the TypeScript client first (cd clients/typescript && npm ci)", tsBench)
	}
	pyBench := filepath.Join(root, "clients", "python", "bench.py")

	url, stop, err := startNode(*bin, tmp)
	if err != nil {
		return err
	}
	defer stop()

	cells := []cell{
		{"go", 1, ""}, {"typescript", 1, ""}, {"python", 1, ""},
		{"go", *conc, ""}, {"typescript", *conc, ""}, {"python", *conc, ""},
		{"go", *conc, "no coalescing"}, {"typescript", *conc, "no coalescing"}, {"python", *conc, "no coalescing"},
	}
	results := map[cell][]result{}
	for r := 0; r < *rounds; r++ {
		// Each round starts with another client, so none is always measured
		// right after the same neighbour.
		for i := range cells {
			c := cells[(i+3*r)%len(cells)]
			var res result
			switch c.client {
			case "go":
				res, err = goRate(url, c.workers, c.variant == "", *secs)
			case "typescript":
				res, err = procRate("node", tsBench, url, c, *secs)
			case "python":
				res, err = procRate("python3", pyBench, url, c, *secs)
			}
			if err != nil {
				return fmt.Errorf("%s %d %s: %w", c.client, c.workers, c.variant, err)
			}
			results[c] = append(results[c], res)
			fmt.Fprintf(os.Stderr, "round %d: %-10s %2d callers %-13s %8.0f submits/s %6.0f µs CPU/submit\n", r+1, c.client, c.workers, c.variant, res.rate, res.cpuMicros)
		}
	}
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("Submit rate against one `ontime serve` (SQLite, defaults), keyed tasks due in 1 h; median of %d rounds of %.1f s each, clients interleaved; load average at the end: %s\n\n", *rounds, *secs, strings.Join(strings.Fields(string(load))[:3], " "))
	fmt.Println("| client | callers | submits/s (median) | × Go client | client CPU µs/submit (median) | × Go client | submits/s per round |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, c := range cells {
		rate := median(results[c], func(r result) float64 { return r.rate })
		cpu := median(results[c], func(r result) float64 { return r.cpuMicros })
		gc := cell{"go", c.workers, c.variant}
		goRate := median(results[gc], func(r result) float64 { return r.rate })
		goCPU := median(results[gc], func(r result) float64 { return r.cpuMicros })
		name := c.client
		if c.variant != "" {
			name += " (" + c.variant + ")"
		}
		var rs []string
		for _, r := range results[c] {
			rs = append(rs, fmt.Sprintf("%.0f", r.rate))
		}
		fmt.Printf("| %s | %d | %.0f | %.2f | %.0f | %.2f | %s |\n", name, c.workers, rate, rate/goRate, cpu, cpu/goCPU, strings.Join(rs, ", "))
	}
	return nil
}

func median(rs []result, f func(result) float64) float64 {
	var s []float64
	for _, r := range rs {
		s = append(s, f(r))
	}
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

// startNode runs `ontime serve` on a free loopback port with its data in dir.
func startNode(bin, dir string) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := filepath.Join(dir, "ontime.yaml")
	if err := os.WriteFile(cfg, []byte("data_dir: "+filepath.Join(dir, "data")+"\nlog_level: warn\n"), 0o644); err != nil {
		return "", nil, err
	}
	cmd := exec.Command(bin, "serve", "--config", cfg)
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "ONTIME_") {
			env = append(env, e)
		}
	}
	cmd.Env = append(env, "ONTIME_LISTEN="+addr)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	var logMu sync.Mutex
	var logs strings.Builder
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logMu.Lock()
			logs.WriteString(sc.Text() + "\n")
			logMu.Unlock()
		}
	}()
	stop := func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	url := "http://" + addr
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return url, stop, nil
			}
		}
		if time.Now().After(deadline) {
			stop()
			logMu.Lock()
			defer logMu.Unlock()
			return "", nil, errors.New("ontime serve not ready within 60 s:\n" + logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// goRate is the Go client's rate: workers goroutines submitting for secs.
func goRate(url string, workers int, coalesce bool, secs float64) (result, error) {
	var opts []client.Option
	if !coalesce {
		opts = append(opts, client.WithCoalesce(client.Coalesce{Off: true}))
	}
	c, err := client.New(url, opts...)
	if err != nil {
		return result{}, err
	}
	ctx := context.Background()
	run := fmt.Sprintf("go%dx%x", os.Getpid(), time.Now().UnixNano())
	var seq atomic.Int64
	submit := func() error {
		n := seq.Add(1)
		_, _, err := c.Submit(ctx, client.TaskRequest{Topic: "bench.clients", Key: fmt.Sprintf("%s-%d", run, n), Delay: "1h",
			Target: "http://127.0.0.1:9/h", Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n))})
		return err
	}
	for i := 0; i < 500; i++ { // warm up, as the other clients do
		if err := submit(); err != nil {
			return result{}, err
		}
	}
	var done atomic.Int64
	cpu0 := cpuTime()
	var firstErr error
	var errOnce sync.Once
	start := time.Now()
	until := start.Add(time.Duration(secs * float64(time.Second)))
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(until) {
				if err := submit(); err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	n := float64(done.Load())
	return result{rate: n / elapsed.Seconds(), cpuMicros: float64((cpuTime() - cpu0).Microseconds()) / n}, firstErr
}

// cpuTime is this process's CPU time so far (user + system): the Go
// client's, the driver being idle while it measures.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procRate runs one client's bench program and reads its rate.
func procRate(interp, script, url string, c cell, secs float64) (result, error) {
	co := "coalesce"
	if c.variant != "" {
		co = "nocoalesce"
	}
	out, err := exec.Command(interp, script, url, fmt.Sprint(c.workers), fmt.Sprint(secs), co).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return result{}, fmt.Errorf("%v: %s", err, ee.Stderr)
		}
		return result{}, err
	}
	var res struct {
		Rate  float64 `json:"rate"`
		CPUus float64 `json:"cpu_us"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return result{}, fmt.Errorf("%s said %q: %w", script, out, err)
	}
	return result{rate: res.Rate, cpuMicros: res.CPUus}, nil
}
