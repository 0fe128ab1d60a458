package submit_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/hot"
	"github.com/ontimehq/ontime/internal/stagetest"
	"github.com/ontimehq/ontime/internal/submit"
	"github.com/ontimehq/ontime/internal/task"
)

// runner admits the tasks of every topic but "held", records what it is
// handed and counts the room its admissions hold.
type runner struct {
	lease time.Time
	held  atomic.Int64
	mu    sync.Mutex
	ran   []*task.Task
}

func (r *runner) RunNow(topic string) (time.Time, bool) {
	if topic == "held" {
		return time.Time{}, false
	}
	r.held.Add(1)
	return r.lease, true
}

func (r *runner) GiveRoom(n int) { r.held.Add(-int64(n)) }

func (r *runner) Run(tasks []*task.Task) {
	r.mu.Lock()
	r.ran = append(r.ran, tasks...)
	r.mu.Unlock()
}

// TestRunNow: with a Runner, a task due at once that it admits is
// inserted running under its lease (its first attempt begun) and handed to
// it after the commit, not to the tier; one it refuses (a paused topic, a
// full node), and one due later within the window, go to the tier claimed
// as before; a resubmit of a key that ran is answered the existing task
// and not run twice. Alone or in a group commit. Every admission's room is
// given back: after Run, for a key found taken, and when the insert fails.
func TestRunNow(t *testing.T) {
	t.Parallel()
	st, tier := stagetest.Store(t), stagetest.Tier(t)
	r := &runner{lease: time.Now().Add(time.Minute).Truncate(time.Microsecond)}
	svc, err := submit.New(submit.Config{Store: st, Tier: tier, Planner: hot.NewPlanner(20*time.Millisecond, 0),
		Notifier: &notifier{}, Topology: stagetest.Topology, Segments: stagetest.Segments, NodeID: node,
		Window: window, LeaseTTL: time.Minute, Runner: r})
	if err != nil {
		t.Fatal(err)
	}
	svc.SetReady(true)
	ctx := t.Context()
	soon := time.Now().Add(5 * time.Second)
	res, err := svc.Submit(ctx, []task.Spec{
		{Topic: "now", Target: "http://127.0.0.1:1/a"},
		{Topic: "now", Key: "k1", Target: "http://127.0.0.1:1/a"},
		{Topic: "held", Target: "http://127.0.0.1:1/a"},
		{Topic: "now", DueAt: &soon, Target: "http://127.0.0.1:1/a"},
	})
	if err != nil {
		t.Fatal(err)
	}
	// Concurrent single submits share group commits.
	var wg sync.WaitGroup
	conc := make([]submit.Result, 16)
	for i := range conc {
		wg.Go(func() {
			out, err := svc.Submit(ctx, []task.Spec{{Topic: "now", Target: "http://127.0.0.1:1/b"}})
			if err != nil {
				t.Error(err)
				return
			}
			conc[i] = out[0]
		})
	}
	wg.Wait()
	again, err := svc.Submit(ctx, []task.Spec{{Topic: "now", Key: "k1", Target: "http://127.0.0.1:1/a"}})
	if err != nil || !again[0].Existing {
		t.Fatalf("resubmit of k1: %v %+v", err, again)
	}

	wantRun := map[string]bool{res[0].Task.ID: true, res[1].Task.ID: true}
	for _, c := range conc {
		if c.Err != nil || c.Task == nil {
			t.Fatalf("concurrent submit: %+v", c)
		}
		wantRun[c.Task.ID] = true
	}
	r.mu.Lock()
	ran := append([]*task.Task(nil), r.ran...)
	r.mu.Unlock()
	if len(ran) != len(wantRun) {
		t.Fatalf("ran %d tasks, want %d", len(ran), len(wantRun))
	}
	for _, tk := range ran {
		if !wantRun[tk.ID] {
			t.Fatalf("ran %s, which it should not have", tk.ID)
		}
		if tk.Status != task.StatusRunning || tk.Attempts != 1 || tk.Owner != node || !tk.LeaseUntil.Equal(r.lease) || tk.Token == 0 {
			t.Fatalf("handed to the runner as %+v", tk)
		}
		got, err := st.Get(ctx, tk.ID)
		if err != nil || got.Status != task.StatusRunning || got.Attempts != 1 || got.Token != tk.Token || !got.LeaseUntil.Equal(r.lease) {
			t.Fatalf("stored as %+v (%v)", got, err)
		}
	}
	// The refused and the later task wait in the tier, claimed.
	entries := tier.Drain()
	if len(entries) != 2 {
		t.Fatalf("%d entries in the tier, want 2", len(entries))
	}
	for _, en := range entries {
		if en.ID != res[2].Task.ID && en.ID != res[3].Task.ID {
			t.Fatalf("tier holds %s", en.ID)
		}
		if got, err := st.Get(ctx, en.ID); err != nil || got.Status != task.StatusClaimed || got.Attempts != 0 {
			t.Fatalf("tier entry's row %+v (%v)", got, err)
		}
	}
	// Every place of room RunNow gave is back, the taken key's too.
	if n := r.held.Load(); n != 0 {
		t.Fatalf("%d places of room held after the submits", n)
	}
	// An insert that fails (its context ended: a batch too big for a group
	// commit goes to the store at once) gives its room back too.
	specs := make([]task.Spec, 300)
	for i := range specs {
		specs[i] = task.Spec{Topic: "now", Target: "http://127.0.0.1:1/c"}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := svc.Submit(cctx, specs); err == nil {
		t.Fatal("submit on an ended context stored its tasks")
	}
	if n := r.held.Load(); n != 0 {
		t.Fatalf("%d places of room held after a failed insert", n)
	}
}
