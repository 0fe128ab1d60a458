package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// testMixedBatches: one Start and one Finish over many tables of two
// databases, the outcomes of every kind in one call (done, done with a
// result, retries sharing a new state, a retry under a new claim, dead,
// cancelled) and refs under a wrong token, which change nothing. Then the
// same with more rows than a database's write takes as one statement.
func testMixedBatches(t *testing.T, open Opener) {
	b := setup(t, open, 2, 4, 1)
	now := time.Now()
	for _, n := range []int{40, 1300} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			var in []store.NewTask
			for i := range n {
				in = append(in, b.newTask("mix", fmt.Sprintf("n%d-%d", n, i), now.Add(-time.Second)))
			}
			b.insert(in...)
			refs := b.claimAll("n1", now, now, now.Add(time.Minute))
			if len(refs) != n {
				t.Fatalf("claimed %d of %d", len(refs), n)
			}
			// A wrong token for every tenth: Start passes over those.
			var starts []store.Ref
			wrong := map[string]bool{}
			for i, r := range refs {
				if i%10 == 9 {
					wrong[r.ID] = true
					r.Token++
				}
				starts = append(starts, r)
			}
			st, err := b.s.Start(b.ctx, starts, now.Add(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			if want := n - len(wrong); len(st) != want {
				t.Fatalf("started %d, want %d", len(st), want)
			}
			for i, tk := range st {
				if tk.Status != task.StatusRunning || tk.Attempts != 1 || wrong[tk.ID] {
					t.Fatalf("started %+v", tk)
				}
				if i > 0 && tk.DueAt.Before(st[i-1].DueAt) {
					t.Fatal("Start's tasks are not in due order")
				}
			}
			retryAt := now.Add(time.Hour).Truncate(time.Microsecond)
			claim := &store.Lease{Owner: "n1", Until: now.Add(2 * time.Minute).Truncate(time.Microsecond), Token: 777}
			want := map[string]func(*task.Task) bool{}
			var outs []store.Outcome
			for i, tk := range st {
				ref := store.Ref{ID: tk.ID, Token: tk.Token}
				var o store.Outcome
				switch i % 7 {
				case 0, 1:
					o = store.Outcome{Ref: ref, Done: true}
					want[tk.ID] = func(g *task.Task) bool { return g.Status == task.StatusDone && g.Owner == "" }
				case 2:
					o = store.Outcome{Ref: ref, Done: true, Result: []byte(`{"r":` + fmt.Sprint(i) + `}`)}
					res := string(o.Result)
					want[tk.ID] = func(g *task.Task) bool { return g.Status == task.StatusDone && string(g.Result) == res }
				case 3, 4:
					o = store.Outcome{Ref: ref, RetryAt: retryAt, Error: "HTTP 503"}
					want[tk.ID] = func(g *task.Task) bool {
						return g.Status == task.StatusPending && g.DueAt.Equal(retryAt) && g.LastError == "HTTP 503" && g.Attempts == 1
					}
				case 5:
					if i%2 == 0 {
						o = store.Outcome{Ref: ref, Dead: true, Error: "gave up"}
						want[tk.ID] = func(g *task.Task) bool { return g.Status == task.StatusDead && g.LastError == "gave up" }
					} else {
						o = store.Outcome{Ref: ref, Cancelled: true, Error: "handler cancelled"}
						want[tk.ID] = func(g *task.Task) bool { return g.Status == task.StatusCancelled }
					}
				case 6:
					o = store.Outcome{Ref: ref, RetryAt: retryAt, Error: "breaker open", NotAttempted: true, Claim: claim}
					want[tk.ID] = func(g *task.Task) bool {
						return g.Status == task.StatusClaimed && g.Token == 777 && g.Attempts == 0 && g.LastError == "breaker open"
					}
				}
				outs = append(outs, o)
			}
			// Outcomes under a wrong token change nothing.
			for id := range wrong {
				outs = append(outs, store.Outcome{Ref: store.Ref{ID: id, Token: 1}, Done: true})
				want[id] = func(g *task.Task) bool { return g.Status == task.StatusClaimed && g.Attempts == 0 }
			}
			if err := b.s.Finish(b.ctx, outs); err != nil {
				t.Fatal(err)
			}
			for id, ok := range want {
				if g := b.get(id); !ok(g) {
					t.Fatalf("after the mixed Finish: %+v", g)
				}
			}
		})
	}
}
