package submit_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/submit"
	"github.com/ontimehq/ontime/internal/task"
	"github.com/ontimehq/ontime/internal/testdb"
)

// TestReplaceOfAFinalTask: a key held by a final task answers keep
// submits with that task and until when it holds the key; a replace
// makes a new task (one, however many replaces share a group commit), and
// the same replace sent again meets that task and updates it, creating
// nothing.
func TestReplaceOfAFinalTask(t *testing.T) {
	const hold = time.Hour // longer than the test: every final task holds its key
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			f := gcSetupHold(t, engine, hold)
			ctx := context.Background()
			spec := func(replace bool, payload string) task.Spec {
				return task.Spec{Topic: "rf", Key: "order-42", Delay: delay(time.Hour), Target: "http://127.0.0.1:9/t", Payload: []byte(payload), Replace: replace}
			}
			// The first submit commits and holds its committer (answered
			// once submitAll opens the gate): the rest queue up in a group.
			lead := f.lead(t, spec(false, `{"v":0}`))
			stored, err := f.st.GetByKey(ctx, "rf", "order-42")
			if err != nil {
				t.Fatal(err)
			}
			cancelled, err := f.svc.Cancel(ctx, stored.ID)
			if err != nil {
				t.Fatal(err)
			}
			// Keep and replace submits of the cancelled key in one group.
			const n = 16
			specs := make([]task.Spec, n)
			for i := range specs {
				specs[i] = spec(i%2 == 1, fmt.Sprintf(`{"v":%d}`, i))
			}
			res, errs := f.submitAll(t, specs)
			if first := <-lead; first.Err != nil || first.Existing || first.Task.ID != stored.ID {
				t.Fatalf("first submit: %+v", first)
			}
			first := submit.Result{Task: stored}
			created, id := 0, ""
			for i, r := range res {
				if errs[i] != nil || r.Err != nil {
					t.Fatalf("submit %d: %v %v", i, errs[i], r.Err)
				}
				if !specs[i].Replace {
					// Either the cancelled task, saying until when it holds
					// the key, or the replace's task, live.
					held := r.Task.ID == first.Task.ID && r.Task.Status == task.StatusCancelled && r.HeldUntil.Equal(cancelled.UpdatedAt.Add(hold))
					live := r.Task.ID != first.Task.ID && r.HeldUntil.IsZero()
					if !r.Existing || !held && !live {
						t.Fatalf("keep %d: existing=%v %s %s held until %v", i, r.Existing, r.Task.ID, r.Task.Status, r.HeldUntil)
					}
					continue
				}
				if r.Task.ID == first.Task.ID || !r.HeldUntil.IsZero() {
					t.Fatalf("replace %d answered the final task: %+v", i, r)
				}
				if !r.Existing {
					created++
				}
				if id != "" && r.Task.ID != id {
					t.Fatalf("replaces answered tasks %s and %s", id, r.Task.ID)
				}
				id = r.Task.ID
			}
			if created != 1 {
				t.Fatalf("%d replaces created a task; want 1", created)
			}

			// One replace at a time: over the final task a new task, which
			// the same replace again finds, live, and updates.
			if _, err := f.svc.Cancel(ctx, id); err != nil {
				t.Fatal(err)
			}
			r := submitOne(t, f.svc, spec(false, `{"v":"keep"}`))
			if !r.Existing || r.Task.ID != id || r.Task.Status != task.StatusCancelled || r.HeldUntil.IsZero() {
				t.Fatalf("keep over the cancelled replace: %+v", r)
			}
			made := submitOne(t, f.svc, spec(true, `{"v":"again"}`))
			if made.Existing || made.Task.ID == id || made.Task.ID == first.Task.ID || string(made.Task.Payload) != `{"v":"again"}` {
				t.Fatalf("replace over a final task: existing=%v %+v", made.Existing, made.Task)
			}
			retry := submitOne(t, f.svc, spec(true, `{"v":"again"}`))
			if !retry.Existing || retry.Task.ID != made.Task.ID || retry.Task.Status != task.StatusPending || string(retry.Task.Payload) != `{"v":"again"}` {
				t.Fatalf("retried replace: existing=%v %+v, want the task it made %s", retry.Existing, retry.Task, made.Task.ID)
			}
			got, err := f.svc.GetByKey(ctx, "rf", "order-42")
			if err != nil || got.ID != made.Task.ID {
				t.Fatalf("by key: %v %+v, want %s", err, got, made.Task.ID)
			}
			total := 0
			for _, tb := range []string{"ontime_tasks_0000", "ontime_tasks_0001"} {
				var c int
				if err := f.db.QueryRow(`SELECT COUNT(*) FROM ` + tb + ` WHERE task_key = 'order-42' AND status < 3`).Scan(&c); err != nil {
					t.Fatal(err)
				}
				total += c
			}
			if total != 1 {
				t.Fatalf("%d live tasks of the key; want 1", total)
			}
		})
	}
}

func submitOne(t *testing.T, svc *submit.Service, sp task.Spec) submit.Result {
	t.Helper()
	res, err := svc.Submit(context.Background(), []task.Spec{sp})
	if err != nil || res[0].Err != nil {
		t.Fatalf("submit: %v %v", err, res[0].Err)
	}
	return res[0]
}
