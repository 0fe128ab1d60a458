package submit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

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

func newCommitter() *committer {
	return &committer{max: DefaultGroupMax, writers: 1, sizes: nopObserver{}}
}

func one(id string) []store.NewTask { return []store.NewTask{{ID: id}} }

// A lone sequential submitter never yields: each submit is a
// group of its own, written at once.
func TestGatherLoneSubmitterNeverWaits(t *testing.T) {
	c := newCommitter()
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

// Many concurrent submits through yields: every one answered with its
// own task, each in exactly one written group.
func TestGatherConcurrentAllAnswered(t *testing.T) {
	c := newCommitter()
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

// Concurrent submits whose groups all fail to commit (leaders yielding in
// a crowd): every one is answered the error and no after-commit work runs.
func TestGatherConcurrentFailureAnswersAll(t *testing.T) {
	c := newCommitter()
	boom := fmt.Errorf("disk full")
	f := &fakeWrites{fail: boom}
	const n = 500
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			ins, err := c.do(context.Background(), one(fmt.Sprint(i)), f.work())
			if !errors.Is(err, boom) || ins != nil {
				errs <- fmt.Errorf("submit %d answered %v, %v; want only %v", i, ins, err, boom)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if f.after != 0 {
		t.Fatalf("after-commit work ran %d times for failed commits", f.after)
	}
	if c.busy != 0 || len(c.queue) != 0 {
		t.Fatalf("committer left busy %d, queue %d", c.busy, len(c.queue))
	}
}
