package fire_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/fire"
	"github.com/ontimehq/ontime/internal/hot"
	"github.com/ontimehq/ontime/internal/stagetest"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/store/sqlstore"
	"github.com/ontimehq/ontime/internal/task"
)

// startLog is the real store noting the IDs of each Start call.
type startLog struct {
	*sqlstore.Store
	mu    sync.Mutex
	calls [][]string
}

func (s *startLog) Start(ctx context.Context, refs []store.Ref, leaseUntil time.Time) ([]*task.Task, error) {
	var ids []string
	for _, r := range refs {
		ids = append(ids, r.ID)
	}
	s.mu.Lock()
	s.calls = append(s.calls, ids)
	s.mu.Unlock()
	return s.Store.Start(ctx, refs, leaseUntil)
}

func (s *startLog) log() [][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// After a start, entries that fall due within the start gap are not
// started one Store.Start each, by whichever worker pops first: they wait
// in the tier until the gap ends and are started together in one call (one
// transaction, instead of one per entry taking the store's writer from the
// submits). A start on an idle node does not wait for any gap. The gap's
// timer is the test's, so what is asserted is which entries share a call,
// not how long anything took.
func TestStartGapGathersEntries(t *testing.T) {
	t.Parallel()
	const lead = 20 * time.Millisecond
	st := &startLog{Store: stagetest.Store(t)}
	x := &fixture{st: st.Store, tier: stagetest.Tier(t), planner: hot.NewPlanner(lead, 0),
		send: &sender{byID: map[string]int{}}, exp: &expecter{}, ctx: context.Background()}
	f, err := fire.New(fire.Config{Store: st, Tier: x.tier, Planner: x.planner, Sender: x.send, Outcomes: x.exp,
		Drain: x.tier.Drain, Workers: 4, MaxLead: lead, DeliveryLease: time.Minute, StartGap: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Stop)
	x.f = f
	gap := make(chan time.Time)
	waiting := make(chan struct{}, 1)
	fire.SetGapTimer(f, func(time.Duration) <-chan time.Time {
		select {
		case waiting <- struct{}{}:
		default:
		}
		return gap
	})
	first := x.hold(t, "first", time.Now().Add(50*time.Millisecond))
	x.start(t)
	stagetest.Eventually(t, "first task sent", func() bool { return x.send.times(first[0].ID) == 1 })
	if got := st.log(); len(got) != 1 || !slices.Equal(got[0], []string{first[0].ID}) {
		t.Fatalf("Start calls %v; want one, of the first task, without waiting for a gap", got)
	}
	// A worker now waits out the gap (an hour, unless the test ends it).
	<-waiting
	due := time.Now().Add(50 * time.Millisecond)
	later := x.hold(t, "later", due, due.Add(time.Millisecond), due.Add(2*time.Millisecond))
	// Every one of them may leave the tier now: only the gap holds them.
	for time.Now().Before(due.Add(2*time.Millisecond - lead)) {
		time.Sleep(time.Millisecond)
	}
	if got := st.log(); len(got) != 1 {
		t.Fatalf("Start calls during the gap: %v; want none", got[1:])
	}
	close(gap)
	stagetest.Eventually(t, "later tasks sent", func() bool { return len(x.send.sent()) == 1+len(later) })
	f.Stop()
	got := st.log()
	var want []string
	for _, tk := range later {
		want = append(want, tk.ID)
	}
	slices.Sort(want)
	if len(got) != 2 {
		t.Fatalf("Start calls %v; want 2: the first task, then the three gathered", got)
	}
	slices.Sort(got[1])
	if !slices.Equal(got[1], want) {
		t.Fatalf("second Start of %v; want the three tasks due during the gap, %v", got[1], want)
	}
	for _, s := range x.send.sent() {
		if s.at.Before(s.task.DueAt) {
			t.Errorf("task %s sent %s before its due time", s.task.ID, s.task.DueAt.Sub(s.at))
		}
	}
}
