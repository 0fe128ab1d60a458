package submit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// fakeWrites records the groups a committer writes; fail makes every
// insert fail.
type fakeWrites struct {
	mu     sync.Mutex
	groups [][]string // task IDs of each insert
	after  int        // after-commit calls
	fail   error
}

func (f *fakeWrites) work() groupWork {
	return groupWork{
		insert: func(_ context.Context, tasks []store.NewTask) ([]store.Inserted, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			ids := make([]string, len(tasks))
			ins := make([]store.Inserted, len(tasks))
			for i, t := range tasks {
				ids[i] = t.ID
				ins[i] = store.Inserted{Task: &task.Task{ID: t.ID}}
			}
			f.groups = append(f.groups, ids)
			if f.fail != nil {
				return nil, f.fail
			}
			return ins, nil
		},
		after: func(context.Context, []store.NewTask, []store.Inserted) {
			f.mu.Lock()
			f.after++
			f.mu.Unlock()
		},
	}
}

func (f *fakeWrites) written() [][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.groups)
}

type nopObserver struct{}

func (nopObserver) Observe(float64) {}

func newCommitter(linger time.Duration) *committer {
	return &committer{max: DefaultGroupMax, writers: 1, sizes: nopObserver{}, linger: linger, full: make(chan struct{}, 1)}
}

func one(id string) []store.NewTask { return []store.NewTask{{ID: id}} }

// waitFor polls cond under c.mu until it holds.
func waitFor(t *testing.T, c *committer, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c.mu.Lock()
		ok := cond()
		c.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// A lone sequential submitter never yields nor lingers: each submit is a
// group of its own, written at once.
func TestGatherLoneSubmitterNeverWaits(t *testing.T) {
	c := newCommitter(time.Hour)
	f := &fakeWrites{}
	for i := range 50 {
		ins, err := c.do(context.Background(), one(fmt.Sprint(i)), f.work())
		if err != nil || len(ins) != 1 || ins[0].Task.ID != fmt.Sprint(i) {
			t.Fatalf("submit %d: %v %v", i, ins, err)
		}
	}
	if n := len(f.written()); n != 50 {
		t.Fatalf("%d inserts for 50 sequential submits; want 50", n)
	}
	if g := c.gathers.Load(); g != 0 {
		t.Fatalf("a lone submitter gathered %d times; want 0", g)
	}
}

// After a crowd, a leader lingers until as many submits queued as the
// last group had, and then writes them all in one group, each answered
// with its own task after the commit. The linger (an hour) can only end
// on the count, so the test passing shows it did.
func TestGatherLingerEndsWhenGroupIsFull(t *testing.T) {
	c := newCommitter(time.Hour)
	c.last, c.wrote = 5, time.Hour // a crowd wrote groups of 5
	f := &fakeWrites{}
	type answer struct {
		id  string
		ins []store.Inserted
		err error
	}
	out := make(chan answer, 5)
	submit := func(id string) {
		go func() {
			ins, err := c.do(context.Background(), one(id), f.work())
			out <- answer{id, ins, err}
		}()
	}
	submit("lead")
	waitFor(t, c, "the leader lingers", func() bool { return c.lingering })
	for i := range 4 {
		submit(fmt.Sprint(i))
	}
	for range 5 {
		a := <-out
		if a.err != nil || len(a.ins) != 1 || a.ins[0].Task.ID != a.id {
			t.Fatalf("submit %s answered %v, %v", a.id, a.ins, a.err)
		}
		if len(f.written()) != 1 {
			t.Fatalf("submit %s answered before its group was written", a.id)
		}
	}
	if g := f.written(); len(g) != 1 || len(g[0]) != 5 || g[0][0] != "lead" {
		t.Fatalf("groups %v; want one of 5, the leader first", g)
	}
	if c.busy != 0 || len(c.queue) != 0 || c.lingering {
		t.Fatalf("committer left busy %d, queue %d, lingering %v", c.busy, len(c.queue), c.lingering)
	}
}

// A group that lingered and then failed to commit answers the error to
// every submit in it, and runs no after-commit work; a submit that gave
// up while queued is not in the group.
func TestGatherLingerFailureAnswersAll(t *testing.T) {
	c := newCommitter(time.Hour)
	c.last, c.wrote = 4, time.Hour
	boom := errors.New("disk full")
	f := &fakeWrites{fail: boom}
	errs := make(chan error, 4)
	go func() {
		_, err := c.do(context.Background(), one("lead"), f.work())
		errs <- err
	}()
	waitFor(t, c, "the leader lingers", func() bool { return c.lingering })
	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan error, 1)
	go func() {
		_, err := c.do(ctx, one("gone"), f.work())
		gone <- err
	}()
	waitFor(t, c, "the first follower queues", func() bool { return len(c.queue) == 1 })
	cancel()
	if err := <-gone; !errors.Is(err, context.Canceled) {
		t.Fatalf("the submit that gave up answered %v; want context.Canceled", err)
	}
	for i := range 3 {
		go func() {
			_, err := c.do(context.Background(), one(fmt.Sprint(i)), f.work())
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; !errors.Is(err, boom) {
			t.Fatalf("a submit of the failed group answered %v; want %v", err, boom)
		}
	}
	g := f.written()
	if len(g) != 1 || len(g[0]) != 4 || slices.Contains(g[0], "gone") {
		t.Fatalf("groups %v; want one of 4 without the submit that gave up", g)
	}
	if f.after != 0 {
		t.Fatalf("after-commit work ran %d times for a failed commit", f.after)
	}
}

// A crowd that has gone costs one short wait: the first lone submit after
// it lingers at most as long as the last insert took, and the next ones
// do not wait at all.
func TestGatherCrowdGoneWaitsOnce(t *testing.T) {
	c := newCommitter(time.Hour)
	c.last, c.wrote = 8, time.Millisecond
	f := &fakeWrites{}
	for i := range 10 {
		if _, err := c.do(context.Background(), one(fmt.Sprint(i)), f.work()); err != nil {
			t.Fatal(err)
		}
	}
	if g := c.gathers.Load(); g != 1 {
		t.Fatalf("%d gathers after the crowd went; want 1", g)
	}
	if n := len(f.written()); n != 10 {
		t.Fatalf("%d inserts; want 10", n)
	}
}

// Many concurrent submits through yields and lingers: every one answered
// with its own task, each in exactly one written group.
func TestGatherConcurrentAllAnswered(t *testing.T) {
	for _, linger := range []time.Duration{0, 500 * time.Microsecond} {
		t.Run(linger.String(), func(t *testing.T) { concurrentAllAnswered(t, linger) })
	}
}

func concurrentAllAnswered(t *testing.T, linger time.Duration) {
	c := newCommitter(linger)
	f := &fakeWrites{}
	const n = 2000
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			id := fmt.Sprint(i)
			ins, err := c.do(context.Background(), one(id), f.work())
			if err == nil && (len(ins) != 1 || ins[0].Task.ID != id) {
				err = fmt.Errorf("submit %s answered %v", id, ins)
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, g := range f.written() {
		for _, id := range g {
			if seen[id] {
				t.Fatalf("task %s written twice", id)
			}
			seen[id] = true
		}
	}
	if len(seen) != n {
		t.Fatalf("%d tasks written; want %d", len(seen), n)
	}
}
