package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/client"
	"github.com/ontimehq/ontime/internal/testdb"
)

// The handler-node helper process: TestHelperHandlerNode run by a re-exec
// of the test binary with these set (it returns at once without them).
const (
	helperConfigEnv = "E2E_HELPER_CONFIG" // the node's ontime.yaml
	helperTopicEnv  = "E2E_HELPER_TOPIC"  // the topic of its Go handler
	helperReportEnv = "E2E_HELPER_REPORT" // URL each delivery is POSTed to
)

// TestHelperHandlerNode is not a test: it is the body of a handler node
// as a separate process (Go handlers exist only in an embedded node, and
// the chaos tests kill it with SIGKILL). It runs an ontime.Node from the
// config at $E2E_HELPER_CONFIG (with ONTIME_LISTEN, ONTIME_NODE_ID and
// ONTIME_DATA_DIR applied), with a Go handler for $E2E_HELPER_TOPIC that POSTs each delivery to
// $E2E_HELPER_REPORT (headers Ontime-Task-Id and Ontime-Attempt,
// as a webhook would, so a chaosReceiver counts it) and fails it unless
// answered 2xx, and the node's API on its listen address. It ends when its
// stdin closes (the test that started it ended) or on SIGTERM.
func TestHelperHandlerNode(t *testing.T) {
	path := os.Getenv(helperConfigEnv)
	if path == "" {
		return
	}
	// Only the overrides the test sets: the rest of its environment
	// (ONTIME_CHAOS…) is not this node's config.
	var env []string
	for _, k := range []string{"ONTIME_LISTEN", "ONTIME_NODE_ID", "ONTIME_DATA_DIR"} {
		env = append(env, k+"="+os.Getenv(k))
	}
	cfg, err := ontime.LoadConfig(path, env)
	if err != nil {
		t.Fatal(err)
	}
	topic, report := os.Getenv(helperTopicEnv), os.Getenv(helperReportEnv)
	ctx := context.Background()
	node, err := ontime.NewNode(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	err = node.Handle(topic, func(ctx context.Context, d *ontime.Delivery) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, report, bytes.NewReader(d.Payload))
		if err != nil {
			return fmt.Errorf("report: %w", err)
		}
		req.Header.Set("Ontime-Task-Id", d.ID)
		req.Header.Set("Ontime-Attempt", strconv.Itoa(d.Attempt))
		resp, err := hc.Do(req)
		if err != nil {
			return fmt.Errorf("report: %w", err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("report: %s", resp.Status)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: node.HTTPHandler(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	stdinClosed := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(stdinClosed)
	}()
	stop, cancel := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
	defer cancel()
	select {
	case <-stdinClosed:
	case <-stop.Done():
	case err := <-served:
		t.Errorf("serve: %v", err)
	}
	sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
	defer scancel()
	_ = srv.Shutdown(sctx)
	if err := node.Stop(sctx); err != nil {
		t.Error(err)
	}
}

// spawnHandlerNode starts TestHelperHandlerNode as a process with the
// config at cfgPath, listening on addr, handling topic, reporting to
// report; it returns once the node answers /healthz. The process is
// killed at the test's end if it still runs.
func spawnHandlerNode(t *testing.T, cfgPath, addr, nodeID, dataDir, topic, report string) *serveProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHandlerNode$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperConfigEnv+"="+cfgPath, helperTopicEnv+"="+topic, helperReportEnv+"="+report,
		"ONTIME_LISTEN="+addr, "ONTIME_NODE_ID="+nodeID, "ONTIME_DATA_DIR="+dataDir)
	// The helper ends when this pipe closes: with the test, whatever way it
	// ends.
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin = stdinR
	// Its log and the test framework's output (on stdout) in one stream.
	stderr, out, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	p := &serveProc{cmd: cmd, done: make(chan error, 1), logs: &strings.Builder{}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stdinR.Close()
	out.Close()
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.logs.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
		}
		stderr.Close()
		p.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		stdinW.Close()
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	c := newAPIClient(t, "http://"+addr)
	p.waitReady(t, func() bool { return c.Health(t.Context()) == nil })
	return p
}

// TestChaosHandlerNodeKilled (issue 25 item 1, under a fault): tasks
// without a target for a topic that only a Go-handler node handles, on
// PostgreSQL. Beside the handler node (an embedded ontime.Node run as its
// own process) runs one `ontime serve` node, which has no handler: it
// accepts the tasks because a live node handles the topic, and hands off
// those it fires. The handler process is killed with SIGKILL while tasks
// due 1–5 s ahead are pending. While it is gone the serve node refuses new
// target-less submits (400 naming target, once the membership says the
// node left) and the accepted tasks wait, unattempted and saying why (with
// max_attempts 2 they would be dead after two tries); restarted, the
// handler node delivers every one: 0 lost, 0 early.
func TestChaosHandlerNodeKilled(t *testing.T) {
	chaosParallel(t)
	rate := chaosSize(t, "HANDLER_RATE", 40, 200) // tasks per second
	secs := chaosSize(t, "HANDLER_SECONDS", 3, 10)
	dir := t.TempDir()
	yaml, leases := chaosYAML("postgres", testdb.DSNs(t, "postgres", 1), "")
	cfg := writeChaosConfig(t, dir, yaml)
	rcv := newChaosReceiver(t, nil)
	const nodeID = "h1"
	topic := "chaos.handler" // chaosLoad's topic: "chaos." + its name
	handlerAddr, hdir := freeAddr(t), t.TempDir()
	handler := spawnHandlerNode(t, cfg, handlerAddr, nodeID, hdir, topic, rcv.srv.URL)
	serveAddr := freeAddr(t)
	startServe(t, cfg, serveAddr, "ONTIME_NODE_ID=s1")
	api := newAPIClient(t, "http://"+serveAddr)
	ctx := t.Context()

	// The serve node learns of the handler with its next heartbeat.
	waitFor(t, 60*time.Second, "the serve node accepts a task without a target", func() bool {
		_, _, err := api.Submit(ctx, apiv1.TaskRequest{Topic: topic, Key: "probe", Delay: "1s"})
		return err == nil
	})
	load := newChaosLoad(t, "handler", "", serveAddr)
	load.maxAttempts = 2
	start := time.Now()
	const batch = 10
	load.stream(ctx, rate*secs, batch, time.Second*batch/time.Duration(rate), time.Second, 5*time.Second)
	if t.Failed() {
		t.FailNow()
	}
	handler.signal(t, syscall.SIGKILL)
	killed := time.Now()
	pendingAtKill := load.submitted() - int(rcv.delivered.Load())

	// Refused once the membership says the handler node is gone.
	var refusal *client.APIError
	waitFor(t, 60*time.Second, "the serve node refuses a task without a target", func() bool {
		_, _, err := api.Submit(ctx, apiv1.TaskRequest{Topic: topic, Key: "refused", Delay: "1s"})
		if err == nil {
			return false
		}
		if !errors.As(err, &refusal) {
			t.Fatalf("submit while the handler node is down: %v", err)
		}
		return true
	})
	refusedAfter := time.Since(killed)
	if refusal.Status != 400 || refusal.Field != "target" || !strings.Contains(refusal.Message, topic) {
		t.Fatalf("submit while the handler node is down: %d field %q %q; want 400 naming target and the topic", refusal.Status, refusal.Field, refusal.Message)
	}

	// Every accepted task not delivered yet waits, not dead, without
	// having used its attempts, saying why: those the killed node had
	// claimed once their delivery lease ends.
	reason := `no live node handles topic "` + topic + `"`
	// used is the attempts a task has used: while running, its attempt is
	// counted until the outcome takes it back.
	used := func(v *apiv1.Task) int {
		if v.Status == "running" {
			return v.Attempts - 1
		}
		return v.Attempts
	}
	// isWaiting says whether an undelivered task waits for a handler, and
	// fails the test if it is final or has used its attempts up.
	isWaiting := func(v *apiv1.Task) bool {
		switch {
		case v.Status == "dead" || v.Status == "cancelled" || v.Status == "done":
			t.Fatalf("task %s undelivered with the handler node down: status %s, attempts %d, last_error %q", v.ID, v.Status, v.Attempts, v.LastError)
		case used(v) >= v.MaxAttempts:
			t.Fatalf("task %s used its %d attempts with the handler node down (status %s, last_error %q)", v.ID, v.Attempts, v.Status, v.LastError)
		}
		// Those the killed node claimed (running, no error yet) wait out
		// their delivery lease first.
		return strings.Contains(v.LastError, reason)
	}
	var waiting []string
	var attempted int // waiting tasks that used an attempt: those the killed node was running
	waitFor(t, 3*time.Minute, "every undelivered task waiting for a handler", func() bool {
		load.mu.Lock()
		var ids []string
		for id := range load.due {
			ids = append(ids, id)
		}
		load.mu.Unlock()
		waiting, attempted = waiting[:0], 0
		for _, id := range ids {
			rcv.mu.Lock()
			rec := rcv.recs[id]
			done := rec != nil && rec.oks > 0
			rcv.mu.Unlock()
			if done {
				continue
			}
			v := api.get(id)
			if !isWaiting(v) {
				return false
			}
			waiting = append(waiting, id)
			if used(v) > 0 {
				attempted++
			}
		}
		return true
	})
	if len(waiting) == 0 {
		t.Fatalf("no accepted task was left when the handler node was killed (%d pending at the kill): the scenario did not happen", pendingAtKill)
	}
	// Tried twice more each (with max_attempts 2, two tries that used an
	// attempt would make a task dead), then looked at again.
	unhandledSeries := `ontime_tasks_unhandled_total{topic="` + topic + `"}`
	u0 := counter(t, "http://"+serveAddr, unhandledSeries)
	waitFor(t, 3*time.Minute, "every waiting task tried twice more", func() bool {
		return counter(t, "http://"+serveAddr, unhandledSeries) >= u0+float64(2*len(waiting))
	})
	for _, id := range waiting {
		if v := api.get(id); !isWaiting(v) {
			t.Fatalf("task %s with the handler node down: status %s, attempts %d, last_error %q; want it waiting, saying why", id, v.Status, v.Attempts, v.LastError)
		}
	}
	unhandled := counter(t, "http://"+serveAddr, unhandledSeries)
	down := time.Since(killed)
	// The serve node's own fires it handed to the handler node (the other
	// half of the path: its items' tasks), before and after the kill.
	handedOff := counter(t, "http://"+serveAddr, `ontime_deliveries_total{outcome="handed_off"}`)
	spawnHandlerNode(t, cfg, handlerAddr, nodeID, hdir, topic, rcv.srv.URL)
	restarted := time.Now()
	rcv.settle(load, 5*time.Minute, 3*time.Second)
	res := rcv.count(load)
	var lastWaiting time.Duration // the latest delivery of a waiting task after the restart
	rcv.mu.Lock()
	for _, id := range waiting {
		if rec := rcv.recs[id]; rec != nil && rec.oks > 0 {
			lastWaiting = max(lastWaiting, rec.firstOK.Sub(restarted))
		}
	}
	rcv.mu.Unlock()
	chaosVerdict(t, "handler-node-killed", res, true,
		fmt.Sprintf("%d tasks without a target (%d/s due 1–5 s ahead, max_attempts 2) to an `ontime serve` node beside a Go-handler node process, %.0f of its fires handed off by it (to the handler node, the killed one included until the membership dropped it); the handler process killed with SIGKILL at +%s with %d undelivered; target-less submits refused (400 target) %s after the kill; %d tasks waited (%d of them unattempted, the others run once by the killed node; %s; ontime_tasks_unhandled_total %.0f); handler down %s, restarted: the waiting tasks delivered within %s; %s",
			load.submitted(), rate, handedOff, killed.Sub(start).Round(time.Millisecond), pendingAtKill, refusedAfter.Round(time.Millisecond),
			len(waiting), len(waiting)-attempted, reason, unhandled, down.Round(time.Millisecond), lastWaiting.Round(time.Millisecond), leases))
}
