package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// testPriority: every insert path writes the priority (a batch without
// keys: PostgreSQL's COPY, MariaDB's multi-statement, SQLite's prepared
// rows; a batch with keys over many tables: PostgreSQL's one statement;
// one keyed task: the statements; a task inserted claimed), and Get,
// List and Claim read it back.
func testPriority(t *testing.T, open Opener) {
	b := setup(t, open, 2, 4, 1)
	due := time.Now().Add(time.Minute).Truncate(time.Microsecond)
	want := map[string]int{}
	mk := func(key string, prio int) store.NewTask {
		nt := b.newTask("prio", key, due)
		nt.Priority = prio
		want[nt.ID] = prio
		return nt
	}
	var keyless, keyed []store.NewTask
	for i := range 40 {
		keyless = append(keyless, mk("", i%10))
		keyed = append(keyed, mk(fmt.Sprintf("k%02d", i), (i+3)%10))
	}
	one := mk("alone", 7)
	claimed := mk("claimed", 9)
	claimed.Claim = &store.Lease{Owner: "n1", Until: due.Add(time.Minute), Token: 42}
	b.insert(keyless...)
	b.insert(keyed...)
	b.insert(one)
	ins := b.insert(claimed)
	if got := ins[0].Task.Priority; got != 9 {
		t.Errorf("insert answered priority %d, want 9", got)
	}
	for id, p := range want {
		if got := b.get(id).Priority; got != p {
			t.Errorf("task %s: priority %d, want %d", id, got, p)
		}
	}
	listed, err := b.s.List(b.ctx, store.ListFilter{Topic: "prio", Limit: store.MaxListLimit})
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != len(want) {
		t.Fatalf("listed %d tasks, want %d", len(listed), len(want))
	}
	for _, tk := range listed {
		if tk.Priority != want[tk.ID] {
			t.Errorf("list: task %s priority %d, want %d", tk.ID, tk.Priority, want[tk.ID])
		}
	}
	refs := b.claimAll("n2", due.Add(time.Second), time.Now(), due.Add(time.Minute))
	if len(refs) != len(want)-1 {
		t.Fatalf("claimed %d, want %d", len(refs), len(want)-1)
	}
	for _, r := range refs {
		if r.Priority != want[r.ID] {
			t.Errorf("claim: task %s priority %d, want %d", r.ID, r.Priority, want[r.ID])
		}
	}
	started, err := b.s.Start(b.ctx, refs[:5], due.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range started {
		if tk.Priority != want[tk.ID] {
			t.Errorf("start: task %s priority %d, want %d", tk.ID, tk.Priority, want[tk.ID])
		}
	}
	if _, err := task.Validate(task.Spec{Topic: "x", Priority: new(10)}, task.Limits{}, time.Now()); err == nil {
		t.Error("priority 10 accepted")
	}
}
