package e2e

// The chaos suite (issue 11): real `ontime serve` processes, real servers,
// and faults — kill -9, a store or Redis crashing, hostile receivers and
// clients, a burst. Every scenario submits tasks with due times it picked
// (to the nanosecond, so rounding anywhere shows), records every webhook
// call by the receiver's clock at arrival, and prints
//
//	submitted / delivered / lost / duplicated / early / lateness p50 p99 max
//
// It fails on any lost task (acknowledged, never answered 2xx by the
// receiver) and on any early call (a call of any attempt that arrived
// before the due time the test submitted, even by a nanosecond: due times
// are rounded up to the stores' microsecond, never down). Duplicates fail
// only the scenarios without a kill or a restart. Lateness is printed,
// never asserted (a shared machine).
//
// `go test` runs the short version; `make chaos` (ONTIME_CHAOS=full) the
// full one. Sizes can be set with ONTIME_CHAOS_<NAME> (see chaosSize).

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/client"
)

// chaosFull: `make chaos` runs the full-size scenarios.
func chaosFull() bool { return os.Getenv("ONTIME_CHAOS") == "full" }

// chaosSize is a scenario's size: short under `go test`, full under
// `make chaos`, ONTIME_CHAOS_<name> when set.
func chaosSize(t *testing.T, name string, short, full int) int {
	t.Helper()
	v := short
	if chaosFull() {
		v = full
	}
	if s := os.Getenv("ONTIME_CHAOS_" + name); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			t.Fatalf("ONTIME_CHAOS_%s=%q: want a positive integer", name, s)
		}
		v = n
	}
	return v
}

// chaosParallel runs the short scenarios beside the other e2e tests (their
// lateness is printed, not asserted) and the full ones alone, so that the
// figures of `make chaos` are each scenario's own.
func chaosParallel(t *testing.T) {
	if !chaosFull() {
		t.Parallel()
	}
}

// chaosRecord is what the receiver saw of one task.
type chaosRecord struct {
	calls    int32     // calls of any outcome
	oks      int32     // calls answered 2xx: deliveries
	earliest time.Time // arrival of its earliest call
	firstOK  time.Time // arrival of its first delivery
	attempt  int32     // the attempt of its first delivery (Ontime-Attempt)
	// later: the calls after the first (arrival, attempt, answered 2xx),
	// kept to trace duplicates; nil for the tasks called once.
	later []chaosCall
}

// chaosCall is one call after a task's first.
type chaosCall struct {
	at      time.Time
	attempt int
	ok      bool
}

// chaosReceiver is a webhook endpoint that keeps, per task, counts and
// arrival times only (a 2,000,000-task run must fit in memory).
type chaosReceiver struct {
	srv *httptest.Server
	// reply answers a call and says whether it answered 2xx; nil: 200.
	reply func(w http.ResponseWriter, r *http.Request, id string, attempt int) bool

	mu        sync.Mutex
	recs      map[string]*chaosRecord
	delivered atomic.Int64 // tasks with at least one delivery
}

func newChaosReceiver(t *testing.T, reply func(w http.ResponseWriter, r *http.Request, id string, attempt int) bool) *chaosReceiver {
	r := &chaosReceiver{reply: reply, recs: map[string]*chaosRecord{}}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *chaosReceiver) serve(w http.ResponseWriter, req *http.Request) {
	// Wall clock only (Round(0) drops the monotonic reading): ontime
	// compares wall times, and two readings that both carry a monotonic
	// one compare by it, which drifts from the wall clock under NTP.
	at := time.Now().Round(0)
	id := req.Header.Get("Ontime-Task-Id")
	attempt, _ := strconv.Atoi(req.Header.Get("Ontime-Attempt"))
	r.mu.Lock()
	rec := r.recs[id]
	if rec == nil {
		rec = &chaosRecord{earliest: at}
		r.recs[id] = rec
	}
	rec.calls++
	nth := rec.calls
	if at.Before(rec.earliest) {
		rec.earliest = at
	}
	r.mu.Unlock()
	ok := true
	if r.reply != nil {
		ok = r.reply(w, req, id, attempt)
	} else {
		_, _ = io.Copy(io.Discard, req.Body)
	}
	r.mu.Lock()
	if nth > 1 {
		rec.later = append(rec.later, chaosCall{at: at, attempt: attempt, ok: ok})
	}
	if !ok {
		r.mu.Unlock()
		return
	}
	rec.oks++
	if rec.oks == 1 {
		rec.firstOK, rec.attempt = at, int32(attempt)
		r.delivered.Add(1)
	}
	r.mu.Unlock()
}

// chaosLoad submits tasks through a set of nodes, trying the next one when
// a node is down or answers 503, with a key per task so that a retried
// batch never makes a second task. It remembers the due time it submitted
// for every acknowledged task.
type chaosLoad struct {
	t      *testing.T
	name   string // topic and key prefix
	target string
	// maxAttempts, when set, is every task's max_attempts.
	maxAttempts int
	payload     json.RawMessage
	clients     []*client.Client
	// down marks the nodes known to be down (killed, not yet restarted):
	// submits go round-robin to the others, as a load balancer would.
	down []atomic.Bool

	mu      sync.Mutex
	due     map[string]time.Time // acknowledged tasks: ID → submitted due time
	next    atomic.Int64         // key counter
	turn    atomic.Int64         // node to try first
	retried atomic.Int64         // submit calls failed and retried elsewhere
	// Why submits failed: 503 unavailable, 500 internal (a store that went
	// away should be the former), no answer (a node down, a connection cut).
	unavailable, internal, noAnswer atomic.Int64
	rounded                         atomic.Int64 // answers whose due_at is before the submitted one
	finished                        atomic.Bool
	gaveUp                          atomic.Bool // a batch was never acknowledged: stop submitting
	halt                            atomic.Bool // stop submitting after the batch under way (a stream sized by time)
}

func newChaosLoad(t *testing.T, name, target string, addrs ...string) *chaosLoad {
	l := &chaosLoad{t: t, name: name, target: target, due: map[string]time.Time{}}
	for _, a := range addrs {
		c, err := client.New("http://"+a, client.WithHTTPClient(&http.Client{Timeout: 60 * time.Second}))
		if err != nil {
			t.Fatal(err)
		}
		l.clients = append(l.clients, c)
	}
	l.down = make([]atomic.Bool, len(l.clients))
	return l
}

// setDown marks node i down (no submits sent to it) or up again.
func (l *chaosLoad) setDown(i int, down bool) { l.down[i].Store(down) }

// pick is the next node in turn that is not marked down (any node when all
// are).
func (l *chaosLoad) pick() *client.Client {
	for range len(l.clients) {
		i := int(l.turn.Add(1)) % len(l.clients)
		if !l.down[i].Load() {
			return l.clients[i]
		}
	}
	return l.clients[int(l.turn.Add(1))%len(l.clients)]
}

// submit submits one task per due time and returns once every one is
// acknowledged, or fails the test after two minutes of trying.
func (l *chaosLoad) submit(ctx context.Context, dues []time.Time) {
	reqs := make([]apiv1.TaskRequest, len(dues))
	for i, d := range dues {
		reqs[i] = apiv1.TaskRequest{
			Topic: "chaos." + l.name, Key: fmt.Sprintf("%s-%d", l.name, l.next.Add(1)),
			DueAt: d.Format(time.RFC3339Nano), Payload: l.payload, Target: l.target,
			MaxAttempts: l.maxAttempts,
		}
	}
	pending := make([]int, len(reqs))
	for i := range pending {
		pending[i] = i
	}
	deadline := time.Now().Add(2 * time.Minute)
	for try := 0; len(pending) > 0; try++ {
		if ctx.Err() != nil || time.Now().After(deadline) {
			l.t.Errorf("%s: %d tasks not acknowledged after %d tries in %s (%s)", l.name, len(pending), try, 2*time.Minute, l.failures())
			l.gaveUp.Store(true)
			return
		}
		if try > 0 {
			l.retried.Add(1)
			time.Sleep(time.Duration(min(try, 10)) * 50 * time.Millisecond)
		}
		c := l.pick()
		batch := make([]apiv1.TaskRequest, len(pending))
		for j, i := range pending {
			batch[j] = reqs[i]
		}
		items, err := c.SubmitBatch(ctx, batch)
		if err != nil {
			if client.HasCode(err, apiv1.CodeInvalid) || client.HasCode(err, apiv1.CodeTooLarge) {
				l.t.Errorf("%s: batch refused: %v", l.name, err)
				return
			}
			switch {
			case client.HasCode(err, apiv1.CodeUnavailable):
				l.unavailable.Add(1)
			case client.HasCode(err, apiv1.CodeInternal):
				l.internal.Add(1)
			default:
				l.noAnswer.Add(1)
			}
			continue // node down, cut off, or its store unreachable
		}
		var still []int
		l.mu.Lock()
		for j, it := range items {
			i := pending[j]
			if it.Error != nil {
				if it.Error.Code == apiv1.CodeUnavailable || it.Error.Code == apiv1.CodeInternal {
					if it.Error.Code == apiv1.CodeInternal {
						l.internal.Add(1)
					} else {
						l.unavailable.Add(1)
					}
					still = append(still, i)
					continue
				}
				l.t.Errorf("%s: task refused: %+v", l.name, *it.Error)
				continue
			}
			l.due[it.ID] = dues[i]
			if it.DueAt.Before(dues[i]) {
				l.rounded.Add(1)
			}
		}
		l.mu.Unlock()
		pending = still
	}
}

// stream submits n tasks in batches of size every period, each due between
// lo and hi after its submission (uniformly, nanoseconds included). It
// returns when all are acknowledged.
func (l *chaosLoad) stream(ctx context.Context, n, size int, every, lo, hi time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for sent := 0; sent < n && ctx.Err() == nil && !l.gaveUp.Load() && !l.halt.Load(); sent += size {
		k := min(size, n-sent)
		dues := make([]time.Time, k)
		now := time.Now().Round(0) // wall clock: see chaosReceiver.serve
		for i := range dues {
			f := float64((sent+i)*7919%1000) / 1000 // spread, deterministic
			dues[i] = now.Add(lo + time.Duration(f*float64(hi-lo)) + time.Duration(i*37%1000))
		}
		l.submit(ctx, dues)
		select {
		case <-tick.C:
		case <-ctx.Done():
		}
	}
	l.finished.Store(true)
}

// streamBackground runs stream in a goroutine; the returned func waits for
// it.
func (l *chaosLoad) streamBackground(ctx context.Context, n, size int, every, lo, hi time.Duration) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.stream(ctx, n, size, every, lo, hi)
	}()
	return func() { <-done }
}

// failures sums up why submits were retried.
func (l *chaosLoad) failures() string {
	return fmt.Sprintf("submits retried %d (503 %d, 500 %d, no answer %d)", l.retried.Load(), l.unavailable.Load(), l.internal.Load(), l.noAnswer.Load())
}

func (l *chaosLoad) submitted() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.due)
}

// chaosResult is one scenario's count.
type chaosResult struct {
	Submitted, Delivered, Lost, Duplicated, Extra, Early, Unknown int
	// RoundedDown: tasks the API answered with a due time before the one
	// submitted (a store or the API rounding down: early by design).
	RoundedDown int
	// Over30s: tasks first delivered more than 30 s after their due time.
	Over30s                 int
	P50, P99, Max, MaxEarly time.Duration
	Calls                   int
}

func (c chaosResult) String() string {
	return fmt.Sprintf("submitted %d delivered %d lost %d duplicated %d (%d extra deliveries) early %d (max %s) unknown %d calls %d lateness p50 %s p99 %s max %s, %d over 30s",
		c.Submitted, c.Delivered, c.Lost, c.Duplicated, c.Extra, c.Early, c.MaxEarly, c.Unknown, c.Calls,
		c.P50.Round(time.Microsecond), c.P99.Round(time.Microsecond), c.Max.Round(time.Microsecond), c.Over30s)
}

// settle waits until every acknowledged task was delivered or timeout
// passed, then quiet longer so that late duplicates show.
func (r *chaosReceiver) settle(l *chaosLoad, timeout, quiet time.Duration) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if l.finished.Load() && int(r.delivered.Load()) >= l.submitted() && r.lost(l) == 0 {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	time.Sleep(quiet)
}

// lost counts acknowledged tasks not delivered yet.
func (r *chaosReceiver) lost(l *chaosLoad) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for id := range l.due {
		if rec := r.recs[id]; rec == nil || rec.oks == 0 {
			n++
		}
	}
	return n
}

// count joins what was submitted with what was received.
func (r *chaosReceiver) count(l *chaosLoad) chaosResult { return r.countDue(l, nil) }

// countDue counts the tasks whose submitted due time keep accepts (all
// when keep is nil).
func (r *chaosReceiver) countDue(l *chaosLoad, keep func(due time.Time) bool) chaosResult {
	l.mu.Lock()
	defer l.mu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	res := chaosResult{Submitted: len(l.due), RoundedDown: int(l.rounded.Load())}
	late := make([]time.Duration, 0, len(l.due))
	for id, due := range l.due {
		if keep != nil && !keep(due) {
			res.Submitted--
			continue
		}
		rec := r.recs[id]
		if rec == nil || rec.oks == 0 {
			res.Lost++
		} else {
			res.Delivered++
			late = append(late, rec.firstOK.Sub(due))
			if rec.firstOK.Sub(due) > 30*time.Second {
				res.Over30s++
			}
			if rec.oks > 1 {
				res.Duplicated++
				res.Extra += int(rec.oks - 1)
			}
		}
		if rec != nil && rec.earliest.Before(due) {
			res.Early++
			res.MaxEarly = max(res.MaxEarly, due.Sub(rec.earliest))
		}
	}
	for id, rec := range r.recs {
		res.Calls += int(rec.calls)
		if _, ok := l.due[id]; !ok {
			res.Unknown++
		}
	}
	if len(late) > 0 {
		sort.Slice(late, func(i, j int) bool { return late[i] < late[j] })
		res.P50 = late[len(late)/2]
		res.P99 = late[min(len(late)-1, len(late)*99/100)]
		res.Max = late[len(late)-1]
	}
	return res
}

// lateTask is one task's first delivery, for tracing the latest.
type lateTask struct {
	id      string
	due     time.Time
	late    time.Duration
	attempt int32
	calls   int32
}

// latest lists the k tasks delivered latest after their due time.
func (r *chaosReceiver) latest(l *chaosLoad, k int) []lateTask {
	l.mu.Lock()
	defer l.mu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []lateTask
	for id, due := range l.due {
		if rec := r.recs[id]; rec != nil && rec.oks > 0 {
			out = append(out, lateTask{id: id, due: due, late: rec.firstOK.Sub(due), attempt: rec.attempt, calls: rec.calls})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].late > out[j].late })
	return out[:min(k, len(out))]
}

// duplicates describes up to k duplicated tasks, call by call, relative
// to start: to trace why they were delivered again.
func (r *chaosReceiver) duplicates(l *chaosLoad, start time.Time, k int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for id, due := range l.due {
		rec := r.recs[id]
		if rec == nil || rec.oks < 2 {
			continue
		}
		line := fmt.Sprintf("%s due +%s: first call +%s (attempt of first 2xx %d)", id, due.Sub(start).Round(time.Millisecond),
			rec.earliest.Sub(start).Round(time.Millisecond), rec.attempt)
		for _, c := range rec.later {
			line += fmt.Sprintf(", +%s attempt %d ok %v", c.at.Sub(start).Round(time.Millisecond), c.attempt, c.ok)
		}
		out = append(out, line)
	}
	sort.Strings(out)
	return out[:min(k, len(out))]
}

// chaosVerdict prints the scenario's line and fails it on a lost or early
// task, and on a duplicate unless dupsAllowed (a kill or restart happened).
func chaosVerdict(t *testing.T, scenario string, res chaosResult, dupsAllowed bool, extra string) {
	t.Helper()
	line := "chaos " + scenario + ": " + res.String()
	if extra != "" {
		line += "; " + extra
	}
	line += "; load average " + loadAvg()
	t.Log(line)
	appendChaosOut(line)
	if res.Submitted == 0 {
		t.Errorf("%s: nothing was submitted", scenario)
	}
	if res.Lost > 0 {
		t.Errorf("%s: %d acknowledged tasks never delivered", scenario, res.Lost)
	}
	if res.Early > 0 {
		t.Errorf("%s: %d tasks called before their due time (by up to %s)", scenario, res.Early, res.MaxEarly)
	}
	if res.RoundedDown > 0 {
		t.Errorf("%s: %d tasks answered with a due_at before the one submitted", scenario, res.RoundedDown)
	}
	if res.Duplicated > 0 && !dupsAllowed {
		t.Errorf("%s: %d tasks delivered more than once with no kill or restart", scenario, res.Duplicated)
	}
}

// appendChaosOut appends a scenario's line to $ONTIME_CHAOS_OUT, when set
// (`make chaos`: chaos-results.txt).
func appendChaosOut(line string) {
	if out := os.Getenv("ONTIME_CHAOS_OUT"); out != "" {
		if f, err := os.OpenFile(out, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			fmt.Fprintln(f, line)
			f.Close()
		}
	}
}

// loadAvg is the machine's load average (1, 5 and 15 minutes), printed
// beside lateness figures: they depend on it.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// writeChaosConfig writes an ontime.yaml into dir.
func writeChaosConfig(t *testing.T, dir, body string) string {
	t.Helper()
	path := filepath.Join(dir, "ontime.yaml")
	body = "data_dir: " + filepath.Join(dir, "data") + "\n" + strings.TrimLeft(body, "\n")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// peakRSS is a process's peak resident set (VmHWM), or 0 when unknown.
func peakRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}
