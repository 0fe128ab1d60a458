package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
	"github.com/ontimehq/ontime/internal/testdb"
)

// keyedCopyStore is a PostgreSQL store whose keyed batches of two rows or
// more go by COPY (copyInsertKeyed), with a key hold of ten minutes.
func keyedCopyStore(t *testing.T) *Store {
	t.Helper()
	s := openT(t, "postgres", testdb.DSNs(t, "postgres", 1), 1, 4)
	s.cfg.KeyHold = 10 * time.Minute
	s.ins.keyedCopy = 2
	return s
}

func keyedBatch(t *testing.T, prefix string, n int, due time.Time) []store.NewTask {
	t.Helper()
	out := make([]store.NewTask, n)
	for i := range out {
		out[i] = newTask(t, fmt.Sprintf("%s-%d", prefix, i), due, 4)
	}
	return out
}

// A keyed batch by COPY: new keys are written by the COPY itself; a batch
// that meets a key held by a live task (a unique violation) or by a task
// that ended within the key hold (errKeysHeld) writes nothing, and Insert
// then answers each of its tasks as the keyed statement does: the holder
// (Existing, HeldUntil for a final one), a new task where nothing holds the
// key, a replace over a final task, one task for a key twice in a batch.
func TestKeyedCopy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := keyedCopyStore(t)
	due := time.Now().Add(time.Hour)
	first := append(keyedBatch(t, "k", 150, due), newTask(t, "", due, 4), newTask(t, "", due, 4))
	gs := s.groupIDs(ids(first))
	if !s.keyedCopyable(gs, first) {
		t.Fatal("a keyed batch of 152 rows does not go by COPY")
	}
	out := make([]store.Inserted, len(first))
	if err := s.copyInsertKeyed(ctx, gs, first, out, time.Now()); err != nil {
		t.Fatalf("keyed COPY of new keys: %v", err)
	}
	for i, nt := range first {
		got, err := s.Get(ctx, nt.ID)
		if err != nil || got.Key != nt.Key || out[i].Task == nil || out[i].Task.ID != nt.ID || out[i].Existing {
			t.Fatalf("task %d (%q): stored %+v, %v; answered %+v", i, nt.Key, got, err, out[i])
		}
	}

	// The same keys again, new IDs: the COPY fails on the live holders and
	// writes nothing; Insert answers the holders.
	again := keyedBatch(t, "k", 150, due)
	err := s.copyInsertKeyed(ctx, s.groupIDs(ids(again)), again, make([]store.Inserted, len(again)), time.Now())
	if !uniqueViolation(err) {
		t.Fatalf("keyed COPY over live holders: %v, want a unique violation", err)
	}
	for _, nt := range again {
		if _, err := s.Get(ctx, nt.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("task %s of a failed keyed COPY is stored: %v", nt.ID, err)
		}
	}
	res, err := s.Insert(ctx, again)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if !r.Existing || r.Task.ID != first[i].ID {
			t.Fatalf("resubmit of %q: %+v, want the holder %s", again[i].Key, r, first[i].ID)
		}
	}

	// Keys whose tasks ended within the hold: held, not by a live row.
	if _, err := s.w[0].ExecContext(ctx, `UPDATE `+s.names[0]+` SET status = $1, updated_at = $2 WHERE task_key IN ('k-0', 'k-1', 'k-2')`,
		int(task.StatusDone), time.Now().UnixMicro()); err != nil {
		t.Fatal(err)
	}
	ended := keyedBatch(t, "k", 3, due)
	ended = append(ended, newTask(t, "fresh-0", due, 4))
	err = s.copyInsertKeyed(ctx, s.groupIDs(ids(ended)), ended, make([]store.Inserted, len(ended)), time.Now())
	if !errors.Is(err, errKeysHeld) {
		t.Fatalf("keyed COPY over keys held by ended tasks: %v, want errKeysHeld", err)
	}
	for _, nt := range ended {
		if _, err := s.Get(ctx, nt.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("task %s (%q) of a rolled-back keyed COPY is stored: %v", nt.ID, nt.Key, err)
		}
	}
	endedThenReplaced(t, s, "k", first[:3], ended, due)
}

// TestKeyedCopyKeepsItsConnection: the keyed COPY's checks and COMMIT
// are pipelined behind it, and however the pipeline ends — committed, a
// key held by an ended task, a unique violation in the COPY — the
// connection is left idle and is used again (the same backend), not
// closed and replaced.
func TestKeyedCopyKeepsItsConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := keyedCopyStore(t)
	s.w[0].SetMaxOpenConns(1)
	backend := func() int {
		t.Helper()
		var pid int
		if err := s.w[0].QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
			t.Fatal(err)
		}
		return pid
	}
	pid := backend()
	due := time.Now().Add(time.Hour)
	copyKeyed := func(batch []store.NewTask) error {
		return s.copyInsertKeyed(ctx, s.groupIDs(ids(batch)), batch, make([]store.Inserted, len(batch)), time.Now())
	}
	first := keyedBatch(t, "c", 5, due)
	if err := copyKeyed(first); err != nil {
		t.Fatalf("keyed COPY of new keys: %v", err)
	}
	if err := copyKeyed(keyedBatch(t, "c", 5, due)); !uniqueViolation(err) {
		t.Fatalf("keyed COPY over live holders: %v, want a unique violation", err)
	}
	if _, err := s.w[0].ExecContext(ctx, `UPDATE `+s.names[0]+` SET status = $1, updated_at = $2 WHERE task_key = 'c-0'`,
		int(task.StatusDone), time.Now().UnixMicro()); err != nil {
		t.Fatal(err)
	}
	if err := copyKeyed(keyedBatch(t, "c", 1, due)); !errors.Is(err, errKeysHeld) {
		t.Fatalf("keyed COPY over a key held by an ended task: %v, want errKeysHeld", err)
	}
	if got := backend(); got != pid {
		t.Fatalf("the write connection was replaced (backend %d, then %d)", pid, got)
	}
	if err := copyKeyed(keyedBatch(t, "d", 3, due)); err != nil {
		t.Fatalf("keyed COPY after the failed ones: %v", err)
	}
	if got := backend(); got != pid {
		t.Fatalf("the write connection was replaced (backend %d, then %d)", pid, got)
	}
}

// endedThenReplaced inserts ended (keys of prefix whose tasks, first,
// ended within the key hold, then one free key) and expects the enders
// answered (Existing, HeldUntil) and the free key created; then replaces
// of the ended keys, created, and a key twice in one batch, created once
// and answered once.
func endedThenReplaced(t *testing.T, s *Store, prefix string, first, ended []store.NewTask, due time.Time) {
	t.Helper()
	ctx := context.Background()
	n := len(first)
	res, err := s.Insert(ctx, ended)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res[:n] {
		if !r.Existing || r.Task.ID != first[i].ID || r.HeldUntil.IsZero() {
			t.Fatalf("key %q held by an ended task: %+v", ended[i].Key, r)
		}
	}
	if r := res[n]; r.Existing || r.Task.ID != ended[n].ID {
		t.Fatalf("a free key in a batch with held ones: %+v", r)
	}

	repl := keyedBatch(t, prefix, n, due)
	for i := range repl {
		repl[i].ReplaceFinal = true
	}
	twice := []store.NewTask{newTask(t, prefix+"-twice", due, 4), newTask(t, prefix+"-twice", due, 4)}
	res, err = s.Insert(ctx, append(repl, twice...))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res[:n] {
		if r.Existing || r.Task.ID != repl[i].ID {
			t.Fatalf("replace of ended key %q: %+v, want a new task", repl[i].Key, r)
		}
	}
	if a, b := res[n], res[n+1]; a.Existing || a.Task.ID != twice[0].ID || !b.Existing || b.Task.ID != twice[0].ID {
		t.Fatalf("a key twice in a batch: %+v, %+v; want the first created, the second answered it", a, b)
	}
}

// Concurrent keyed batches by COPY over overlapping keys: every key has
// exactly one live task, and every answer names a task of its key — the
// one live task (created or Existing).
func TestKeyedCopyConcurrent(t *testing.T) {
	t.Parallel()
	concurrentKeyed(t, keyedCopyStore(t), 120)
}

// The same with MariaDB's keyed statement (keyedInsertMySQL): concurrent
// group commits of keyed submits, and concurrent batches.
func TestKeyedInsertMySQLConcurrent(t *testing.T) {
	t.Parallel()
	for _, batch := range []int{16, 120} {
		t.Run(fmt.Sprint(batch), func(t *testing.T) {
			t.Parallel()
			s := openT(t, "mysql", testdb.DSNs(t, "mysql", 1), 1, 4)
			s.cfg.KeyHold = 10 * time.Minute
			concurrentKeyed(t, s, batch)
		})
	}
}

// concurrentKeyed inserts batches of batch keyed tasks from 8 writers, the
// keys drawn from 300, and checks that each key has one live task, which
// every answer names.
func concurrentKeyed(t *testing.T, s *Store, batch int) {
	ctx := context.Background()
	due := time.Now().Add(time.Hour)
	const writers, rounds, keys = 8, 5, 300
	perWriter := rounds * 120 / batch
	answers := make([][]store.Inserted, writers*perWriter)
	sent := make([][]store.NewTask, writers*perWriter)
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range perWriter {
				tasks := make([]store.NewTask, batch)
				for i := range tasks {
					tasks[i] = newTask(t, fmt.Sprintf("c-%d", (w*37+r*53+i*7)%keys), due, 4)
				}
				res, err := s.Insert(ctx, tasks)
				if err != nil {
					errs <- err
					return
				}
				answers[w*perWriter+r], sent[w*perWriter+r] = res, tasks
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	live := map[string]string{}
	rows, err := s.w[0].QueryContext(ctx, `SELECT task_key, id FROM `+s.names[0]+` WHERE status < 3 AND task_key IS NOT NULL`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var k, id string
		if err := rows.Scan(&k, &id); err != nil {
			t.Fatal(err)
		}
		if prev, ok := live[k]; ok {
			t.Fatalf("key %q has two live tasks: %s and %s", k, prev, id)
		}
		live[k] = id
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for b, res := range answers {
		for i, r := range res {
			k := sent[b][i].Key
			if r.Task == nil || r.Task.Key != k || live[k] != r.Task.ID {
				t.Fatalf("batch %d task %d (%q): answered %+v, the key's live task is %s", b, i, k, r, live[k])
			}
		}
	}
}

// MariaDB's keyed statement answers its tasks as the
// statements of insertTx do: new keys created, live holders and holders
// that ended within the key hold answered (Existing, HeldUntil), a replace
// over a final task created, a key twice in a group one task.
func TestKeyedInsertMySQL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openT(t, "mysql", testdb.DSNs(t, "mysql", 1), 1, 4)
	s.cfg.KeyHold = 10 * time.Minute
	due := time.Now().Add(time.Hour)
	first := append(keyedBatch(t, "m", 10, due), newTask(t, "", due, 4))
	if !s.keyedMySQL(s.groupIDs(ids(first)), first) {
		t.Fatal("a keyed group of 11 does not go by the one statement")
	}
	out := make([]store.Inserted, len(first))
	again, err := s.keyedInsertMySQL(ctx, s.groupIDs(ids(first))[0], first, out, time.Now())
	if err != nil || len(again) != 0 {
		t.Fatalf("keyed statement of new keys: %v, %d again", err, len(again))
	}
	for i, nt := range first {
		got, err := s.Get(ctx, nt.ID)
		if err != nil || got.Key != nt.Key || out[i].Existing || out[i].Task.ID != nt.ID {
			t.Fatalf("task %d (%q): stored %+v, %v; answered %+v", i, nt.Key, got, err, out[i])
		}
	}
	res, err := s.Insert(ctx, keyedBatch(t, "m", 10, due))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if !r.Existing || r.Task.ID != first[i].ID {
			t.Fatalf("resubmit of key %d: %+v, want the live holder %s", i, r, first[i].ID)
		}
	}
	if _, err := s.w[0].ExecContext(ctx, `UPDATE `+s.names[0]+` SET status = ?, updated_at = ? WHERE task_key IN ('m-0', 'm-1')`,
		int(task.StatusDone), time.Now().UnixMicro()); err != nil {
		t.Fatal(err)
	}
	ended := append(keyedBatch(t, "m", 2, due), newTask(t, "m-fresh", due, 4))
	endedThenReplaced(t, s, "m", first[:2], ended, due)
}
