package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ontimehq/ontime"
)

// A burst of mixed priorities behind a slow receiver (one call at a time,
// 5 ms each): a wave of 400 tasks of priority 0 due at once, then, while
// it still waits in its lane, a wave of 300 of every priority due 500 ms
// later. The deliveries follow task rank (README "Priorities"): no task
// is delivered while a task of a lower rank was already due and waiting,
// so the later wave's high priorities overtake the earlier wave (their
// due times are less than a priority step apart) and nothing is early.
// On SQLite, MariaDB and PostgreSQL.
func TestPriorityBurstBehindSlowReceiver(t *testing.T) {
	t.Parallel()
	for _, engine := range []string{"sqlite", "mysql", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			type got struct {
				id string
				at time.Time
			}
			var mu sync.Mutex
			var order []got
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				order = append(order, got{r.Header.Get("Ontime-Task-Id"), time.Now()})
				mu.Unlock()
				time.Sleep(5 * time.Millisecond)
			}))
			t.Cleanup(srv.Close)
			_, node := startNode(t, engine, func(cfg *ontime.Config) {
				cfg.Delivery.Concurrency = 1
				cfg.Delivery.LeaseTTL = ontime.Duration(10 * time.Second)
			})
			ctx := context.Background()
			due := time.Now().Add(2 * time.Second)
			var specs []ontime.TaskSpec
			const first = 400
			for range first {
				specs = append(specs, ontime.TaskSpec{Topic: "e2e.prio", DueAt: due, Target: srv.URL, Priority: new(0)})
			}
			for i := range 300 {
				specs = append(specs, ontime.TaskSpec{Topic: "e2e.prio", DueAt: due.Add(500 * time.Millisecond), Target: srv.URL, Priority: new(i * 7 % 10)})
			}
			res, err := node.SubmitBatch(ctx, specs)
			if err != nil {
				t.Fatal(err)
			}
			type info struct {
				due   time.Time
				prio  int
				first bool
			}
			byID := map[string]info{}
			for i, r := range res {
				if r.Err != nil {
					t.Fatal(r.Err)
				}
				if r.Task.Priority != *specs[i].Priority {
					t.Fatalf("task %s: priority %d, want %d", r.Task.ID, r.Task.Priority, *specs[i].Priority)
				}
				byID[r.Task.ID] = info{r.Task.DueAt, r.Task.Priority, i < first}
			}
			waitFor(t, 60*time.Second, "every task delivered", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(order) >= len(specs)
			})
			mu.Lock()
			defer mu.Unlock()
			rank := func(id string) time.Time {
				in := byID[id]
				return in.due.Add(-time.Duration(in.prio) * time.Minute)
			}
			delivered := map[string]int{}
			for i, g := range order {
				delivered[g.id] = i
				if g.at.Before(byID[g.id].due) {
					t.Errorf("task %s delivered %s early", g.id, byID[g.id].due.Sub(g.at))
				}
			}
			seq := make([]byte, 0, len(order))
			for _, g := range order {
				seq = append(seq, byte('0'+byID[g.id].prio))
			}
			t.Logf("priorities in delivery order: %s", seq)
			// A task of a lower rank, due well before a delivery and not yet
			// delivered, is an inversion only if it had reached the lane by
			// then, which the test cannot see: how long the release takes
			// depends on the machine's load. So inversions are reported, and
			// what is asserted is the order by priority of the later wave
			// as a whole (the median delivery position of each priority) and
			// its overtaking of the earlier wave (below).
			inversions := 0
			for i, g := range order {
				for id, in := range byID {
					if j, ok := delivered[id]; ok && j > i && in.due.Add(400*time.Millisecond).Before(g.at) && rank(id).Before(rank(g.id)) {
						inversions++
					}
				}
			}
			t.Logf("%d deliveries after a task of lower rank due 400 ms before them", inversions)
			var at [10][]int
			for id, in := range byID {
				if !in.first {
					at[in.prio] = append(at[in.prio], delivered[id])
				}
			}
			// By bands, not neighbours: on a loaded machine the later wave
			// reaches the hot tier in several claims, each delivered in
			// priority order, so a band's median holds where neighbouring
			// priorities' may swap (CI saw 9 after 8 that way).
			median := func(xs []int) int { slices.Sort(xs); return xs[len(xs)/2] }
			band := func(lo, hi int) []int {
				var xs []int
				for p := lo; p <= hi; p++ {
					xs = append(xs, at[p]...)
				}
				return xs
			}
			high, mid, low := band(7, 9), band(3, 6), band(0, 2)
			if len(high) == 0 || len(mid) == 0 || len(low) == 0 {
				t.Fatalf("a band of the later wave is empty: %d %d %d", len(high), len(mid), len(low))
			}
			if h, m, l := median(high), median(mid), median(low); h > m || m > l {
				t.Errorf("the later wave's priorities 7–9 went at median position %d, 3–6 at %d, 0–2 at %d: not in that order", h, m, l)
			}
			// The later wave's priorities overtook the earlier wave: its
			// priority-9 tasks all went before the last of the first wave.
			lastFirst, firstNine := 0, len(order)
			for id, in := range byID {
				if in.first {
					lastFirst = max(lastFirst, delivered[id])
				}
				if in.prio == 9 {
					firstNine = min(firstNine, delivered[id])
				}
			}
			if firstNine > lastFirst {
				t.Errorf("the first priority-9 task went at %d, after the whole first wave (last at %d)", firstNine, lastFirst)
			}
			t.Logf("%d deliveries; the first wave's last at %d, the first priority 9 at %d", len(order), lastFirst, firstNine)
		})
	}
}
