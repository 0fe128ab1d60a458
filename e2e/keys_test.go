package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/client"
	"github.com/ontimehq/ontime/internal/store/sqlstore"
	"github.com/ontimehq/ontime/internal/testdb"
)

func strp(s string) *string { return &s }

// moved is a task rescheduled in a test: where it was due and where to.
type moved struct {
	id       string
	old, now time.Time
	payload  string // the payload it must be delivered with ("" any)
}

// checkMoved waits for every moved task to be delivered and checks that
// each was delivered once, never before its new due time (so never at an
// earlier old one), and with its new payload.
func checkMoved(t *testing.T, rcv *receiver, tasks []moved) {
	t.Helper()
	waitFor(t, 60*time.Second, "moved tasks delivered", func() bool {
		d := rcv.delivered()
		for _, m := range tasks {
			if d[m.id] == 0 {
				return false
			}
		}
		return true
	})
	byID := map[string]moved{}
	for _, m := range tasks {
		byID[m.id] = m
	}
	for _, cl := range rcv.allCalls() {
		m, ok := byID[cl.ID]
		if !ok {
			continue
		}
		if cl.At.Before(m.now) {
			t.Errorf("task %s delivered %s before its new due time (old %s)", cl.ID, m.now.Sub(cl.At), m.old.Sub(cl.At))
		}
		if !cl.DueAt.Equal(m.now) {
			t.Errorf("task %s delivered with due_at %s, want %s", cl.ID, cl.DueAt, m.now)
		}
		if p, _ := json.Marshal(cl.Body["payload"]); m.payload != "" && string(p) != m.payload {
			t.Errorf("task %s delivered with payload %s, want %s", cl.ID, p, m.payload)
		}
	}
	for _, m := range tasks {
		if n := rcv.delivered()[m.id]; n != 1 {
			t.Errorf("task %s delivered %d times", m.id, n)
		}
	}
}

// reschedule submits, through submitVia, tasks due within the window
// (claimed at once, held in a hot tier) and beyond it (pending), then
// moves them through patchVia: later beyond the window, later within it,
// earlier, and the payload only. It returns what to check.
func reschedule(t *testing.T, submitVia, patchVia apiClient, rcv *receiver, topic string) []moved {
	t.Helper()
	var out []moved
	add := func(v *apiv1.Task, p apiv1.TaskPatch, byKey bool, wantPayload string) {
		var got *apiv1.Task
		var err error
		if byKey {
			got, err = patchVia.UpdateByKey(t.Context(), v.Topic, v.Key, p)
		} else {
			got, err = patchVia.Update(t.Context(), v.ID, p)
		}
		if err != nil {
			t.Fatalf("patch %s: %v", v.ID, err)
		}
		if got.ID != v.ID {
			t.Fatalf("patch answered task %s for %s", got.ID, v.ID)
		}
		out = append(out, moved{id: v.ID, old: v.DueAt, now: got.DueAt, payload: wantPayload})
	}
	// The node's window is 5 s (reschedNode): tasks due in 2.5-3.5 s are
	// claimed at submit and held in a hot tier; everything is submitted
	// first, then patched, well before the held ones start.
	type change struct {
		v     *apiv1.Task
		p     apiv1.TaskPatch
		byKey bool
		want  string
	}
	var changes []change
	for i := range 8 {
		byKey := i%2 == 0
		sub := func(delay string) *apiv1.Task {
			return submitVia.submit(apiv1.TaskRequest{Topic: topic, Key: fmt.Sprintf("%s-%d-%s", topic, i, delay),
				Delay: delay, Target: rcv.srv.URL, Payload: json.RawMessage(`"old"`)})
		}
		changes = append(changes,
			// Held in a hot tier, moved beyond the window: pending again.
			change{sub("3s"), apiv1.TaskPatch{Delay: strp("7s"), Payload: json.RawMessage(`"later"`)}, byKey, `"later"`},
			// Held, moved later within the window: a new claim.
			change{sub("2500ms"), apiv1.TaskPatch{Delay: strp("4s")}, byKey, `"old"`},
			// Pending beyond the window, moved into it: delivered at its
			// new time, long before its old one.
			change{sub("60s"), apiv1.TaskPatch{Delay: strp("1500ms"), Payload: json.RawMessage(`{"n":1}`)}, byKey, `{"n":1}`},
			// Held, payload and target only: the claim stands.
			change{sub("3500ms"), apiv1.TaskPatch{Payload: json.RawMessage(`"new"`), Target: strp(rcv.srv.URL + "/moved")}, byKey, `"new"`},
		)
	}
	for _, c := range changes {
		add(c.v, c.p, c.byKey, c.want)
	}
	return out
}

// TestRescheduleMemoryAndRedisTiers: tasks moved later are never delivered
// at their old time, tasks moved earlier are delivered at their new time,
// never before it, on the memory tier (SQLite, MariaDB) and the Redis tier
// (PostgreSQL).
func TestRescheduleMemoryAndRedisTiers(t *testing.T) {
	for _, tc := range []struct{ name, engine, tier string }{
		{"memory-sqlite", "sqlite", "memory"}, {"memory-mysql", "mysql", "memory"}, {"redis-postgres", "postgres", "redis"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rcv := newReceiver(t)
			c, _ := startNode(t, tc.engine, func(cfg *ontime.Config) {
				cfg.Hot.Window = ontime.Duration(5 * time.Second)
				if tc.tier == "redis" {
					cfg.Hot.Tier = "redis"
					cfg.Hot.RedisAddrs = []string{testdb.StartRedis(t).Addr()}
				}
			})
			tasks := reschedule(t, c, c, rcv, "e2e.move")
			checkMoved(t, rcv, tasks)
			// The old due time of a task moved later is over: it stays
			// undelivered until its new one, checked above; and every moved
			// task ends done.
			for _, m := range tasks {
				waitFor(t, 10*time.Second, "done", func() bool { return c.get(m.id).Status == "done" })
			}
			// A running or final task cannot be moved: 409.
			if _, err := c.Update(t.Context(), tasks[0].id, apiv1.TaskPatch{Delay: strp("1s")}); !client.HasCode(err, apiv1.CodeConflict) {
				t.Fatalf("patch of a done task: %v, want a conflict", err)
			}
		})
	}
}

// TestRescheduleInACluster: two nodes share the store (database
// coordinator), each with its own memory tier. Tasks submitted through
// node A are held in A's tier; they are moved through node B, which cannot
// reach A's tier: the changed claim token alone keeps A from delivering
// them at their old time.
func TestRescheduleInACluster(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t)
	dsns := testdb.DSNs(t, "postgres", 1)
	mod := func(id string) func(*ontime.Config) {
		return func(cfg *ontime.Config) {
			cfg.NodeID = id
			cfg.Store.Databases = dsns
			cfg.Cluster.Coordinator = "database"
			cfg.Cluster.LeaseTTL = ontime.Duration(2 * time.Second)
			cfg.Hot.Window = ontime.Duration(5 * time.Second)
		}
	}
	a, _ := startNode(t, "postgres", mod("node-a"))
	b, _ := startNode(t, "postgres", mod("node-b"))
	waitFor(t, 30*time.Second, "two nodes own items", func() bool {
		v, err := a.Cluster(t.Context())
		return err == nil && balanced(v, []string{"node-a", "node-b"})
	})
	tasks := reschedule(t, a, b, rcv, "e2e.cmove")
	checkMoved(t, rcv, tasks)
}

// TestCancelByKeyRacesDelivery: tasks are cancelled by key around their
// due time, while they are being fired. For each exactly one side wins: a
// cancel that succeeded means the task is never delivered; one refused
// (409) means it was delivered, once.
func TestCancelByKeyRacesDelivery(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			rcv := newReceiver(t)
			// Every task starts FireLead (20 ms) before it is due, however
			// slow the store, so the cancels below meet the starts.
			c, _ := startNode(t, engine, func(cfg *ontime.Config) { cfg.Hot.MaxFireLead = 0 })
			const n = 200
			var tasks []*apiv1.Task
			for i := range n {
				delay := 1200*time.Millisecond + time.Duration(i)*5*time.Millisecond // 1.2 .. 2.2 s
				tasks = append(tasks, c.submit(apiv1.TaskRequest{Topic: "e2e.race", Key: fmt.Sprintf("race/%d", i), Delay: delay.String(), Target: rcv.srv.URL}))
			}
			cancelled := make([]bool, n)
			var wg sync.WaitGroup
			for i, v := range tasks {
				wg.Add(1)
				go func() {
					defer wg.Done()
					// Aim around the start, a little before the due time
					// (the fire lead, more when the store is slow): from
					// 900 ms before it to the due time.
					time.Sleep(time.Until(v.DueAt.Add(time.Duration(i%10)*100*time.Millisecond - 900*time.Millisecond)))
					got, err := c.CancelByKey(t.Context(), "e2e.race", v.Key)
					switch {
					case err == nil:
						if got.ID != v.ID || got.Status != "cancelled" {
							t.Errorf("cancel by key answered %+v", got)
						}
						cancelled[i] = true
					case client.HasCode(err, apiv1.CodeConflict):
					default:
						t.Errorf("cancel by key %s: %v", v.Key, err)
					}
				}()
			}
			wg.Wait()
			waitFor(t, 30*time.Second, "every task final", func() bool {
				for i, v := range tasks {
					if !cancelled[i] && c.get(v.ID).Status != "done" {
						return false
					}
				}
				return true
			})
			time.Sleep(time.Second) // deliveries of cancelled tasks would have come by now
			nc, nd := 0, 0
			for i, v := range tasks {
				d := rcv.delivered()[v.ID]
				switch {
				case cancelled[i] && d != 0:
					t.Errorf("task %s cancelled by key and delivered %d times", v.ID, d)
				case !cancelled[i] && d != 1:
					t.Errorf("task %s: cancel refused, delivered %d times", v.ID, d)
				case cancelled[i]:
					nc++
				default:
					nd++
				}
				if st := c.get(v.ID).Status; cancelled[i] != (st == "cancelled") {
					t.Errorf("task %s is %s; cancel said %v", v.ID, st, cancelled[i])
				}
			}
			t.Logf("%d cancelled, %d delivered", nc, nd)
			if nc == 0 || nd == 0 {
				t.Fatalf("%d cancelled, %d delivered: the cancels did not meet the firing", nc, nd)
			}
		})
	}
}

// TestKeyReuseAndReplace: a key is held by its final task for
// retention.key_hold (a resubmit answers 200 with the final task, nothing
// delivered again), then a submit creates a new task (201, new ID) that is
// delivered; if_exists: replace updates a live task; concurrent submits of
// one key create one task, on every engine; GET /v1/tasks?topic=&key=.
func TestKeyReuseAndReplace(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			rcv := newReceiver(t)
			const hold = 1500 * time.Millisecond
			c, _ := startNode(t, engine, func(cfg *ontime.Config) { cfg.Retention.KeyHold = ontime.Duration(hold) })
			req := apiv1.TaskRequest{Topic: "e2e.reuse", Key: "user-7", Target: rcv.srv.URL, Payload: json.RawMessage(`1`)}
			first := c.submit(req)
			waitFor(t, 30*time.Second, "first done", func() bool { return c.get(first.ID).Status == "done" })
			again, created, err := c.Submit(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			endedAgo := time.Since(c.get(first.ID).UpdatedAt)
			if endedAgo < hold && (created || again.ID != first.ID || again.Status != "done") {
				t.Fatalf("resubmit within the key hold: created %v %+v", created, again)
			}
			time.Sleep(hold + 100*time.Millisecond - min(endedAgo, hold))
			second, created, err := c.Submit(t.Context(), req)
			if err != nil || !created || second.ID == first.ID {
				t.Fatalf("resubmit after the key hold: %v created %v id %s (first %s)", err, created, second.ID, first.ID)
			}
			waitFor(t, 30*time.Second, "second delivered", func() bool { return rcv.delivered()[second.ID] == 1 })
			if d := rcv.delivered()[first.ID]; d != 1 {
				t.Fatalf("first task delivered %d times", d)
			}
			page, err := c.ListByKey(t.Context(), "e2e.reuse", "user-7")
			if err != nil || len(page.Tasks) != 1 || page.Tasks[0].ID != second.ID {
				t.Fatalf("list by key: %v %+v, want the second task", err, page)
			}
			if _, err := c.ListByKey(t.Context(), "", "user-7"); !client.HasCode(err, apiv1.CodeInvalid) {
				t.Fatalf("list by key without topic: %v", err)
			}

			// Replace: the live task takes the submit's fields, same ID.
			live := c.submit(apiv1.TaskRequest{Topic: "e2e.reuse", Key: "order-9", Delay: "20s", Target: rcv.srv.URL, Payload: json.RawMessage(`"v1"`)})
			rep := apiv1.TaskRequest{Topic: "e2e.reuse", Key: "order-9", Delay: "200ms", Target: rcv.srv.URL, Payload: json.RawMessage(`"v2"`), IfExists: "replace"}
			got, created, err := c.Submit(t.Context(), rep)
			if err != nil || created || got.ID != live.ID || string(got.Payload) != `"v2"` || !got.DueAt.Before(live.DueAt) {
				t.Fatalf("replace: %v created %v %+v", err, created, got)
			}
			checkMoved(t, rcv, []moved{{id: live.ID, old: live.DueAt, now: got.DueAt, payload: `"v2"`}})
			if _, _, err := c.Submit(t.Context(), apiv1.TaskRequest{Topic: "e2e.reuse", Key: "x", IfExists: "merge"}); !client.HasCode(err, apiv1.CodeInvalid) {
				t.Fatalf("if_exists merge: %v", err)
			}
			// Replace with no task under the key creates one.
			if _, created, err := c.Submit(t.Context(), apiv1.TaskRequest{Topic: "e2e.reuse", Key: "fresh", Delay: "1h", IfExists: "replace", Target: rcv.srv.URL}); err != nil || !created {
				t.Fatalf("replace of an unknown key: %v created %v", err, created)
			}

			// Concurrent submits of one key through the API: one 201.
			const workers = 16
			var wg sync.WaitGroup
			ids := make([]string, workers)
			made := make([]bool, workers)
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					v, cr, err := c.Submit(t.Context(), apiv1.TaskRequest{Topic: "e2e.reuse", Key: "contended", Delay: "1h", Target: rcv.srv.URL})
					if err != nil {
						t.Error(err)
						return
					}
					ids[w], made[w] = v.ID, cr
				}()
			}
			wg.Wait()
			n := 0
			for w := range workers {
				if made[w] {
					n++
				}
				if ids[w] != ids[0] {
					t.Fatalf("concurrent submits of one key got %v", ids)
				}
			}
			if n != 1 {
				t.Fatalf("%d of %d concurrent submits created a task", n, workers)
			}
		})
	}
}

// TestRetentionBoundUnderLoad: ~1,000 tasks/s for 30 s with
// retention.done 5s. Without the cleaner the table would hold every one of
// them; with it, the rows stay about 5 s worth of work. The bound is on
// rows, sampled through the run and after it, never on time.
func TestRetentionBoundUnderLoad(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			_, node := startNode(t, engine, func(cfg *ontime.Config) {
				cfg.Retention.Done = ontime.Duration(5 * time.Second)
			})
			if err := node.Handle("e2e.retain", func(context.Context, *ontime.Delivery) error { return nil }); err != nil {
				t.Fatal(err)
			}
			cfg := node.Config()
			st, err := sqlstore.Open(t.Context(), sqlstore.Config{Driver: cfg.Store.Driver, DSNs: cfg.Store.Databases, Tables: cfg.Store.Tables, Segments: cfg.Store.Segments})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			rows := func() int64 {
				cnt, err := st.Count(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				var n int64
				for _, v := range cnt {
					n += v
				}
				return n
			}
			const seconds, perTick, tick = 30, 100, 100 * time.Millisecond
			var maxRows int64
			sampled := make(chan struct{})
			stop := make(chan struct{})
			go func() {
				defer close(sampled)
				for {
					select {
					case <-stop:
						return
					case <-time.After(time.Second):
						maxRows = max(maxRows, rows())
					}
				}
			}()
			submitted := 0
			next := time.Now()
			for range seconds * int(time.Second/tick) {
				specs := make([]ontime.TaskSpec, perTick)
				for i := range specs {
					specs[i] = ontime.TaskSpec{Topic: "e2e.retain"}
				}
				res, err := node.SubmitBatch(t.Context(), specs)
				if err != nil {
					t.Fatal(err)
				}
				submitted += len(res)
				next = next.Add(tick)
				time.Sleep(time.Until(next))
			}
			close(stop)
			<-sampled
			// After the load: once the rows ended 5 s ago are gone.
			waitFor(t, 60*time.Second, "rows back to the live work", func() bool { return rows() <= perTick*10 })
			t.Logf("%d tasks submitted at ~1,000/s; rows at most %d during the run", submitted, maxRows)
			if bound := int64(submitted / 2); maxRows > bound {
				t.Fatalf("the table grew to %d rows of %d submitted; want at most %d (retention.done 5s)", maxRows, submitted, bound)
			}
		})
	}
}
