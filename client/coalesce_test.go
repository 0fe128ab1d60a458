package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/client"
	"github.com/ontimehq/ontime/internal/api/apitest"
)

const hook = "http://127.0.0.1:9/t"

// gate is the HTTP transport of the coalescing tests: it counts every
// call (singles, and batches with their sizes), can hold calls until the
// test releases them, and can answer batch calls itself (a proxy's or a
// failing node's answer). It makes the tests' batches deterministic: the
// first Submit is held in flight, the others queue behind it, and the test
// sees them queued (client.Queued) before it lets the call go.
type gate struct {
	rt http.RoundTripper

	mu      sync.Mutex
	singles int
	batches []int // tasks per batch call
	hold    bool
	fake    func(*http.Request) (*http.Response, error) // answers batch calls when set

	arrived  chan string   // the path of every held call
	release  chan struct{} // one held call goes per token
	canceled chan string   // the path of a held call whose context ended
}

func newGate() *gate {
	return &gate{rt: http.DefaultTransport.(*http.Transport).Clone(), arrived: make(chan string, 64),
		release: make(chan struct{}, 64), canceled: make(chan string, 64)}
}

func (g *gate) RoundTrip(r *http.Request) (*http.Response, error) {
	g.mu.Lock()
	if r.URL.Path == "/v1/tasks:batch" {
		body, _ := r.GetBody()
		var br apiv1.BatchRequest
		raw, _ := io.ReadAll(body)
		if err := json.Unmarshal(raw, &br); err != nil {
			g.mu.Unlock()
			return nil, err
		}
		g.batches = append(g.batches, len(br.Tasks))
	} else if r.URL.Path == "/v1/tasks" && r.Method == http.MethodPost {
		g.singles++
	}
	hold, fake := g.hold, g.fake
	g.mu.Unlock()
	if hold {
		g.arrived <- r.URL.Path
		select {
		case <-g.release:
		case <-r.Context().Done():
			g.canceled <- r.URL.Path
			return nil, r.Context().Err()
		}
	}
	if fake != nil && r.URL.Path == "/v1/tasks:batch" {
		return fake(r)
	}
	return g.rt.RoundTrip(r)
}

func (g *gate) setHold(h bool) {
	g.mu.Lock()
	g.hold = h
	g.mu.Unlock()
}

func (g *gate) counts() (singles int, batches []int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.singles, append([]int(nil), g.batches...)
}

// gatedClient is a client over g. One coalesced call at a time (unless
// opts say otherwise), so a held call makes every other Submit queue.
func gatedClient(t *testing.T, base string, g *gate, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New(base, append([]client.Option{client.WithHTTPClient(&http.Client{Transport: g}), client.WithCoalesce(client.Coalesce{Calls: 1})}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type result struct {
	task    *client.Task
	created bool
	err     error
}

// submitAsync submits r in a goroutine of its own; the answer comes on the
// channel.
func submitAsync(ctx context.Context, c *client.Client, r client.TaskRequest) chan result {
	ch := make(chan result, 1)
	go func() {
		tk, created, err := c.Submit(ctx, r)
		ch <- result{tk, created, err}
	}()
	return ch
}

// waitQueued waits until n Submits of c are queued.
func waitQueued(t *testing.T, c *client.Client, n int) {
	t.Helper()
	for client.Queued(c) != n {
		runtime.Gosched()
	}
}

// heldBatch submits a lone leader whose call is held, queues reqs behind
// it one at a time (so in this order), then lets the leader's call go: the
// queue goes as one batch. It returns the leader's answer and reqs'.
func heldBatch(t *testing.T, ctx context.Context, c *client.Client, g *gate, lead client.TaskRequest, reqs []client.TaskRequest) (result, []result) {
	t.Helper()
	g.setHold(true)
	first := submitAsync(ctx, c, lead)
	if p := <-g.arrived; p != "/v1/tasks" {
		t.Fatalf("a lone submit went to %s, not alone", p)
	}
	chans := make([]chan result, len(reqs))
	for i, r := range reqs {
		chans[i] = submitAsync(ctx, c, r)
		waitQueued(t, c, i+1)
	}
	g.setHold(false)
	g.release <- struct{}{}
	out := make([]result, len(reqs))
	for i, ch := range chans {
		out[i] = <-ch
	}
	return <-first, out
}

func tokenFile(t *testing.T, tok string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(f, []byte(tok), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestCoalescedAnswersAreSingleAnswers: tasks that rode one batch call get
// exactly what single submits of the same tasks, in the same order, get
// from a node configured alike: created or not, the same task, and per-task
// errors as the same *APIError (status, code, field, message) — bad input,
// a payload over the limit, a topic outside the token's scope, keys
// submitted twice in the batch (kept, then replaced), as if sequential.
func TestCoalescedAnswersAreSingleAnswers(t *testing.T) {
	t.Parallel()
	mod := func(cfg *ontime.Config) {
		cfg.Delivery.MaxPayloadBytes = 100
		cfg.Auth.Tokens = []ontime.TokenConfig{{Name: "w", TokenFile: tokenFile(t, "secret-w-0123456789"), Role: "write", Topics: "p.*"}}
	}
	big := json.RawMessage(`"` + strings.Repeat("x", 200) + `"`)
	lead := client.TaskRequest{Topic: "p.a", Key: "k0", Delay: "1h", Target: hook}
	reqs := []client.TaskRequest{
		{Topic: "p.a", Key: "k1", Delay: "1h", Target: hook, Payload: json.RawMessage(`{"n":1}`)},
		{Topic: "bad topic", Target: hook},
		{Topic: "p.a", Key: "k1", Delay: "2h", Target: hook},
		{Topic: "p.a", Key: "k1", Delay: "3h", Target: hook, IfExists: apiv1.IfExistsReplace, Payload: json.RawMessage(`{"n":2}`)},
		{Topic: "p.a", Key: "k2", Target: hook, Payload: big},
		{Topic: "q.x", Key: "k3", Target: hook},
		{Topic: "p.a", Delay: "soon", Target: hook},
		{Topic: "p.a", Key: "k4", IfExists: "maybe", Target: hook},
		{Topic: "p.b", Key: "k5", DueAt: "2099-01-02T03:04:05Z", MaxAttempts: 3, Target: hook},
		{Topic: "p.a", Key: "k6", MaxAttempts: -1, Target: hook},
		{Topic: "p.a", Key: "k0", Target: hook},
		{Topic: "p.c", Key: "k7", Delay: "1h"}, // no target, no handler
		{Topic: "p.b", Key: "k5", IfExists: apiv1.IfExistsReplace, Delay: "1h", Target: "ftp://nowhere/"},
	}
	ctx := context.Background()

	g := newGate()
	co := gatedClient(t, apitest.Start(t, mod), g, client.WithToken("secret-w-0123456789"))
	leadGot, got := heldBatch(t, ctx, co, g, lead, reqs)
	if singles, batches := g.counts(); singles != 1 || !reflect.DeepEqual(batches, []int{len(reqs)}) {
		t.Fatalf("calls: %d singles, batches %v; want the lone leader alone, then one batch of %d", singles, batches, len(reqs))
	}

	single := gatedClient(t, apitest.Start(t, mod), newGate(), client.WithToken("secret-w-0123456789"), client.WithCoalesce(client.Coalesce{Off: true}))
	want := []result{}
	for _, r := range append([]client.TaskRequest{lead}, reqs...) {
		tk, created, err := single.Submit(ctx, r)
		want = append(want, result{tk, created, err})
	}
	for i, g := range append([]result{leadGot}, got...) {
		w := want[i]
		if (g.err == nil) != (w.err == nil) {
			t.Errorf("task %d: coalesced error %v; single %v", i, g.err, w.err)
			continue
		}
		if w.err != nil {
			var ge, we *client.APIError
			if !errors.As(g.err, &ge) || !errors.As(w.err, &we) || *ge != *we {
				t.Errorf("task %d: coalesced error %#v; single %#v", i, g.err, w.err)
			}
			continue
		}
		if g.created != w.created || !sameTask(g.task, w.task) {
			t.Errorf("task %d: coalesced %+v created %v;\nsingle %+v created %v", i, *g.task, g.created, *w.task, w.created)
		}
	}
	// The key's later submits in the batch found the first's task.
	if got[0].err != nil || got[2].err != nil || got[3].err != nil || got[2].task.ID != got[0].task.ID || got[3].task.ID != got[0].task.ID {
		t.Errorf("key k1 in one batch: %+v %+v %+v", got[0], got[2], got[3])
	}
	if got[10].err != nil || got[10].task.ID != leadGot.task.ID {
		t.Errorf("key k0 resubmitted in the batch after its lone submit: %+v; lone %+v", got[10], leadGot)
	}
}

// sameTask compares what two nodes answer for the same submit: all but
// the ID and the instants.
func sameTask(a, b *client.Task) bool {
	norm := func(t client.Task) client.Task {
		t.ID, t.DueAt, t.FirstDueAt, t.CreatedAt, t.UpdatedAt = "", t.DueAt.Round(24*3600e9), t.FirstDueAt.Round(24*3600e9), t.CreatedAt.Round(24*3600e9), t.UpdatedAt.Round(24*3600e9)
		if t.NextAttemptAt != nil {
			at := t.NextAttemptAt.Round(24 * 3600e9)
			t.NextAttemptAt = &at
		}
		return t
	}
	return reflect.DeepEqual(norm(*a), norm(*b))
}

// TestCoalescingUnderConcurrency: many goroutines submitting keyed tasks
// (keys shared between them) and bad ones through one client: every key is
// created once and every submit of it gets that task, bad ones get their
// error, and every task is sent exactly once (singles plus batch items).
func TestCoalescingUnderConcurrency(t *testing.T) {
	t.Parallel()
	g := newGate()
	c := gatedClient(t, apitest.Start(t, nil), g, client.WithCoalesce(client.Coalesce{})) // the defaults
	const workers, each, keys = 16, 60, 50
	type answer struct {
		key string
		result
	}
	answers := make(chan answer, workers*each)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				n := w*each + i
				r := client.TaskRequest{Topic: "race", Key: fmt.Sprintf("k%d", n%keys), Delay: "1h", Target: hook, Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n))}
				if n%7 == 0 {
					r.Topic, r.Key = "bad topic", ""
				}
				tk, created, err := c.Submit(context.Background(), r)
				answers <- answer{r.Key, result{tk, created, err}}
			}
		}()
	}
	wg.Wait()
	close(answers)
	ids := map[string]string{}
	created := map[string]int{}
	for a := range answers {
		if a.key == "" {
			if !client.HasCode(a.err, apiv1.CodeInvalid) {
				t.Fatalf("bad topic: %v", a.err)
			}
			continue
		}
		if a.err != nil {
			t.Fatalf("key %s: %v", a.key, a.err)
		}
		if id, ok := ids[a.key]; ok && id != a.task.ID {
			t.Fatalf("key %s answered tasks %s and %s", a.key, id, a.task.ID)
		}
		ids[a.key] = a.task.ID
		if a.created {
			created[a.key]++
		}
	}
	for k := range ids {
		if created[k] != 1 {
			t.Errorf("key %s created %d times", k, created[k])
		}
	}
	singles, batches := g.counts()
	sent := singles
	for _, n := range batches {
		sent += n
	}
	if sent != workers*each {
		t.Fatalf("%d tasks sent for %d submits", sent, workers*each)
	}
	t.Logf("%d submits: %d singles, %d batches", workers*each, singles, len(batches))
}

// TestLoneSubmitsGoAlone: a sequential caller's submits are plain single
// calls, never batches (no linger: each is sent at once).
func TestLoneSubmitsGoAlone(t *testing.T) {
	t.Parallel()
	g := newGate()
	c := gatedClient(t, apitest.Start(t, nil), g)
	for i := range 20 {
		_, created, err := c.Submit(context.Background(), client.TaskRequest{Topic: "lone", Key: fmt.Sprint(i), Delay: "1h", Target: hook})
		if err != nil || !created {
			t.Fatalf("submit %d: %v created=%v", i, err, created)
		}
	}
	if singles, batches := g.counts(); singles != 20 || len(batches) != 0 {
		t.Fatalf("%d singles, batches %v; want 20 singles", singles, batches)
	}
}

// TestCoalescedCancellation: a Submit cancelled while queued returns at
// once and sends nothing; one cancelled while its batch is in flight
// returns at once, the others' tasks are written (its own may be); a
// batch whose every caller left is cancelled.
func TestCoalescedCancellation(t *testing.T) {
	t.Parallel()
	g := newGate()
	base := apitest.Start(t, nil)
	c := gatedClient(t, base, g)
	ctx := context.Background()
	req := func(k string) client.TaskRequest {
		return client.TaskRequest{Topic: "cancel", Key: k, Delay: "1h", Target: hook}
	}

	g.setHold(true)
	lead := submitAsync(ctx, c, req("lead"))
	<-g.arrived
	actx, cancelA := context.WithCancel(ctx)
	a := submitAsync(actx, c, req("a"))
	waitQueued(t, c, 1)
	b := submitAsync(ctx, c, req("b"))
	waitQueued(t, c, 2)
	cctx, cancelC := context.WithCancel(ctx)
	cc := submitAsync(cctx, c, req("c"))
	waitQueued(t, c, 3)
	cancelA()
	if r := <-a; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("queued submit cancelled: %+v", r)
	}
	waitQueued(t, c, 2)
	g.release <- struct{}{} // the lead's call; b leads [b, c], held
	if p := <-g.arrived; p != "/v1/tasks:batch" {
		t.Fatalf("the queue went to %s", p)
	}
	cancelC()
	if r := <-cc; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("submit cancelled in flight: %+v", r)
	}
	g.release <- struct{}{}
	if r := <-b; r.err != nil || !r.created {
		t.Fatalf("b, batched with a cancelled submit: %+v", r)
	}
	if r := <-lead; r.err != nil || !r.created {
		t.Fatalf("lead: %+v", r)
	}
	if singles, batches := g.counts(); singles != 1 || !reflect.DeepEqual(batches, []int{2}) {
		t.Fatalf("%d singles, batches %v; want the lead alone and [b c]", singles, batches)
	}
	plain := newClient(t, base)
	if _, err := plain.GetByKey(ctx, "cancel", "a"); !client.IsNotFound(err) {
		t.Fatalf("the submit cancelled while queued was written: %v", err)
	}
	if _, err := plain.GetByKey(ctx, "cancel", "c"); err != nil {
		t.Fatalf("the submit cancelled in flight: its call went on for b, so it was written: %v", err)
	}

	// Every caller of a held batch leaves: the call is cancelled.
	lead = submitAsync(ctx, c, req("lead2"))
	<-g.arrived
	dctx, cancelD := context.WithCancel(ctx)
	d := submitAsync(dctx, c, req("d"))
	waitQueued(t, c, 1)
	ectx, cancelE := context.WithCancel(ctx)
	e := submitAsync(ectx, c, req("e"))
	waitQueued(t, c, 2)
	g.release <- struct{}{}
	<-g.arrived // [d e], d making the call, held
	cancelE()
	if r := <-e; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("e: %+v", r)
	}
	select {
	case p := <-g.canceled:
		t.Fatalf("call %s cancelled while d still waits", p)
	default:
	}
	// d makes the call: it returns when the call ends, which is now that
	// nobody waits for it.
	cancelD()
	if r := <-d; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("d: %+v", r)
	}
	if p := <-g.canceled; p != "/v1/tasks:batch" {
		t.Fatalf("cancelled: %s", p)
	}
	<-lead
	g.setHold(false)
}

// TestCoalescedWholeBatchFailures: what a batch refused or failed as a
// whole answers each of its callers — as single submits would have been
// answered.
func TestCoalescedWholeBatchFailures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reqs := func(topic string, n int, payload json.RawMessage) []client.TaskRequest {
		var out []client.TaskRequest
		for i := range n {
			out = append(out, client.TaskRequest{Topic: topic, Key: fmt.Sprint(i), Delay: "1h", Target: hook, Payload: payload})
		}
		return out
	}

	t.Run("401 sent again alone: each gets its single answer", func(t *testing.T) {
		t.Parallel()
		base := apitest.Start(t, func(cfg *ontime.Config) {
			cfg.Auth.Tokens = []ontime.TokenConfig{{Name: "w", TokenFile: tokenFile(t, "right-0123456789abcdef"), Role: "write"}}
		})
		g := newGate()
		c := gatedClient(t, base, g, client.WithToken("wrong"))
		lead, got := heldBatch(t, ctx, c, g, client.TaskRequest{Topic: "auth", Target: hook}, reqs("auth", 3, nil))
		for _, r := range append(got, lead) {
			var ae *client.APIError
			if !errors.As(r.err, &ae) || ae.Status != 401 || ae.Code != apiv1.CodeUnauthorized {
				t.Fatalf("answer %+v; want the single 401", r)
			}
		}
		if singles, batches := g.counts(); singles != 4 || !reflect.DeepEqual(batches, []int{3}) {
			t.Fatalf("%d singles, batches %v; want the lead, the batch of 3, then 3 singles", singles, batches)
		}
	})

	t.Run("413 over the node's batch limit: sent again alone, written", func(t *testing.T) {
		t.Parallel()
		base := apitest.Start(t, func(cfg *ontime.Config) {
			cfg.Delivery.MaxPayloadBytes = 64 << 10
			cfg.HTTP.MaxBatchBytes = 128 << 10
		})
		g := newGate()
		c := gatedClient(t, base, g, client.WithCoalesce(client.Coalesce{MaxBytes: 4 << 20, Calls: 1}))
		payload := json.RawMessage(`"` + strings.Repeat("y", 40<<10) + `"`)
		_, got := heldBatch(t, ctx, c, g, client.TaskRequest{Topic: "big", Target: hook}, reqs("big", 5, payload))
		for i, r := range got {
			if r.err != nil || !r.created {
				t.Fatalf("task %d: %+v", i, r)
			}
		}
		if singles, batches := g.counts(); singles != 6 || !reflect.DeepEqual(batches, []int{5}) {
			t.Fatalf("%d singles, batches %v", singles, batches)
		}
	})

	t.Run("5xx and network errors: every caller's error, nothing sent again", func(t *testing.T) {
		t.Parallel()
		base := apitest.Start(t, nil)
		boom := errors.New("connection reset by a test")
		for _, tc := range []struct {
			name  string
			fake  func(*http.Request) (*http.Response, error)
			check func(error) bool
		}{
			{"503", func(r *http.Request) (*http.Response, error) {
				body := `{"error":{"code":"unavailable","message":"task store unreachable; retry later"}}`
				return &http.Response{StatusCode: 503, Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
			}, func(err error) bool {
				var ae *client.APIError
				return errors.As(err, &ae) && ae.Status == 503 && ae.Code == apiv1.CodeUnavailable
			}},
			{"network", func(*http.Request) (*http.Response, error) { return nil, boom }, func(err error) bool { return errors.Is(err, boom) }},
			{"short answer", func(r *http.Request) (*http.Response, error) {
				return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(`{"tasks":[]}`)), Request: r}, nil
			}, func(err error) bool { return err != nil && strings.Contains(err.Error(), "0 items for 3 tasks") }},
		} {
			g := newGate()
			g.fake = tc.fake
			c := gatedClient(t, base, g)
			_, got := heldBatch(t, ctx, c, g, client.TaskRequest{Topic: "fail", Target: hook}, reqs("fail-"+tc.name, 3, nil))
			for i, r := range got {
				if !tc.check(r.err) {
					t.Errorf("%s: task %d: %+v", tc.name, i, r)
				}
			}
			if singles, batches := g.counts(); singles != 1 || len(batches) != 1 {
				t.Errorf("%s: %d singles, batches %v; want no resend", tc.name, singles, batches)
			}
		}
	})

	t.Run("404 for the route: sent again alone, and coalescing stops", func(t *testing.T) {
		t.Parallel()
		g := newGate()
		g.fake = func(r *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 404, Body: io.NopCloser(strings.NewReader("404 page not found")), Request: r}, nil
		}
		c := gatedClient(t, apitest.Start(t, nil), g)
		_, got := heldBatch(t, ctx, c, g, client.TaskRequest{Topic: "proxy", Target: hook}, reqs("proxy", 3, nil))
		for i, r := range got {
			if r.err != nil || !r.created {
				t.Fatalf("task %d: %+v", i, r)
			}
		}
		// Now a submit overlapping a held one goes alone too.
		g.setHold(true)
		first := submitAsync(ctx, c, client.TaskRequest{Topic: "proxy", Key: "x", Target: hook})
		<-g.arrived
		second := submitAsync(ctx, c, client.TaskRequest{Topic: "proxy", Key: "y", Target: hook})
		if p := <-g.arrived; p != "/v1/tasks" {
			t.Fatalf("after the 404 an overlapping submit went to %s", p)
		}
		g.setHold(false)
		g.release <- struct{}{}
		g.release <- struct{}{}
		if r1, r2 := <-first, <-second; r1.err != nil || r2.err != nil {
			t.Fatalf("%v %v", r1.err, r2.err)
		}
		if singles, batches := g.counts(); singles != 6 || len(batches) != 1 {
			t.Fatalf("%d singles, batches %v", singles, batches)
		}
	})
}

// TestCoalesceOptionsValidated: bounds out of range are New's error,
// naming the field.
func TestCoalesceOptionsValidated(t *testing.T) {
	for _, tc := range []struct {
		o     client.Coalesce
		field string
	}{
		{client.Coalesce{MaxTasks: -1}, "Coalesce.MaxTasks"},
		{client.Coalesce{MaxTasks: apiv1.MaxBatch + 1}, "Coalesce.MaxTasks"},
		{client.Coalesce{MaxBytes: 100}, "Coalesce.MaxBytes"},
		{client.Coalesce{MaxBytes: 65 << 20}, "Coalesce.MaxBytes"},
		{client.Coalesce{Calls: -2}, "Coalesce.Calls"},
		{client.Coalesce{Calls: 65}, "Coalesce.Calls"},
	} {
		if _, err := client.New("http://127.0.0.1:1", client.WithCoalesce(tc.o)); err == nil || !strings.HasPrefix(err.Error(), tc.field+":") {
			t.Errorf("%+v: %v; want an error naming %s", tc.o, err, tc.field)
		}
	}
	for _, o := range []client.Coalesce{{}, {Off: true}, {MaxTasks: 1, MaxBytes: 4 << 10, Calls: 1}, {MaxTasks: apiv1.MaxBatch, MaxBytes: 64 << 20, Calls: 64}} {
		if _, err := client.New("http://127.0.0.1:1", client.WithCoalesce(o)); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
}

// TestLargeTaskGoesAlone: a task over 64 KiB is sent as its own single
// call even while other Submits are in flight (a single submit's body
// limit is the node's largest payload plus 64 KiB: such a task could not
// be refused for its size in a batch where it would not be alone).
func TestLargeTaskGoesAlone(t *testing.T) {
	t.Parallel()
	g := newGate()
	c := gatedClient(t, apitest.Start(t, nil), g)
	ctx := context.Background()
	g.setHold(true)
	first := submitAsync(ctx, c, client.TaskRequest{Topic: "large", Key: "small", Delay: "1h", Target: hook})
	<-g.arrived
	big := submitAsync(ctx, c, client.TaskRequest{Topic: "large", Key: "big", Delay: "1h", Target: hook,
		Payload: json.RawMessage(`"` + strings.Repeat("z", 65<<10) + `"`)})
	if p := <-g.arrived; p != "/v1/tasks" {
		t.Fatalf("a large task submitted while another call is in flight went to %s", p)
	}
	g.setHold(false)
	g.release <- struct{}{}
	g.release <- struct{}{}
	for _, ch := range []chan result{first, big} {
		if r := <-ch; r.err != nil || !r.created {
			t.Fatalf("%+v", r)
		}
	}
	if singles, batches := g.counts(); singles != 2 || len(batches) != 0 {
		t.Fatalf("%d singles, batches %v", singles, batches)
	}
}

// goneCtx is a context whose caller gives up (leave) without its Done
// firing (as when the coalescer looks before the caller's goroutine
// runs): the coalescer must go by Err.
type goneCtx struct {
	context.Context
	gone atomic.Bool
}

func (g *goneCtx) leave() { g.gone.Store(true) }

func (g *goneCtx) Err() error {
	if g.gone.Load() {
		return context.Canceled
	}
	return nil
}

// TestGoneCallersAreNotSent: a queued Submit whose caller has given up is
// answered its context's error and not sent, whether it was to ride a
// batch or to lead the next one (the lead passes on).
func TestGoneCallersAreNotSent(t *testing.T) {
	t.Parallel()
	g := newGate()
	base := apitest.Start(t, nil)
	c := gatedClient(t, base, g)
	ctx := context.Background()
	req := func(k string) client.TaskRequest {
		return client.TaskRequest{Topic: "gone", Key: k, Delay: "1h", Target: hook}
	}
	// Y leads, X is skipped, Z rides with Y.
	g.setHold(true)
	lead := submitAsync(ctx, c, req("lead1"))
	<-g.arrived
	y := submitAsync(ctx, c, req("y"))
	waitQueued(t, c, 1)
	xctx := &goneCtx{Context: ctx}
	x := submitAsync(xctx, c, req("x"))
	waitQueued(t, c, 2)
	xctx.leave()
	z := submitAsync(ctx, c, req("z"))
	waitQueued(t, c, 3)
	g.setHold(false)
	g.release <- struct{}{}
	if r := <-x; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("gone caller in the queue: %+v", r)
	}
	for _, ch := range []chan result{lead, y, z} {
		if r := <-ch; r.err != nil || !r.created {
			t.Fatalf("%+v", r)
		}
	}
	if singles, batches := g.counts(); singles != 1 || !reflect.DeepEqual(batches, []int{2}) {
		t.Fatalf("%d singles, batches %v; want the lead alone, then [y z]", singles, batches)
	}

	// X would lead the next group: it passes the lead to W, which goes alone.
	g.setHold(true)
	lead = submitAsync(ctx, c, req("lead2"))
	<-g.arrived
	xctx = &goneCtx{Context: ctx}
	x = submitAsync(xctx, c, req("x2"))
	waitQueued(t, c, 1)
	xctx.leave()
	w := submitAsync(ctx, c, req("w"))
	waitQueued(t, c, 2)
	g.setHold(false)
	g.release <- struct{}{}
	if r := <-x; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("gone caller made leader: %+v", r)
	}
	for _, ch := range []chan result{lead, w} {
		if r := <-ch; r.err != nil || !r.created {
			t.Fatalf("%+v", r)
		}
	}
	if singles, batches := g.counts(); singles != 3 || len(batches) != 1 {
		t.Fatalf("%d singles, batches %v; want lead2 and w alone", singles, batches)
	}
	plain := newClient(t, base)
	for _, k := range []string{"x", "x2"} {
		if _, err := plain.GetByKey(ctx, "gone", k); !client.IsNotFound(err) {
			t.Errorf("gone caller's task %s: %v; want not written", k, err)
		}
	}
}
