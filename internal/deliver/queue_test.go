package deliver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// A lane's queue gives the lowest rank first: priority × one minute
// earlier than the due time, among what is queued; the due order within a
// priority; and one fifo's order when every job is of one priority.
func TestQueueRank(t *testing.T) {
	base := time.Now()
	mk := func(id string, prio int, due time.Duration) job {
		return job{d: Delivery{ID: id, Priority: prio, DueAt: base.Add(due)}}
	}
	var q queue
	q.push([]job{mk("a0", 0, 0), mk("a1", 0, time.Second)})
	q.push([]job{mk("b9", 9, 2*time.Second), mk("c3", 3, time.Second), mk("d0", 0, 2*time.Second)})
	// Priority 0 due 10 minutes before: ahead of a priority 9 (rank −9 min).
	q.push([]job{mk("e0", 0, -10*time.Minute)})
	if q.n != 6 || q.mask != 1|1<<3|1<<9 {
		t.Fatalf("queued %d in levels %b", q.n, q.mask)
	}
	var got []string
	for q.n > 0 {
		got = append(got, q.pop().d.ID)
	}
	// b9 (rank 2 s − 9 min) and c3 (1 s − 3 min) overtake level 0; level
	// 0 is a fifo in release order (a lane's is its due order: e0, due
	// earliest but released last here, waits its turn in its level).
	if want := "[b9 c3 a0 a1 d0 e0]"; fmt.Sprint(got) != want {
		t.Errorf("order %v, want %s", got, want)
	}
	q.push([]job{mk("x", 2, 0), mk("y", 2, 0), mk("z", 2, 0)})
	if got := q.take(2); len(got) != 2 || got[0].d.ID != "x" || got[1].d.ID != "y" || q.n != 1 || q.mask == 0 {
		t.Errorf("take of one level: %v, %d left", got, q.n)
	}
	if q.pop().d.ID != "z" || q.n != 0 || q.mask != 0 {
		t.Error("last job of the level")
	}
}

type gateFunc func(ctx context.Context) (func(), error)

func (f gateFunc) Enter(ctx context.Context) (func(), error) { return f(ctx) }

// Every call enters its destination's gate and its topic's; a gate that
// refuses makes a delivery not attempted (ErrStopped), not a failure.
func TestGates(t *testing.T) {
	var mu sync.Mutex
	entered := map[string]int{}
	gate := func(name string, fail bool) Gate {
		return gateFunc(func(context.Context) (func(), error) {
			mu.Lock()
			defer mu.Unlock()
			entered[name]++
			if fail {
				return nil, errors.New("redis away")
			}
			return func() {
				mu.Lock()
				entered[name+" left"]++
				mu.Unlock()
			}, nil
		})
	}
	p, err := NewDispatcher(DispatcherConfig{
		Lanes: func(dest string) LaneConfig { return LaneConfig{Gate: gate(dest, false)} },
		TopicGate: func(topic string) Gate {
			if topic == "none" {
				return nil
			}
			return gate(topic, topic == "broken")
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	startDispatcher(t, p)
	r := newResult(3)
	ok := HandlerFunc(func(context.Context, Delivery) error { return nil })
	dispatchOne(p, context.Background(), "d", ok, Delivery{Topic: "t"}, r.done("1"))
	dispatchOne(p, context.Background(), "d", ok, Delivery{Topic: "none"}, r.done("2"))
	dispatchOne(p, context.Background(), "d", ok, Delivery{Topic: "broken"}, r.done("3"))
	waitGroup(t, &r.wg, 5*time.Second)
	if r.errs["1"] != nil || r.errs["2"] != nil || !errors.Is(r.errs["3"], ErrStopped) {
		t.Errorf("outcomes %v", r.errs)
	}
	mu.Lock()
	defer mu.Unlock()
	if entered["d"] != 3 || entered["d left"] != 3 || entered["t"] != 1 || entered["t left"] != 1 || entered["broken"] != 1 {
		t.Errorf("gates entered %v", entered)
	}
}
