package outboxrelay

import (
	"path/filepath"
	"testing"

	"github.com/ontimehq/ontime/internal/store"
)

// TestTasksEndedWakes: the end of a task an item's in-flight row waits on
// wakes the items' finish loops (not their passes: no message was
// written); a retry of it, or the end of a task nobody waits on, does
// not. Rows a pass puts in flight are added to the watch.
func TestTasksEndedWakes(t *testing.T) {
	r, err := New(Config{Name: "w", Driver: "sqlite", Databases: []string{filepath.Join(t.TempDir(), "o.db")}, Table: "outbox"}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	woken := func(batch ...store.Outcome) bool {
		ch, pass := r.endedCh(), r.wakeCh()
		r.TasksEnded(batch)
		select {
		case <-pass:
			t.Fatal("a task's end woke the passes")
		default:
		}
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	r.setWatch(0, map[string]struct{}{"a": {}})
	if woken(store.Outcome{Ref: store.Ref{ID: "b"}, Done: true}) {
		t.Fatal("woken by a task nobody waits on")
	}
	if woken(store.Outcome{Ref: store.Ref{ID: "a"}, Error: "boom"}) {
		t.Fatal("woken by a retry")
	}
	for name, o := range map[string]store.Outcome{"done": {Done: true}, "dead": {Dead: true}, "cancelled": {Cancelled: true}} {
		o.Ref.ID = "a"
		if !woken(o) {
			t.Fatalf("not woken by a watched task ending %s", name)
		}
	}
	r.addWatch(0, map[string]struct{}{"c": {}})
	if !woken(store.Outcome{Ref: store.Ref{ID: "c"}, Done: true}) || !woken(store.Outcome{Ref: store.Ref{ID: "a"}, Done: true}) {
		t.Fatal("a task added to the watch, or one watched before, does not wake")
	}
	r.setWatch(0, nil)
	if woken(store.Outcome{Ref: store.Ref{ID: "a"}, Done: true}) {
		t.Fatal("woken after the item stopped watching")
	}
}
