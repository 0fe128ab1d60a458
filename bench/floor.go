package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/netutil"

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/client"
)

// The net/http floor: what Go's net/http over loopback costs on this
// machine with no store and no scheduler behind it, measured in the same
// run as the systems, so the report shows how far any HTTP service (ontime
// serve among them) can go here. Its server is the bench binary itself,
// re-executed with floorChildArg as its first argument, so it runs in a
// process of its own as `ontime serve` does and is built with no extra
// step.

// floorChildArg, as the first argument, makes the bench binary the floor's
// server process instead of a bench run.
const floorChildArg = "net-http-floor-child"

// floorName is the floor's name in -only and in the report.
const floorName = "net/http floor"

// floorTaskID is an ID of the length ontime's are (26 symbols).
const floorTaskID = "01KAT0Y8Z5M9Q4W7E2R6T3Y1HN"

// floorBlast asks the floor's process to post N webhook calls to Target,
// Concurrency in flight, starting at Start (the burst's due instant).
type floorBlast struct {
	Target      string    `json:"target"`
	N           int       `json:"n"`
	Concurrency int       `json:"concurrency"`
	Start       time.Time `json:"start"`
}

// floorBlastResult is what the floor's process answers once every call
// of a blast is answered.
type floorBlastResult struct {
	Sent       int    `json:"sent"`
	Failed     int    `json:"failed"`
	FirstError string `json:"first_error,omitempty"`
}

// floorChild is the floor's server process: it prints where it listens
// (as `ontime serve --json` does) and serves until SIGTERM.
func floorChild() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	answer, err := cannedTask()
	if err != nil {
		log.Print(err)
		return 1
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Print(err)
		return 1
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/tasks", func(w http.ResponseWriter, r *http.Request) {
		// The body is read (the connection is reused only then) but not
		// decoded: the floor is net/http's cost, not the API's.
		if _, err := io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20)); err != nil {
			http.Error(w, "read body", http.StatusBadRequest)
			return
		}
		// As ontime's writeJSON: canonical keys, Content-Length set.
		h := w.Header()
		h["Content-Type"] = []string{"application/json"}
		h["Content-Length"] = []string{strconv.Itoa(len(answer))}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(answer)
	})
	mux.HandleFunc("POST /floor/webhooks", func(w http.ResponseWriter, r *http.Request) {
		var b floorBlast
		if err := json.NewDecoder(r.Body).Decode(&b); err != nil || b.N <= 0 || b.Concurrency <= 0 {
			http.Error(w, "bad blast", http.StatusBadRequest)
			return
		}
		out, _ := json.Marshal(blast(r.Context(), b))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
	})
	// `ontime serve`'s server (cmd/ontime newHTTPServer) with the default
	// http settings: HTTP/1.1 beside h2c, its timeouts, its listener limit.
	hc := ontime.DefaultConfig().HTTP
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetHTTP2(true)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: time.Duration(hc.ReadHeaderTimeout),
		ReadTimeout:       time.Duration(hc.ReadTimeout),
		// No write timeout: a blast's answer comes when the blast is over.
		IdleTimeout: time.Duration(hc.IdleTimeout),
		Protocols:   &p,
	}
	fmt.Printf("{\"listening\":%q}\n", "http://"+ln.Addr().String())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(netutil.LimitListener(ln, hc.MaxConnections)) }()
	select {
	case err := <-served:
		log.Printf("%s: %v", floorName, err)
		return 1
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	return 0
}

// cannedTask is the floor's answer to a submit: a task of the shape and
// size ontime answers for a bench task (apiv1.Task, encoded with a
// trailing newline as ontime's writeJSON does).
func cannedTask() ([]byte, error) {
	now := time.Now().UTC()
	due := now.Add(time.Hour)
	payload, _ := json.Marshal(job{ID: "single16-1999", Due: due})
	t := client.Task{ID: floorTaskID, Topic: "bench", DueAt: due, FirstDueAt: due, Payload: payload,
		Target: "http://127.0.0.1:40000/hook", MaxAttempts: ontime.DefaultMaxAttempts, Status: "pending",
		CreatedAt: now, UpdatedAt: now}
	b, err := json.Marshal(t)
	if err != nil {
		return nil, fmt.Errorf("canned task: %w", err)
	}
	return append(b, '\n'), nil
}

// hookClient is a client like ontime's webhook deliverer's shared one
// (internal/deliver/webhook newClient with no policy, delivery.concurrency
// 32): a clone of net/http's default transport keeping max(256,
// concurrency) idle connections per host and 1,024 in all, redirects not
// followed.
func hookClient(concurrency int) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 1024
	tr.MaxIdleConnsPerHost = max(256, concurrency)
	tr.IdleConnTimeout = 90 * time.Second
	return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
}

// blast posts b.N webhook calls, each one task's body as ontime sends it,
// by b.Concurrency workers from b.Start on.
func blast(ctx context.Context, b floorBlast) floorBlastResult {
	d := ontime.DefaultConfig().Delivery
	hc := hookClient(d.Concurrency)
	defer hc.CloseIdleConnections()
	timeout := time.Duration(d.Timeout)
	var (
		next     atomic.Int64
		mu       sync.Mutex
		out      floorBlastResult
		firstErr error
		wg       sync.WaitGroup
	)
	if wait := time.Until(b.Start); wait > 0 {
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return floorBlastResult{Failed: b.N, FirstError: ctx.Err().Error()}
		}
	}
	for range b.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				err := postHook(ctx, hc, timeout, b.Target, i, b.Start)
				mu.Lock()
				out.Sent++
				if err != nil {
					out.Failed++
					if firstErr == nil {
						firstErr = err
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		out.FirstError = firstErr.Error()
	}
	return out
}

// postHook makes webhook call i as ontime's deliverer does
// (internal/deliver/webhook Deliver, unsigned): the body
// {"id","topic","key","payload","due_at","attempt"} appended by hand,
// its headers, a deadline per call, the answer drained.
func postHook(ctx context.Context, hc *http.Client, timeout time.Duration, target string, i int, due time.Time) error {
	id := fmt.Sprintf("%.19s%07d", floorTaskID, i)
	payload, _ := json.Marshal(job{ID: fmt.Sprintf("burst-%d", i), Due: due})
	body := make([]byte, 0, 160+len(payload))
	body = append(body, `{"id":"`...)
	body = append(body, id...)
	body = append(body, `","topic":"bench","key":"","payload":`...)
	body = append(body, payload...)
	body = append(body, `,"due_at":"`...)
	body = due.UTC().AppendFormat(body, time.RFC3339Nano)
	body = append(body, `","attempt":1}`...)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header = http.Header{
		"Ontime-Task-Id": {id},
		"Ontime-Attempt": {"1"},
		"Content-Type":   {"application/json"},
		"User-Agent":     {"ontime"},
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("webhook answered HTTP %d", resp.StatusCode)
	}
	return nil
}

// floorSys is the bench side of the floor: its server process, the Go
// client of the service path, and the webhook receiver. It is a system
// only so that the enqueue pass and the burst's collection run on it
// unchanged; it is never among the compared systems.
type floorSys struct {
	cmd    *exec.Cmd
	exited chan struct{}
	addr   string
	hc     *http.Client
	api    *client.Client
	hook   *hookReceiver
}

func (f *floorSys) name() string { return floorName }

func (f *floorSys) path() string { return "HTTP + webhook, no store, no scheduler" }

func (f *floorSys) knobs() string {
	d := ontime.DefaultConfig().Delivery
	answer, _ := cannedTask()
	return fmt.Sprintf("the bench binary re-executed as a process of its own (as `ontime serve` is), a net/http server with `ontime serve`'s defaults "+
		"(HTTP/1.1 keep-alive beside h2c, http.* timeouts, LimitListener): `POST /v1/tasks` reads the body without decoding it and answers 201 with a canned task "+
		"(%d bytes, the shape ontime answers), no store; submitted to by the service path's code (`client.Submit` with coalescing off: one call per task; the same transport, the same calls by 1, 4 and 16 clients; the best of %d rounds, a ceiling). "+
		"Webhooks: the same process posts one call per task (ontime's body and headers, unsigned) to the bench's receiver, %d in flight, "+
		"with a client like ontime's webhook deliverer (net/http default transport clone, 256 idle connections per host, 1,024 in all, %s per call), "+
		"every call due at one instant and sent from it: drain and lateness are computed as the burst's (the best of %d rounds, run before the systems' bursts)",
		len(answer), floorRounds, d.Concurrency, time.Duration(d.Timeout), floorRounds)
}

func (f *floorSys) start(ctx context.Context, rec func(string, time.Time)) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("%s: locating the bench binary: %w", floorName, err)
	}
	if f.hook, err = startReceiver(rec); err != nil {
		return err
	}
	f.cmd = exec.Command(exe, floorChildArg)
	f.cmd.Stderr = os.Stderr
	first := &firstLine{line: make(chan string, 1)}
	f.cmd.Stdout = first
	if err := f.cmd.Start(); err != nil {
		return fmt.Errorf("%s: starting %s: %w", floorName, exe, err)
	}
	f.exited = make(chan struct{})
	go func() {
		_ = f.cmd.Wait()
		close(f.exited)
	}()
	select {
	case l := <-first.line:
		var m map[string]string
		if json.Unmarshal([]byte(l), &m) != nil || m["listening"] == "" {
			return fmt.Errorf("%s: unexpected first line: %q", floorName, l)
		}
		f.addr = m["listening"]
	case <-f.exited:
		return fmt.Errorf("%s: its process exited at start", floorName)
	case <-time.After(time.Minute):
		return fmt.Errorf("%s: no listening line within 1m", floorName)
	case <-ctx.Done():
		return ctx.Err()
	}
	f.hc, f.api, err = submitClient(f.addr, false)
	return err
}

func (f *floorSys) enqueue(context.Context, []job) error {
	return errors.New("the net/http floor measures single submits only")
}

// enqueueOne is serviceSys.enqueueOne: the same request, the same client.
func (f *floorSys) enqueueOne(ctx context.Context, j job) error {
	_, _, err := f.api.Submit(ctx, taskRequest(j, f.hook.url()))
	return err
}

func (f *floorSys) perCall() float64 {
	if f.hook == nil {
		return 0
	}
	return f.hook.perCall()
}

// webhooks asks the floor's process for a blast; it answers once every
// call is answered.
func (f *floorSys) webhooks(ctx context.Context, b floorBlast) (floorBlastResult, error) {
	var out floorBlastResult
	body, _ := json.Marshal(b)
	ctx, cancel := context.WithTimeout(ctx, maxWait+time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.addr+"/floor/webhooks", bytes.NewReader(body))
	if err != nil {
		return out, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return out, fmt.Errorf("%s: blast: %w", floorName, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return out, fmt.Errorf("%s: blast answered HTTP %d: %s", floorName, resp.StatusCode, bytes.TrimSpace(msg))
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return out, fmt.Errorf("%s: blast answer: %w", floorName, err)
	}
	return out, nil
}

func (f *floorSys) stop() {
	if f.cmd != nil && f.cmd.Process != nil {
		_ = f.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-f.exited:
		case <-time.After(15 * time.Second):
			_ = f.cmd.Process.Kill()
			<-f.exited
		}
		if ps := f.cmd.ProcessState; ps != nil {
			log.Printf("%s: server CPU %s (user %s, system %s)", floorName, (ps.UserTime() + ps.SystemTime()).Round(time.Millisecond),
				ps.UserTime().Round(time.Millisecond), ps.SystemTime().Round(time.Millisecond))
		}
	}
	if f.hc != nil {
		f.hc.CloseIdleConnections()
	}
	if f.hook != nil {
		f.hook.stop()
	}
	f.cmd, f.exited, f.addr, f.hc, f.api, f.hook = nil, nil, "", nil, nil, nil
}

// floorFigures are the floor's measurements of a run.
type floorFigures struct {
	Enq     enqRates // single submits by 1, 4 and 16 clients (0: not run)
	Hook    *result  // the webhook blast, as a burst (nil: not run)
	Concurr int      // webhook calls in flight
	Failed  int      // webhook calls that failed
}

// floorSubmits runs the enqueue pass's single submits against the floor.
func floorSubmits(ctx context.Context, n int, keyed bool) (enqRates, error) {
	var out enqRates
	f := &floorSys{}
	rec := newRecorder()
	if err := f.start(ctx, rec.rec); err != nil {
		f.stop()
		return out, err
	}
	defer f.stop()
	// A ceiling: the best of a few rounds, since one round of n calls is
	// a fraction of a second and a shared machine swings it 3×.
	for range floorRounds {
		var r enqRates
		if err := singles(ctx, f, n, time.Now().Add(time.Hour), keyed, &r); err != nil {
			return out, err
		}
		out.Single, out.Single4, out.Single16 = max(out.Single, r.Single), max(out.Single4, r.Single4), max(out.Single16, r.Single16)
	}
	return out, nil
}

// floorRounds is how many times the submit floor repeats the enqueue
// pass's single submits; it reports the best of them.
const floorRounds = 3

// floorWebhooks runs n webhook calls from the floor's process, all due
// at one instant, collects them as a burst and fills in fig.
func floorWebhooks(ctx context.Context, n int, fig *floorFigures) error {
	f := &floorSys{}
	rec := newRecorder()
	if err := f.start(ctx, rec.rec); err != nil {
		f.stop()
		return err
	}
	defer f.stop()
	// A moment ahead, so the call asking for it has arrived by then.
	due := time.Now().Add(500 * time.Millisecond)
	type answer struct {
		r   floorBlastResult
		err error
	}
	done := make(chan answer, 1)
	conc := ontime.DefaultConfig().Delivery.Concurrency
	go func() {
		r, err := f.webhooks(ctx, floorBlast{Target: f.hook.url(), N: n, Concurrency: conc, Start: due})
		done <- answer{r, err}
	}()
	res := result{System: floorName, Path: f.path(), Workload: "burst", N: n}
	collect(f, rec, &res, due, due, maxWait)
	a := <-done
	if a.err != nil {
		return a.err
	}
	if a.r.Failed > 0 {
		res.Note = fmt.Sprintf("%d of %d webhook calls failed, the first: %s", a.r.Failed, a.r.Sent, a.r.FirstError)
		log.Printf("%s: %s", floorName, res.Note)
	}
	fig.Hook, fig.Failed, fig.Concurr = &res, a.r.Failed, conc
	return nil
}
