// Package memory is the in-process hot tier: a binary min-heap of entries
// ordered by due time and one timer armed for the earliest. A heap was
// chosen over a hierarchical timing wheel because a wheel ticks whether or
// not anything is due (idle CPU) and rounds due times to its tick
// (lateness), while a heap sleeps exactly until the next due time; with
// the window bounding its size (tasks due within hot.window), O(log n) per
// operation is cheap (see BenchmarkAddPop).
//
// Priorities (task.Rank) order what is due: while the tier holds an entry
// of priority above 0, a Pop moves every due entry to a second heap
// ordered by rank and takes the lowest ranks first, so a backlog (more due
// than a Pop takes: the fire stage held back by its bound on outstanding
// tasks) leaves by rank. With every entry of priority 0, rank is due time
// and Pop takes the first heap's order as it always did, at no extra cost.
package memory

import (
	"container/heap"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ontimehq/ontime/internal/hot"
	"github.com/ontimehq/ontime/internal/task"
)

// Config configures the tier.
type Config struct {
	// Visibility is how long a popped entry stays in flight before it is
	// returned to the tier if neither acked nor nacked. Default 30s.
	Visibility time.Duration
}

// Tier is the in-process hot tier. Safe for concurrent use.
type Tier struct {
	vis time.Duration

	mu       sync.Mutex
	waiting  entryHeap         // by due time
	ready    readyHeap         // due, while prio > 0: by rank (task.Rank)
	prio     int               // waiting and ready entries of priority above 0
	byID     map[string]*entry // waiting and ready entries
	inflight map[string]*entry // popped, not yet acked
	flight   entryHeap         // in-flight entries by visibility deadline
	topics   map[string]string // interned topic names
	changed  chan struct{}     // closed and replaced when the earliest time moves earlier
	closed   bool
}

type entry struct {
	hot.Entry
	at    int64 // µs, rounded up: due time while waiting; visibility deadline while in flight
	index int32 // beside ready: one word for both (50,000 entries: 0.4 MB)
	ready bool  // in the ready heap, not the waiting one
}

// wait puts an entry in the waiting heap.
func (t *Tier) wait(e *entry) {
	heap.Push(&t.waiting, e)
	if e.Priority > 0 {
		t.prio++
	}
}

// unwait removes a waiting or ready entry from its heap.
func (t *Tier) unwait(e *entry) {
	if e.Priority > 0 {
		t.prio--
	}
	if e.ready {
		heap.Remove(&t.ready, int(e.index))
		e.ready = false
		return
	}
	heap.Remove(&t.waiting, int(e.index))
}

// fly moves an entry taken out of its heap in flight until now + vis.
func (t *Tier) fly(e *entry, now time.Time) {
	if e.Priority > 0 {
		t.prio--
	}
	delete(t.byID, e.ID)
	e.at = micros(now.Add(t.vis))
	heap.Push(&t.flight, e)
	t.inflight[e.ID] = e
}

var (
	_ hot.Tier        = (*Tier)(nil)
	_ hot.TokenLister = (*Tier)(nil)
)

// New builds an empty tier.
func New(cfg Config) (*Tier, error) {
	if cfg.Visibility == 0 {
		cfg.Visibility = hot.DefaultVisibility
	}
	if cfg.Visibility < 0 {
		return nil, fmt.Errorf("hot visibility: %s is negative", cfg.Visibility)
	}
	return &Tier{vis: cfg.Visibility, byID: map[string]*entry{}, inflight: map[string]*entry{},
		topics: map[string]string{}, changed: make(chan struct{})}, nil
}

func (t *Tier) notify() {
	close(t.changed)
	t.changed = make(chan struct{})
}

func (t *Tier) intern(topic string) string {
	if s, ok := t.topics[topic]; ok {
		return s
	}
	t.topics[topic] = topic
	return topic
}

// Add puts entries in the tier. An entry whose ID is waiting already with
// another token replaces it: the newer claim is the live one.
func (t *Tier) Add(_ context.Context, entries ...hot.Entry) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return hot.ErrClosed
	}
	wake := false
	for _, en := range entries {
		if old, ok := t.byID[en.ID]; ok {
			if old.Token == en.Token {
				continue
			}
			t.unwait(old)
			delete(t.byID, en.ID)
		}
		if f, ok := t.inflight[en.ID]; ok && f.Token == en.Token {
			continue // the same claim is being delivered
		}
		en.Topic = t.intern(en.Topic)
		e := &entry{Entry: en, at: micros(en.DueAt)}
		t.wait(e)
		t.byID[en.ID] = e
		if e.index == 0 {
			wake = true
		}
	}
	if wake {
		t.notify()
	}
	return nil
}

// Pop waits until an entry is due (at most ahead before its time) and
// returns up to max due entries.
func (t *Tier) Pop(ctx context.Context, max int, ahead time.Duration) ([]hot.Entry, error) {
	if max < 1 {
		max = 1
	}
	if ahead < 0 {
		ahead = 0
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			return nil, hot.ErrClosed
		}
		now := time.Now()
		horizon := now.Add(ahead).UnixMicro()
		t.expire(now)
		var out []hot.Entry
		if t.prio == 0 && len(t.ready) == 0 {
			for len(out) < max && len(t.waiting) > 0 && t.waiting[0].at <= horizon {
				e := heap.Pop(&t.waiting).(*entry)
				t.fly(e, now)
				out = append(out, e.Entry)
			}
		} else {
			for len(t.waiting) > 0 && t.waiting[0].at <= horizon {
				e := heap.Pop(&t.waiting).(*entry)
				e.ready = true
				heap.Push(&t.ready, e)
			}
			for len(out) < max && len(t.ready) > 0 {
				e := heap.Pop(&t.ready).(*entry)
				e.ready = false
				t.fly(e, now)
				out = append(out, e.Entry)
			}
		}
		if len(out) > 0 {
			t.mu.Unlock()
			return out, nil
		}
		var next time.Time
		if len(t.waiting) > 0 {
			next = time.UnixMicro(t.waiting[0].at).Add(-ahead)
		}
		if len(t.flight) > 0 && (next.IsZero() || time.UnixMicro(t.flight[0].at).Before(next)) {
			next = time.UnixMicro(t.flight[0].at)
		}
		changed := t.changed
		t.mu.Unlock()

		var fire <-chan time.Time
		if !next.IsZero() {
			// next carries no monotonic reading (it came from the store), so
			// this waits by the wall clock that "due" is judged by; the loop
			// re-checks due <= now before returning anything.
			d := time.Until(next)
			if timer == nil {
				timer = time.NewTimer(d)
			} else {
				timer.Reset(d)
			}
			fire = timer.C
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-changed:
		case <-fire:
		}
	}
}

// expire returns in-flight entries whose visibility deadline passed.
func (t *Tier) expire(now time.Time) {
	nowUs := now.UnixMicro()
	for len(t.flight) > 0 && t.flight[0].at <= nowUs {
		e := heap.Pop(&t.flight).(*entry)
		delete(t.inflight, e.ID)
		if _, ok := t.byID[e.ID]; ok {
			continue // a newer claim of the task is waiting
		}
		e.at = micros(e.DueAt)
		t.wait(e)
		t.byID[e.ID] = e
	}
}

// Ack forgets in-flight entries.
func (t *Tier) Ack(_ context.Context, entries ...hot.Entry) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, en := range entries {
		if e, ok := t.inflight[en.ID]; ok && e.Token == en.Token {
			heap.Remove(&t.flight, int(e.index))
			delete(t.inflight, en.ID)
		}
	}
	return nil
}

// Nack returns in-flight entries, due again at retryAt.
func (t *Tier) Nack(_ context.Context, retryAt time.Time, entries ...hot.Entry) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return hot.ErrClosed
	}
	wake := false
	for _, en := range entries {
		e, ok := t.inflight[en.ID]
		if !ok || e.Token != en.Token {
			continue
		}
		heap.Remove(&t.flight, int(e.index))
		delete(t.inflight, en.ID)
		if _, waiting := t.byID[en.ID]; waiting {
			continue
		}
		e.DueAt, e.at = retryAt, micros(retryAt)
		t.wait(e)
		t.byID[e.ID] = e
		wake = wake || e.index == 0
	}
	if wake {
		t.notify()
	}
	return nil
}

// Remove drops waiting entries by ID.
func (t *Tier) Remove(_ context.Context, entries ...hot.Entry) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, en := range entries {
		if e, ok := t.byID[en.ID]; ok {
			t.unwait(e)
			delete(t.byID, en.ID)
		}
	}
	return nil
}

// Len counts waiting and in-flight entries.
func (t *Tier) Len(context.Context) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.waiting) + len(t.ready) + len(t.flight), nil
}

// Tokens returns the claim tokens of the entries the tier holds, waiting
// or in flight (hot.TokenLister): the scanner keeps those claims alive.
// One pass over the entries under the lock: a few milliseconds for a
// million entries, every few seconds.
func (t *Tier) Tokens(context.Context) ([]int64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	seen := map[int64]struct{}{}
	for _, h := range [3]entryHeap{t.waiting, entryHeap(t.ready), t.flight} {
		for _, e := range h {
			seen[e.Token] = struct{}{}
		}
	}
	out := make([]int64, 0, len(seen))
	for tok := range seen {
		out = append(out, tok)
	}
	return out, nil
}

// Drain removes and returns every waiting entry: at shutdown the engine
// hands them back to the store instead of leaving them to lease expiry.
func (t *Tier) Drain() []hot.Entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]hot.Entry, 0, len(t.waiting)+len(t.ready)+len(t.flight))
	for _, e := range t.waiting {
		out = append(out, e.Entry)
	}
	for _, e := range t.ready {
		out = append(out, e.Entry)
	}
	for _, e := range t.flight {
		out = append(out, e.Entry)
	}
	t.waiting, t.ready, t.flight, t.prio = nil, nil, nil, 0
	t.byID, t.inflight = map[string]*entry{}, map[string]*entry{}
	return out
}

// Close wakes every Pop with ErrClosed. Idempotent.
func (t *Tier) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.closed {
		t.closed = true
		t.notify()
	}
	return nil
}

// entryHeap orders entries by at, then ID for a stable order.
type entryHeap []*entry

func (h entryHeap) Len() int { return len(h) }
func (h entryHeap) Less(i, j int) bool {
	if h[i].at == h[j].at {
		return h[i].ID < h[j].ID
	}
	return h[i].at < h[j].at
}
func (h entryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = int32(i)
	h[j].index = int32(j)
}
func (h *entryHeap) Push(x any) {
	e := x.(*entry)
	e.index = int32(len(*h))
	*h = append(*h, e)
}
func (h *entryHeap) Pop() any {
	old := *h
	n := len(old)
	e := old[n-1]
	old[n-1] = nil
	*h = old[:n-1]
	e.index = -1
	return e
}

// readyHeap orders due entries by rank (task.Rank), then due time, then ID.
type readyHeap []*entry

func rank(e *entry) int64 {
	return e.at - int64(e.Priority)*task.DefaultPriorityStep.Microseconds()
}

func (h readyHeap) Len() int { return len(h) }
func (h readyHeap) Less(i, j int) bool {
	switch ri, rj := rank(h[i]), rank(h[j]); {
	case ri != rj:
		return ri < rj
	case h[i].at != h[j].at:
		return h[i].at < h[j].at
	}
	return h[i].ID < h[j].ID
}
func (h readyHeap) Swap(i, j int) { entryHeap(h).Swap(i, j) }
func (h *readyHeap) Push(x any)   { (*entryHeap)(h).Push(x) }
func (h *readyHeap) Pop() any     { return (*entryHeap)(h).Pop() }

// micros is t in µs, rounded up: an entry is never due before its time,
// and a word holds it where a time.Time took three (with the priority,
// an entry stays within the allocator's 96-byte class).
func micros(t time.Time) int64 {
	u := t.UnixMicro()
	if t.Nanosecond()%1000 != 0 {
		u++
	}
	return u
}
