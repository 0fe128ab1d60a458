package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/router"
	"github.com/ontimehq/ontime/internal/sqldb"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
	"github.com/ontimehq/ontime/internal/testdb"
)

// expandFixture is a store with tasks in every status but running, and
// what it held.
type expandFixture struct {
	engine string
	old    []string
	tasks  map[string]store.NewTask
	status map[string]task.Status
}

func (f *expandFixture) open(t *testing.T, dsns []string) *Store {
	t.Helper()
	s, err := Open(context.Background(), Config{Driver: f.engine, DSNs: dsns, Tables: 4, Segments: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// add inserts n tasks (every third keyed), cancels every fifth and claims
// the due ones of the first item.
func (f *expandFixture) add(t *testing.T, s *Store, prefix string, n int) {
	t.Helper()
	ctx := context.Background()
	var batch []store.NewTask
	for i := range n {
		key := ""
		if i%3 == 0 {
			key = fmt.Sprintf("%s-%d", prefix, i)
		}
		due := time.Now().Add(time.Hour)
		if i%7 == 0 {
			due = time.Now().Add(-time.Minute)
		}
		nt := newTask(t, key, due, 2)
		batch = append(batch, nt)
		f.tasks[nt.ID] = nt
		f.status[nt.ID] = task.StatusPending
	}
	if _, err := s.Insert(ctx, batch); err != nil {
		t.Fatal(err)
	}
	for i, nt := range batch {
		if i%5 == 0 {
			if _, err := s.Cancel(ctx, nt.ID); err != nil {
				t.Fatal(err)
			}
			f.status[nt.ID] = task.StatusCancelled
		}
	}
	for _, it := range s.Items() {
		refs, err := s.Claim(ctx, it, time.Now(), time.Now(), store.Lease{Owner: "n1", Until: time.Now().Add(time.Hour), Token: 7}, 10000)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range refs {
			f.status[r.ID] = task.StatusClaimed
		}
	}
}

// check asserts that s answers every task with its status, by ID and by
// key, that counts per status match, and that no claim finds anything
// (nothing due is pending, and the stale copies are passed over).
func (f *expandFixture) check(t *testing.T, s *Store, when string) {
	t.Helper()
	ctx := context.Background()
	want := map[task.Status]int64{}
	for id, st := range f.status {
		want[st]++
		got, err := s.Get(ctx, id)
		if err != nil {
			t.Fatalf("%s: get %s: %v", when, id, err)
		}
		if got.Status != st {
			t.Fatalf("%s: %s is %v, want %v", when, id, got.Status, st)
		}
		if k := f.tasks[id].Key; k != "" && st != task.StatusCancelled {
			byKey, err := s.GetByKey(ctx, "t", k)
			if err != nil || byKey.ID != id {
				t.Fatalf("%s: by key %s: %v %v", when, k, byKey, err)
			}
		}
	}
	got, err := s.Count(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, want) {
		t.Fatalf("%s: counts %v, want %v", when, got, want)
	}
	for _, it := range s.Items() {
		refs, err := s.Claim(ctx, it, time.Now(), time.Now(), store.Lease{Owner: "n2", Until: time.Now().Add(time.Hour), Token: 8}, 10000)
		if err != nil || len(refs) != 0 {
			t.Fatalf("%s: claim %v found %d rows (%v): a copy served twice?", when, it, len(refs), err)
		}
	}
}

// copies counts the rows of each task over dbs.
func copies(t *testing.T, s *Store, engine string, dsns []string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, dsn := range dsns {
		db, err := sqldb.Open(engine, dsn, sqldb.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		db.SetMaxOpenConns(1)
		for _, tn := range s.names {
			rows, err := db.Query(`SELECT id FROM ` + tn)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var id string
				if err := rows.Scan(&id); err != nil {
					t.Fatal(err)
				}
				out[id]++
			}
			rows.Close()
		}
	}
	return out
}

var errKilled = errors.New("killed")

// TestExpandDoubles grows a store (1 → 2 databases on SQLite, 2 → 4 on
// MariaDB and PostgreSQL) while tasks are written during the copy: the
// copy is cut off twice and resumed, an abort before it leaves the store
// as it was, and after cutover and cleanup every task is in one place,
// answers by ID and key with its status, and the counts are the same.
func TestExpandDoubles(t *testing.T) {
	t.Parallel()
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			m := 2
			if engine == "sqlite" {
				m = 1
			}
			f := &expandFixture{engine: engine, old: testdb.DSNs(t, engine, m), tasks: map[string]store.NewTask{}, status: map[string]task.Status{}}
			twins := testdb.DSNs(t, engine, m)
			s := f.open(t, f.old)
			f.add(t, s, "a", 1500)
			f.check(t, s, "before")

			// Aborted before cutover: nothing left of it.
			if err := s.ExpandBegin(ctx, twins); err != nil {
				t.Fatal(err)
			}
			if err := s.ExpandCopy(ctx, ExpandOptions{Page: 100}); err != nil {
				t.Fatal(err)
			}
			if _, err := Open(ctx, Config{Driver: engine, DSNs: append(append([]string{}, f.old...), twins...), Tables: 4, Segments: 2}); !errors.Is(err, ErrTopology) ||
				!strings.Contains(err.Error(), "is being added by `ontime store expand`") {
				t.Fatalf("a twin in the config before cutover: %v", err)
			}
			if err := s.ExpandAbort(ctx); err != nil {
				t.Fatal(err)
			}
			if st, err := s.ExpansionStatus(ctx); err != nil || st.Phase != PhaseNone || st.Databases != m {
				t.Fatalf("after abort: %+v %v", st, err)
			}
			if n := len(copies(t, s, engine, twins)); n != 0 {
				t.Fatalf("abort left %d rows in the new databases", n)
			}
			f.check(t, s, "after abort")

			// The copy, killed twice mid-way, with writes between.
			if err := s.ExpandBegin(ctx, twins); err != nil {
				t.Fatal(err)
			}
			for kill := range 2 {
				cctx, cancel := context.WithCancelCause(ctx)
				pages := 0
				err := s.ExpandCopy(cctx, ExpandOptions{Page: 50, OnProgress: func(ExpandStatus) {
					if pages++; pages == 3 {
						cancel(errKilled)
					}
				}})
				cancel(nil)
				if err == nil {
					t.Fatalf("kill %d: the copy ended before it was killed", kill)
				}
				f.add(t, s, fmt.Sprintf("b%d", kill), 200)
				// Keys ended and taken again by new tasks: a twin that
				// holds the ended task's copy as live still must give
				// the key to the new one.
				var again []store.NewTask
				var ended []string
				for id, st := range f.status {
					if k := f.tasks[id].Key; k != "" && st == task.StatusPending && len(ended) < 100 {
						ended = append(ended, id)
					}
				}
				for _, id := range ended {
					if _, err := s.Cancel(ctx, id); err != nil {
						t.Fatal(err)
					}
					f.status[id] = task.StatusCancelled
					nt := newTask(t, f.tasks[id].Key, time.Now().Add(time.Hour), 2)
					again = append(again, nt)
					f.tasks[nt.ID], f.status[nt.ID] = nt, task.StatusPending
				}
				if ins, err := s.Insert(ctx, again); err != nil {
					t.Fatal(err)
				} else {
					for i, in := range ins {
						if in.Existing || in.Task.ID != again[i].ID {
							t.Fatalf("key %s still held by %s", again[i].Key, in.Task.ID)
						}
					}
				}
				// Changes to rows copied already: the catch-up brings them.
				n := 0
				for id, st := range f.status {
					if st == task.StatusPending && n < 50 {
						if _, err := s.Cancel(ctx, id); err != nil {
							t.Fatal(err)
						}
						f.status[id] = task.StatusCancelled
						n++
					}
				}
			}
			if err := s.ExpandCopy(ctx, ExpandOptions{Page: 50}); err != nil {
				t.Fatal(err)
			}
			f.add(t, s, "c", 100)
			st, err := s.ExpansionStatus(ctx)
			if err != nil || st.Phase != PhaseCopy || st.Copied != st.Tables || st.Tables != 4*m || st.To != 2*m {
				t.Fatalf("after the copy: %+v %v", st, err)
			}
			// A node heartbeating: no cutover.
			if err := s.Heartbeat(ctx, "node-1", "127.0.0.1:1", nil, store.Process{}, time.Now()); err != nil {
				t.Fatal(err)
			}
			if err := s.ExpandCutover(ctx, 10*time.Second, ExpandOptions{}); !errors.Is(err, ErrExpansion) || !strings.Contains(err.Error(), "node-1") {
				t.Fatalf("cutover with a live node: %v", err)
			}
			if err := s.Deregister(ctx, "node-1"); err != nil {
				t.Fatal(err)
			}
			// A node of another coordinator (or none) marks itself.
			if err := s.MarkInUse(ctx, "solo", time.Now()); err != nil {
				t.Fatal(err)
			}
			if err := s.ExpandCutover(ctx, 10*time.Second, ExpandOptions{}); !errors.Is(err, ErrExpansion) || !strings.Contains(err.Error(), "solo") {
				t.Fatalf("cutover with a marked node: %v", err)
			}
			if err := s.Unmark(ctx, "solo"); err != nil {
				t.Fatal(err)
			}
			if err := s.ExpandCutover(ctx, 10*time.Second, ExpandOptions{Page: 50}); err != nil {
				t.Fatal(err)
			}
			// A node still running by the old databases hears of it.
			if err := s.MarkInUse(ctx, "solo", time.Now()); !errors.Is(err, ErrTopology) {
				t.Fatalf("mark after the cutover: %v", err)
			}
			s.Close()
			if _, err := Open(ctx, Config{Driver: engine, DSNs: f.old, Tables: 4, Segments: 2}); !errors.Is(err, ErrTopology) || !strings.Contains(err.Error(), "missing") {
				t.Fatalf("the old config after cutover: %v", err)
			}
			all := append(append([]string{}, f.old...), twins...)
			s = f.open(t, all)
			f.check(t, s, "after cutover")
			// IDs from before: PATCH and DELETE reach the row where the
			// doubled topology puts it, not the copy left behind.
			n := 0
			for id, st := range f.status {
				if st != task.StatusPending || n == 40 {
					continue
				}
				if n%2 == 0 {
					due := time.Now().Add(2 * time.Hour)
					got, err := s.Update(ctx, id, store.Patch{DueAt: &due})
					if err != nil || !got.DueAt.Equal(due.Truncate(time.Microsecond)) {
						t.Fatalf("patch %s after cutover: %v %v", id, got, err)
					}
				} else {
					if _, err := s.Cancel(ctx, id); err != nil {
						t.Fatalf("cancel %s after cutover: %v", id, err)
					}
					f.status[id] = task.StatusCancelled
				}
				n++
			}
			f.check(t, s, "after cutover, patched and cancelled")
			before := copies(t, s, engine, all)
			dup := 0
			for _, n := range before {
				dup += n - 1
			}
			if dup == 0 {
				t.Fatal("no row was copied")
			}
			// The cleanup, killed once.
			cctx, cancel := context.WithCancelCause(ctx)
			pages := 0
			err = s.ExpandCleanup(cctx, ExpandOptions{Page: 20, OnProgress: func(ExpandStatus) {
				if pages++; pages == 2 {
					cancel(errKilled)
				}
			}})
			cancel(nil)
			if err == nil {
				t.Fatal("the cleanup ended before it was killed")
			}
			f.check(t, s, "during cleanup")
			if err := s.ExpandCleanup(ctx, ExpandOptions{Page: 20}); err != nil {
				t.Fatal(err)
			}
			for id, n := range copies(t, s, engine, all) {
				if n != 1 {
					t.Fatalf("%s has %d copies after cleanup", id, n)
				}
				if _, ok := f.status[id]; !ok {
					t.Fatalf("%s: a row nobody wrote", id)
				}
			}
			if st, err := s.ExpansionStatus(ctx); err != nil || st.Phase != PhaseNone || st.Databases != 2*m {
				t.Fatalf("after cleanup: %+v %v", st, err)
			}
			s.Close()
			s = f.open(t, all)
			f.check(t, s, "reopened")
			// Each row where the doubled topology puts it.
			grown := router.Topology{Databases: 2 * m, Tables: 4}
			for id, nt := range f.tasks {
				db, tb := grown.Locate(nt.ShardHash)
				var n int
				if err := s.r[db].QueryRowContext(ctx, s.d.rebind(`SELECT COUNT(*) FROM `+s.names[tb]+` WHERE id = ?`), id).Scan(&n); err != nil || n != 1 {
					t.Fatalf("%s not in database %d table %d: %d %v", id, db, tb, n, err)
				}
			}
		})
	}
}
