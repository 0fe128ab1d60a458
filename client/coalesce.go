package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/ontimehq/ontime/apiv1"
)

// Coalescing: concurrent Submit calls of one Client share POST
// /v1/tasks:batch calls, the client-side twin of the node's group commit
// (internal/submit/groupcommit.go). There is no background goroutine and
// no timed linger: the first Submit to find fewer than Coalesce.Calls
// batch calls in flight sends at once — alone, as the plain POST /v1/tasks
// it always was, if it is alone — and Submits arriving while the calls are
// in flight queue; when a call returns, the first of them sends everything
// queued by then (up to MaxTasks tasks and MaxBytes of body) in one batch.
// (With Calls at its default, 1: one call in flight, everyone else queued.)
// A leader in a crowd first yields its processor (up to 4 times, while the
// queue grows) so the crowd's Submits reach the queue. So a lone or
// sequential caller pays nothing, and 16 goroutines submitting in a loop
// send batches of about 15.
//
// Each caller gets what a single submit would have given it: the task and
// created (the item's "created", a single submit's 201 or 200), or its
// item's error as the *APIError a single submit's answer makes, with the
// status that code comes with. A batch the node refuses whole before
// writing anything (400, 401, 403, 404, 405, 413: credentials, a body
// over its http.max_batch_bytes, a proxy without the route) is sent again
// as single submits, each by its own
// caller under its own context, so their answers are the single ones; a
// 404 or 405 for the route turns coalescing off for the Client. A network
// error, a 5xx or an answer that cannot be read is every caller's error,
// as it would have been each single submit's (their tasks may or may not
// have been written, as with any such failure).

// The defaults of Coalesce.
const (
	// DefaultCoalesceTasks bounds the tasks of one coalesced call: the
	// batch route's limit.
	DefaultCoalesceTasks = apiv1.MaxBatch
	// DefaultCoalesceBytes bounds the body of one coalesced call, far
	// below the node's default http.max_batch_bytes (64 MiB): past a few
	// hundred small tasks a larger call saves nothing, and a node
	// configured lower is met by the single-submit fallback.
	DefaultCoalesceBytes = 1 << 20
	// DefaultCoalesceCalls is how many coalesced calls may be in flight at
	// once. One gathers a crowd best: 16 goroutines submitting keyed tasks
	// to a SQLite node over loopback (e2e BenchmarkHTTPSubmit, loaded
	// 2-core machine) sent 15.2 tasks per call and 3,971–5,108 submits/s
	// with one, 3.7 and 2,353–2,751/s with two, 2.6 and 1,486–1,759/s with
	// four: calls in flight split the crowd, and the node commits each
	// call's tasks alone anyway.
	DefaultCoalesceCalls = 1
	// soloBytes: a task whose body is larger is sent alone. A single
	// submit's body may hold the node's largest payload plus 64 KiB
	// (internal/api EnvelopeBytes), so a task within 64 KiB is never
	// refused for its size alone, and larger ones gain nothing from
	// sharing a call.
	soloBytes = 64 << 10
	// Bounds of Coalesce's fields.
	minCoalesceBytes = 4 << 10
	maxCoalesceBytes = 64 << 20
	maxCoalesceCalls = 64
	// batchFrame is the body's bytes around the tasks: {"tasks":[…]}.
	batchFrame = len(`{"tasks":[]}`)
)

// Coalesce configures how a Client coalesces concurrent Submits into batch
// calls. The zero value is the default: on, with the Default… bounds.
type Coalesce struct {
	// Off sends every Submit alone, as POST /v1/tasks.
	Off bool
	// MaxTasks bounds the tasks of one call: 1 to 1,000; 0 is
	// DefaultCoalesceTasks.
	MaxTasks int
	// MaxBytes bounds the request body of one call: 4 KiB to 64 MiB; 0 is
	// DefaultCoalesceBytes.
	MaxBytes int
	// Calls bounds the coalesced calls in flight at once: 1 to 64; 0 is
	// DefaultCoalesceCalls.
	Calls int
}

// WithCoalesce sets how concurrent Submits share batch calls (see
// Coalesce); WithCoalesce(Coalesce{Off: true}) turns it off. New reports a
// bound out of range, naming the field.
func WithCoalesce(o Coalesce) Option {
	return func(c *Client) {
		if err := o.validate(); err != nil {
			c.err = err
			return
		}
		c.coalesce = o
	}
}

func (o *Coalesce) validate() error {
	switch {
	case o.MaxTasks < 0 || o.MaxTasks > apiv1.MaxBatch:
		return fmt.Errorf("Coalesce.MaxTasks: %d is not between 1 and %d (0: the default, %d)", o.MaxTasks, apiv1.MaxBatch, DefaultCoalesceTasks)
	case o.MaxBytes != 0 && (o.MaxBytes < minCoalesceBytes || o.MaxBytes > maxCoalesceBytes):
		return fmt.Errorf("Coalesce.MaxBytes: %d is not between %d and %d (0: the default, %d)", o.MaxBytes, minCoalesceBytes, maxCoalesceBytes, DefaultCoalesceBytes)
	case o.Calls < 0 || o.Calls > maxCoalesceCalls:
		return fmt.Errorf("Coalesce.Calls: %d is not between 1 and %d (0: the default, %d)", o.Calls, maxCoalesceCalls, DefaultCoalesceCalls)
	}
	return nil
}

// newCoalescer is the coalescer of o, or nil when o is off.
func newCoalescer(o Coalesce) *coalescer {
	if o.Off {
		return nil
	}
	co := &coalescer{maxTasks: o.MaxTasks, maxBytes: o.MaxBytes, calls: o.Calls}
	if co.maxTasks == 0 {
		co.maxTasks = DefaultCoalesceTasks
	}
	if co.maxBytes == 0 {
		co.maxBytes = DefaultCoalesceBytes
	}
	if co.calls == 0 {
		co.calls = DefaultCoalesceCalls
	}
	co.solo = min(soloBytes, co.maxBytes-batchFrame)
	return co
}

// coalescer gathers a Client's concurrent Submits. Invariant, as in the
// node's committer: the queue holds Submits only while all calls are
// busy (a leader is busy from when it is made leader until it hands on).
type coalescer struct {
	maxTasks, maxBytes, calls int
	solo                      int // bodies larger than this go alone

	// off is set once the node answered the batch route 404 or 405: it
	// has no such route (a proxy in front, say), so every Submit goes alone.
	off atomic.Bool

	inside atomic.Int32 // Submits inside submit
	queued atomic.Int32 // len(queue), read without mu by a yielding leader
	// batches counts the batch calls made (tests).
	batches atomic.Int64

	mu    sync.Mutex
	busy  int        // leaders, from when they are made leader until they hand on
	queue []*pending // Submits waiting for a leader to take them, in arrival order
	last  int        // Submits of the last group taken
}

// pending is one Submit in a coalescer.
type pending struct {
	ctx  context.Context
	body []byte        // the task's JSON, as a single submit sends it
	wake chan struct{} // cap 1: signalled once, when it leads or is done

	// Guarded by the coalescer's mu.
	taken  bool       // out of the queue: in a group, or made leader
	lead   bool       // leads a group
	waited bool       // queued behind a call before it was made leader
	call   *batchCall // the call it is in, once taken into one of several
	done   bool       // the fields below are set

	task    *Task
	created bool
	err     error
	alone   bool // the batch was refused whole: submit it alone
}

// batchCall is one coalesced call's context, cancelled once none of its
// callers waits for it any more.
type batchCall struct {
	cancel  context.CancelFunc
	waiting int // guarded by the coalescer's mu
}

// leave is called, with mu held, when p's caller stops waiting for its
// call.
func (p *pending) leave() {
	if p.call == nil {
		return
	}
	p.call.waiting--
	if p.call.waiting == 0 {
		p.call.cancel()
	}
	p.call = nil
}

// submit stores the task whose JSON is body, in a batch call with the
// Submits of other goroutines when there are any. A caller whose ctx ends
// while it waits returns ctx's error: before its task was taken into a
// call nothing of it was sent; once sent, the task may be written (as
// with a single submit cancelled in flight), and the call goes on for
// the others — it is cancelled only once none of its callers waits. The
// caller that makes the call (the leader) returns when it ends.
func (co *coalescer) submit(ctx context.Context, c *Client, body []byte) (*Task, bool, error) {
	co.inside.Add(1)
	defer co.inside.Add(-1)
	p := &pending{ctx: ctx, body: body, wake: make(chan struct{}, 1)}
	co.mu.Lock()
	if co.busy < co.calls {
		// The queue is empty (invariant): nobody to wait for.
		co.busy++
		p.taken, p.lead = true, true
	} else {
		co.queue = append(co.queue, p)
		co.queued.Store(int32(len(co.queue)))
	}
	lead := p.lead
	co.mu.Unlock()
	if !lead {
		select {
		case <-p.wake:
		case <-ctx.Done():
			co.mu.Lock()
			switch {
			case !p.taken:
				co.drop(p)
				co.mu.Unlock()
				return nil, false, ctx.Err()
			case p.done:
				// Answered as the context ended: the answer is had.
			case !p.lead:
				p.leave()
				co.mu.Unlock()
				return nil, false, ctx.Err()
			}
			co.mu.Unlock()
			<-p.wake // made leader or done: signalled already
		}
		co.mu.Lock()
		lead = p.lead && !p.done
		co.mu.Unlock()
	}
	if lead {
		co.leadGroup(c, p)
	}
	return p.result(c)
}

// result is p's answer, once done.
func (p *pending) result(c *Client) (*Task, bool, error) {
	if p.alone {
		return c.submitOne(p.ctx, p.body)
	}
	return p.task, p.created, p.err
}

// leadGroup takes leader's group, makes its call, answers it, and hands
// the lead to the first Submit queued meanwhile (or frees the call).
func (co *coalescer) leadGroup(c *Client, leader *pending) {
	if leader.ctx.Err() != nil {
		// Made leader after its caller gave up: pass the lead on.
		co.mu.Lock()
		leader.done, leader.err = true, leader.ctx.Err()
		co.handOn()
		co.mu.Unlock()
		return
	}
	co.gather(leader)
	co.mu.Lock()
	group := co.take(leader)
	co.mu.Unlock()
	if len(group) == 1 {
		// Alone: the single submit, under the caller's own context.
		leader.task, leader.created, leader.err = c.submitOne(leader.ctx, leader.body)
		co.mu.Lock()
		leader.done = true
		co.handOn()
		co.mu.Unlock()
		return
	}
	// The call is everyone's: no one caller's context may cancel it. It
	// ends when every caller has given up (or the HTTP client's timeout).
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	call := &batchCall{cancel: cancel, waiting: len(group)}
	co.mu.Lock()
	for _, p := range group {
		p.call = call
	}
	co.mu.Unlock()
	stop := context.AfterFunc(leader.ctx, func() {
		co.mu.Lock()
		leader.leave()
		co.mu.Unlock()
	})
	co.batches.Add(1)
	items, whole := c.batchCall(ctx, group)
	stop()

	co.mu.Lock()
	for i, p := range group {
		p.call = nil
		switch {
		case whole == nil:
			p.task, p.created, p.err = itemResult(&items[i])
		case refusedWhole(whole):
			p.alone = true
		default:
			p.err = whole
		}
		p.done = true
		if i > 0 { // the leader is its own goroutine, not waiting
			p.wake <- struct{}{}
		}
	}
	if leader.ctx.Err() != nil && !leader.alone {
		// Its caller gave up during the call: as for the others, its
		// context's error, whatever the call's outcome.
		leader.task, leader.created, leader.err = nil, false, leader.ctx.Err()
	}
	if notARoute(whole) {
		co.off.Store(true)
	}
	// Those just answered may submit again before the next leader takes
	// its group (gather): they join it rather than wait a whole call.
	co.handOn()
	co.mu.Unlock()
}

// handOn makes the first queued Submit leader of the next group, or frees
// the call when none is queued. Called with mu held.
func (co *coalescer) handOn() {
	if len(co.queue) == 0 {
		co.busy--
		return
	}
	next := co.queue[0]
	m := copy(co.queue, co.queue[1:])
	co.queue[m] = nil
	co.queue = co.queue[:m]
	co.queued.Store(int32(m))
	next.taken, next.lead, next.waited = true, true, true
	next.wake <- struct{}{}
}

// gatherYields bounds the yields of a leader while the queue grows.
const gatherYields = 4

// gather lets the Submits of a crowd join leader's group before it is
// taken, as the node's committer does: a leader is in a crowd when it
// waited behind a call, the last group was not alone, or other Submits
// are inside the coalescer; a lone caller is none of these and sends at
// once. The goroutines about to queue may be waiting for a processor, so
// the leader yields it (free when nothing else is runnable), again while
// the queue grows. No timed linger: a parked leader costs an idle
// process about a millisecond, more than most calls take.
func (co *coalescer) gather(leader *pending) {
	co.mu.Lock()
	crowded := leader.waited || co.last > 1 || co.inside.Load() > 1
	co.mu.Unlock()
	if !crowded {
		return
	}
	queued := co.queued.Load()
	for range gatherYields {
		runtime.Gosched()
		q := co.queued.Load()
		if q == queued {
			break
		}
		queued = q
	}
}

// take removes leader's group from the queue: leader, then the queued
// Submits while the group stays within its bounds. Those whose callers
// have given up are answered their context's error, not sent. Called with
// mu held.
func (co *coalescer) take(leader *pending) []*pending {
	group := []*pending{leader}
	bytes := batchFrame + len(leader.body)
	n := 0
	for _, p := range co.queue {
		if err := p.ctx.Err(); err != nil {
			p.taken, p.done, p.err = true, true, err
			p.wake <- struct{}{}
			n++
			continue
		}
		if len(group) == co.maxTasks || bytes+1+len(p.body) > co.maxBytes {
			break
		}
		bytes += 1 + len(p.body)
		p.taken = true
		group = append(group, p)
		n++
	}
	m := copy(co.queue, co.queue[n:])
	clear(co.queue[m:])
	co.queue = co.queue[:m]
	co.queued.Store(int32(m))
	co.last = len(group)
	return group
}

// drop removes a Submit that gave up before it was taken. Called with mu
// held.
func (co *coalescer) drop(p *pending) {
	for i, q := range co.queue {
		if q == p {
			co.queue = append(co.queue[:i:i], co.queue[i+1:]...)
			co.queued.Store(int32(len(co.queue)))
			return
		}
	}
}

// batchCall sends group's tasks as one POST /v1/tasks:batch and returns
// one item per task, or the error of the whole call.
func (c *Client) batchCall(ctx context.Context, group []*pending) ([]BatchItem, error) {
	n := batchFrame + len(group) - 1
	for _, p := range group {
		n += len(p.body)
	}
	body := make([]byte, 0, n)
	body = append(body, `{"tasks":[`...)
	for i, p := range group {
		if i > 0 {
			body = append(body, ',')
		}
		body = append(body, p.body...)
	}
	body = append(body, "]}"...)
	var out apiv1.BatchResponse
	if _, err := c.doRaw(ctx, http.MethodPost, "/v1/tasks:batch", body, &out); err != nil {
		return nil, err
	}
	if len(out.Tasks) != len(group) {
		return nil, fmt.Errorf("decoding the answer: %d items for %d tasks", len(out.Tasks), len(group))
	}
	return out.Tasks, nil
}

// itemResult is what a single submit of the item's task would have
// returned: the task and whether it was created, or the error answer.
func itemResult(it *BatchItem) (*Task, bool, error) {
	switch {
	case it.Error != nil:
		return nil, false, &APIError{Status: codeStatus(it.Error.Code), Code: it.Error.Code, Field: it.Error.Field, Message: it.Error.Message}
	case it.Task != nil:
		return it.Task, it.Created, nil
	}
	return nil, false, errors.New("decoding the answer: a batch item with neither task nor error")
}

// codeStatus is the HTTP status a single submit's answer comes with for
// an error of this code (apiv1's table; 405 is never a task's).
func codeStatus(code apiv1.Code) int {
	switch code {
	case apiv1.CodeInvalid:
		return http.StatusBadRequest
	case apiv1.CodeTooLarge:
		return http.StatusRequestEntityTooLarge
	case apiv1.CodeNotFound:
		return http.StatusNotFound
	case apiv1.CodeConflict:
		return http.StatusConflict
	case apiv1.CodeUnauthorized:
		return http.StatusUnauthorized
	case apiv1.CodeForbidden:
		return http.StatusForbidden
	case apiv1.CodeUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// refusedWhole reports a batch the node refused before writing any task
// of it: its body or route (400, 404, 405, 413) or the credentials (401,
// 403), all of which a single submit meets on its own terms.
func refusedWhole(err error) bool {
	var ae *APIError
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.Status {
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound,
		http.StatusMethodNotAllowed, http.StatusRequestEntityTooLarge:
		return true
	}
	return false
}

// notARoute reports an answer saying the node has no batch route.
func notARoute(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && (ae.Status == http.StatusNotFound || ae.Status == http.StatusMethodNotAllowed)
}
