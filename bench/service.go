package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/client"
)

// errSkip marks a system that cannot run on this build (a config key the
// server does not know yet): the run goes on without it, and the report
// says why.
var errSkip = errors.New("skipped")

// serverBinary is the `ontime` command built once per bench run from the
// root module (the one bench's go.mod replaces), so the service path is
// measured on the code being benchmarked.
type serverBinary struct {
	dir  string
	path string
}

// buildServer builds from root, or (empty) from the module bench's
// go.mod replaces.
func buildServer(ctx context.Context, root string) (*serverBinary, error) {
	if root == "" {
		out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/ontimehq/ontime").Output()
		if err != nil {
			return nil, fmt.Errorf("locating the ontime module: %w", err)
		}
		root = strings.TrimSpace(string(out))
	}
	dir, err := os.MkdirTemp("", "ontime-bench-bin")
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(dir, "ontime")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/ontime")
	cmd.Dir = root
	if msg, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("go build ./cmd/ontime in %s: %w: %s", root, err, msg)
	}
	return &serverBinary{dir: dir, path: bin}, nil
}

func (b *serverBinary) remove() { os.RemoveAll(b.dir) }

// serviceSys is `ontime serve` in a process of its own, configured by a
// YAML file, submitted to over HTTP with the Go client and delivering by
// webhook to the bench's receiver: what a user who runs the server sees.
type serviceSys struct {
	label  string
	driver string // sqlite | mysql | postgres
	redis  bool   // hot.tier redis
	batch  int    // destinations."http://127.0.0.1:PORT".batch; 0: one task per call
	// burstOnly: runs the enqueue pass and the burst, not the steady runs.
	burstOnly bool
	// tracing turns the node's OpenTelemetry tracing on, every new trace
	// sampled, exported over OTLP/HTTP to a sink in the bench process that
	// answers and discards: the node pays for its spans and their export,
	// the collector costs it nothing.
	tracing bool
	bin     *serverBinary
	sink    *otlpSink

	cmd     *exec.Cmd
	exited  chan struct{}
	api     *client.Client
	single  *client.Client // coalescing off: one POST /v1/tasks per submit
	hc      *http.Client
	hook    *hookReceiver
	logPath string // the server's stderr, read back at stop
	cleanup []func()
}

func (s *serviceSys) name() string { return s.label }

func (s *serviceSys) path() string {
	if s.batch > 0 {
		return fmt.Sprintf("service (HTTP + webhook batch %d)", s.batch)
	}
	return "service (HTTP + webhook)"
}

func (s *serviceSys) knobs() string {
	c := ontime.DefaultConfig()
	var b strings.Builder
	b.WriteString("`ontime serve` built from this tree, its own process, config file: ")
	switch s.driver {
	case "sqlite":
		b.WriteString("store sqlite (data_dir a temp dir)")
	case "mysql":
		b.WriteString("store mysql: MariaDB 127.0.0.1:3306, a fresh database per run")
	case "postgres":
		b.WriteString("store postgres: 127.0.0.1:5432, a fresh database per run")
	}
	if s.redis {
		fmt.Fprintf(&b, ", hot tier redis (%s, prefix ontime_bench_<random>, its keys deleted after)", redisAddr)
	} else {
		b.WriteString(", hot tier memory")
	}
	b.WriteString(", log_level warn, every other key default; submits over HTTP/1.1 keep-alive on loopback with the Go client (`client.Submit`, whose concurrent calls share `POST /v1/tasks:batch` calls by default, one in flight; `client.SubmitBatchMinimal`, Prefer: return=minimal); ")
	fmt.Fprintf(&b, "webhook to a net/http receiver in the bench process on 127.0.0.1, delivery.concurrency %d", c.Delivery.Concurrency)
	if s.batch > 0 {
		fmt.Fprintf(&b, ", `destinations: {\"http://127.0.0.1:PORT\": {batch: %d}}` (the receiver answers 200 `{\"failed\":[]}`)", s.batch)
	} else {
		b.WriteString(", one task per call")
	}
	if s.tracing {
		b.WriteString(", `tracing: {enabled: true, protocol: http/protobuf, sample_ratio: 1}` exporting to a sink in the bench process that answers 200 and discards")
	}
	return b.String()
}

// config writes the node's YAML.
func (s *serviceSys) config(dir string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "listen: 127.0.0.1:0\ndata_dir: %q\nlog_level: warn\n", filepath.Join(dir, "data"))
	switch s.driver {
	case "postgres", "mysql":
		fresh := freshPG
		if s.driver == "mysql" {
			fresh = freshMySQL
		}
		dsn, drop, err := fresh()
		if err != nil {
			return "", err
		}
		s.cleanup = append(s.cleanup, drop)
		fmt.Fprintf(&b, "store:\n  driver: %s\n  databases: [%q]\n", s.driver, dsn)
	}
	if s.redis {
		prefix := benchName()
		fmt.Fprintf(&b, "hot:\n  tier: redis\n  redis_addrs: [%q]\n  redis_prefix: %s\n", redisAddr, prefix)
		s.cleanup = append(s.cleanup, func() { delKeys(prefix + ":*") })
	}
	if s.batch > 0 {
		fmt.Fprintf(&b, "destinations:\n  %q: {batch: %d}\n", s.hook.origin(), s.batch)
	}
	if s.tracing {
		sink, err := startOTLPSink()
		if err != nil {
			return "", err
		}
		s.sink = sink
		s.cleanup = append(s.cleanup, sink.stop)
		fmt.Fprintf(&b, "tracing:\n  enabled: true\n  endpoint: %q\n  protocol: http/protobuf\n  sample_ratio: 1\n", sink.url())
	}
	if addr := os.Getenv("ONTIME_BENCH_PPROF"); addr != "" {
		// To profile the node during a run (go tool pprof
		// http://ADDR/debug/pprof/profile?seconds=10); one system at a
		// time (-only), or the next node's listen fails.
		fmt.Fprintf(&b, "debug:\n  pprof_listen: %q\n", addr)
	}
	path := filepath.Join(dir, "ontime.yaml")
	return path, os.WriteFile(path, []byte(b.String()), 0o600)
}

func (s *serviceSys) start(ctx context.Context, rec func(string, time.Time)) error {
	if s.bin == nil {
		return errors.New("no server binary")
	}
	dir, err := os.MkdirTemp("", "ontime-bench-svc")
	if err != nil {
		return err
	}
	s.cleanup = append(s.cleanup, func() { os.RemoveAll(dir) })
	if s.hook, err = startReceiver(rec); err != nil {
		return err
	}
	cfgPath, err := s.config(dir)
	if err != nil {
		return err
	}
	logPath := filepath.Join(dir, "ontime.log")
	s.logPath = logPath
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close() // the child holds its own descriptor
	// Not CommandContext: the process is stopped by stop(), with SIGTERM
	// and a grace period, never killed by the end of a context.
	s.cmd = exec.Command(s.bin.path, "--json", "serve", "--config", cfgPath)
	s.cmd.Stderr = logf
	first := &firstLine{line: make(chan string, 1)}
	s.cmd.Stdout = first
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", s.bin.path, err)
	}
	s.exited = make(chan struct{})
	go func() {
		_ = s.cmd.Wait()
		close(s.exited)
	}()
	line := first.line
	var addr string
	select {
	case l := <-line:
		var m map[string]string
		if json.Unmarshal([]byte(l), &m) != nil || m["listening"] == "" {
			return fmt.Errorf("%s: unexpected first line from ontime serve: %q", s.label, l)
		}
		addr = m["listening"]
	case <-s.exited:
		return s.startFailure(logPath)
	case <-time.After(2 * time.Minute):
		return fmt.Errorf("%s: no listening line within 2m; log %s", s.label, logPath)
	case <-ctx.Done():
		return ctx.Err()
	}
	if s.hc, s.api, err = submitClient(addr, true); err != nil {
		return err
	}
	s.single, err = client.New(addr, client.WithHTTPClient(s.hc), client.WithCoalesce(client.Coalesce{Off: true}))
	return err
}

// submitClient is the Go client every HTTP submitter of the bench uses
// (the service path and the net/http floor), so both pay the same client
// side cost. With coalesce, concurrent Submits share POST /v1/tasks:batch
// calls (the client's default, what a Go service gets); without, each is
// its own POST /v1/tasks (the floor serves only that route: it is the
// ceiling of single submits).
func submitClient(addr string, coalesce bool) (*http.Client, *client.Client, error) {
	// Keep-alive for every submitter: the default transport keeps only 2
	// idle connections per host, so 16 concurrent clients would dial anew
	// on most calls.
	hc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{
		MaxIdleConns: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: time.Minute, DisableCompression: true,
	}}
	api, err := client.New(addr, client.WithHTTPClient(hc), client.WithCoalesce(client.Coalesce{Off: !coalesce}))
	return hc, api, err
}

// startFailure reads why the server exited: a config key it does not know
// (destinations, before batch delivery is merged) is a skip, anything
// else an error.
func (s *serviceSys) startFailure(logPath string) error {
	msg, _ := os.ReadFile(logPath)
	last := strings.TrimSpace(string(msg))
	if i := strings.LastIndexByte(last, '\n'); i >= 0 {
		last = last[i+1:]
	}
	if s.batch > 0 && bytes.Contains(msg, []byte("destinations")) {
		return fmt.Errorf("%w: this server rejects the destinations config (%s)", errSkip, last)
	}
	return fmt.Errorf("%s: ontime serve exited at start: %s", s.label, last)
}

func (s *serviceSys) perCall() float64 {
	if s.hook == nil {
		return 0
	}
	return s.hook.perCall()
}

func (s *serviceSys) request(j job) client.TaskRequest { return taskRequest(j, s.hook.url()) }

// taskRequest is the submit body of j delivered to target.
func taskRequest(j job, target string) client.TaskRequest {
	p, _ := json.Marshal(j)
	r := client.TaskRequest{Topic: "bench", DueAt: j.Due.UTC().Format(time.RFC3339Nano), Payload: p, Target: target}
	if j.Keyed {
		r.Key = j.ID
	}
	return r
}

func (s *serviceSys) enqueue(ctx context.Context, jobs []job) error {
	reqs := make([]client.TaskRequest, len(jobs))
	for i, j := range jobs {
		reqs[i] = s.request(j)
	}
	// The IDs alone, as River's InsertManyFast answers a count: the
	// call a service that keeps no views makes.
	items, err := s.api.SubmitBatchMinimal(ctx, reqs)
	if err != nil {
		return err
	}
	for _, it := range items {
		if it.Error != nil {
			return fmt.Errorf("batch item: %s: %s", it.Error.Field, it.Error.Message)
		}
	}
	return nil
}

func (s *serviceSys) enqueueOne(ctx context.Context, j job) error {
	_, _, err := s.api.Submit(ctx, s.request(j))
	return err
}

// enqueueSingle is one submit as its own call (POST /v1/tasks), as a
// client that does not coalesce (another language's, a shell) makes it,
// and as the floor is called.
func (s *serviceSys) enqueueSingle(ctx context.Context, j job) error {
	_, _, err := s.single.Submit(ctx, s.request(j))
	return err
}

func (s *serviceSys) stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(40 * time.Second): // shutdown_grace 15s and more
			_ = s.cmd.Process.Kill()
			<-s.exited
		}
	}
	if s.cmd != nil && s.cmd.ProcessState != nil {
		// The server's CPU time over its life (start, the run, the drain):
		// on a machine shared with other work, CPU per task compares runs
		// better than rates do.
		ps := s.cmd.ProcessState
		log.Printf("%s: server CPU %s (user %s, system %s)", s.label, (ps.UserTime() + ps.SystemTime()).Round(time.Millisecond),
			ps.UserTime().Round(time.Millisecond), ps.SystemTime().Round(time.Millisecond))
	}
	if s.logPath != "" {
		// The server logs at warn: anything there (failed webhook calls,
		// a slow store) bears on the figures, so it is shown.
		if msg, err := os.ReadFile(s.logPath); err == nil && len(bytes.TrimSpace(msg)) > 0 {
			lines := strings.Split(strings.TrimSpace(string(msg)), "\n")
			for _, l := range lines[:min(5, len(lines))] {
				log.Printf("%s: server log: %s", s.label, l)
			}
			if len(lines) > 5 {
				log.Printf("%s: server log: … %d lines in all", s.label, len(lines))
			}
		}
	}
	if s.hc != nil {
		s.hc.CloseIdleConnections()
	}
	if s.hook != nil {
		s.hook.stop()
	}
	if s.sink != nil {
		// Proof that spans left the node: a run whose sink got nothing
		// measured an idle tracer.
		log.Printf("%s: OTLP sink received %d export requests, %d bytes", s.label, s.sink.requests.Load(), s.sink.bytes.Load())
		s.sink = nil
	}
	for i := len(s.cleanup) - 1; i >= 0; i-- {
		s.cleanup[i]()
	}
	s.cmd, s.api, s.single, s.hc, s.hook, s.cleanup, s.logPath = nil, nil, nil, nil, nil, nil, ""
}

// firstLine is the server's stdout: its first line (where it listens) goes
// to line, the rest is dropped.
type firstLine struct {
	buf  []byte
	sent bool
	line chan string
}

func (f *firstLine) Write(p []byte) (int, error) {
	if f.sent {
		return len(p), nil
	}
	f.buf = append(f.buf, p...)
	if i := bytes.IndexByte(f.buf, '\n'); i >= 0 {
		f.line <- string(f.buf[:i])
		f.sent, f.buf = true, nil
	}
	return len(p), nil
}
