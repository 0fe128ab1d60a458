package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
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
	// The counts the writes maintain (schema 20) follow the copy, its
	// catch-up and the cleanup: each database's equal its tables', and
	// the topic's (counted while a cleanup runs) the tasks'.
	if drift, err := CountsDrift(ctx, s); err != nil || drift != "" {
		t.Fatalf("%s: maintained counts: %s %v", when, drift, err)
	}
	if ts, err := s.TopicStats(ctx, "t"); err != nil || len(ts) != 1 || !maps.Equal(ts[0].Counts, want) {
		t.Fatalf("%s: topic stats %+v %v, want %v", when, ts, err, want)
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

// noChangesIndex fails t if a task table of s has the catch-up's index of
// changes: it lives only while an expansion copies.
func noChangesIndex(t *testing.T, s *Store, engine, when string) {
	t.Helper()
	for d, db := range s.w {
		for _, tn := range s.names {
			if hasChangesIndex(t, engine, db, tn) {
				t.Fatalf("%s: %s of database %d has the index of changes", when, tn, d)
			}
		}
	}
}

// pacedCheck is an OnProgress that fails the test when the rows counted
// since its first call run ahead of rate per second: a token bucket of
// one page lets a page through at once, and the page just done is
// counted before its wait.
func pacedCheck(t *testing.T, page, rate int, rows func(ExpandStatus) int64) func(ExpandStatus) {
	var start time.Time
	var first int64
	return func(st ExpandStatus) {
		if start.IsZero() {
			start, first = time.Now(), rows(st)
			return
		}
		done := rows(st) - first
		if limit := float64(2*page) + float64(rate)*time.Since(start).Seconds(); float64(done) > limit {
			t.Errorf("%d rows in %s: more than %d a second allow", done, time.Since(start), rate)
		}
	}
}

// newExpandFixture is a store's old databases and their twins: 1 → 2 on
// SQLite, 2 → 4 on MariaDB and PostgreSQL.
func newExpandFixture(t *testing.T, engine string) (f *expandFixture, twins []string) {
	t.Helper()
	m := 2
	if engine == "sqlite" {
		m = 1
	}
	f = &expandFixture{engine: engine, old: testdb.DSNs(t, engine, m), tasks: map[string]store.NewTask{}, status: map[string]task.Status{}}
	return f, testdb.DSNs(t, engine, m)
}

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
			f, twins := newExpandFixture(t, engine)
			m := len(twins)
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
			noChangesIndex(t, s, engine, "after abort")

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
			// The rest of the copy, capped at 1,000 rows a second: it never
			// runs ahead of the cap (a page, and the page the cap's
			// bucket holds, beyond it).
			paced := pacedCheck(t, 50, 1000, func(st ExpandStatus) int64 { return st.RowsCopy })
			if err := s.ExpandCopy(ctx, ExpandOptions{Page: 50, Rate: 1000, OnProgress: paced}); err != nil {
				t.Fatal(err)
			}
			f.add(t, s, "c", 100)
			st, err := s.ExpansionStatus(ctx)
			if err != nil || st.Phase != PhaseCopy || st.Copied != st.Tables || st.Tables != 4*m || st.To != 2*m {
				t.Fatalf("after the copy: %+v %v", st, err)
			}
			// Retention while the copy runs keeps the rows that move: one
			// deleted after its copy would come back on the twin.
			grownTopo := router.Topology{Databases: 2 * m, Tables: 4}
			for _, it := range s.Items() {
				if _, err := s.DeleteExpired(ctx, it, task.StatusCancelled, time.Now().Add(time.Hour), 10000); err != nil {
					t.Fatal(err)
				}
			}
			kept := 0
			for id, st := range f.status {
				if st != task.StatusCancelled {
					continue
				}
				if db, _ := grownTopo.Locate(f.tasks[id].ShardHash); db >= m {
					kept++ // moves: retention kept it
					continue
				}
				if _, err := s.Get(ctx, id); !errors.Is(err, store.ErrNotFound) {
					t.Fatalf("retention during the copy: %s (stays) is still there: %v", id, err)
				}
				delete(f.status, id)
				delete(f.tasks, id)
			}
			if kept == 0 {
				t.Fatal("no cancelled task moves")
			}
			f.check(t, s, "after retention during the copy")

			// A node marked in use that does not stop: the cutover waits,
			// gives up, and lifts its fence.
			s.EnableFence()
			if st, err := s.MarkInUse(ctx, "solo", time.Now()); err != nil || st.Fence {
				t.Fatalf("mark before the cutover: %+v %v", st, err)
			}
			if err := s.ExpandCutover(ctx, ExpandOptions{FenceWait: 300 * time.Millisecond}); !errors.Is(err, ErrExpansion) || !strings.Contains(err.Error(), "solo") {
				t.Fatalf("cutover with a node that keeps writing: %v", err)
			}
			if st, err := s.MarkInUse(ctx, "solo", time.Now()); err != nil || st.Fence || st.Phase != PhaseCopy {
				t.Fatalf("mark after a cutover gave up: %+v %v", st, err)
			}
			// A node that sees the pending cutover stops and unmarks, as
			// ontime serve does; the cutover then goes through online.
			stopped := make(chan error, 1)
			go func() {
				for {
					st, err := s.MarkInUse(ctx, "solo", time.Now())
					if err == nil && !st.Fence && st.Phase != PhaseCopy {
						// A node marks more often while it sees a copy.
						err = fmt.Errorf("a mark during the copy saw phase %q", st.Phase)
					}
					if err != nil || st.Fence {
						if err == nil {
							err = s.Unmark(ctx, "solo")
						}
						stopped <- err
						return
					}
					time.Sleep(20 * time.Millisecond)
				}
			}()
			var tm CutoverTimings
			if err := s.ExpandCutover(ctx, ExpandOptions{Page: 50, Timings: &tm}); err != nil {
				t.Fatal(err)
			}
			if err := <-stopped; err != nil {
				t.Fatal(err)
			}
			if tm.Stopped <= 0 || tm.CatchUp <= 0 {
				t.Fatalf("cutover timings not reported: %+v", tm)
			}
			// A node still running by the old databases hears of it and
			// writes no more (it missed the flip: paused, partitioned).
			if _, err := s.MarkInUse(ctx, "solo", time.Now()); !errors.Is(err, ErrTopology) {
				t.Fatalf("mark after the cutover: %v", err)
			}
			if _, err := s.Insert(ctx, []store.NewTask{newTask(t, "", time.Now(), 2)}); !errors.Is(err, store.ErrUnavailable) {
				t.Fatalf("insert by the old databases after the cutover: %v", err)
			}
			if _, err := s.Claim(ctx, s.Items()[0], time.Now(), time.Now(), store.Lease{Owner: "n1", Until: time.Now().Add(time.Hour), Token: 7}, 10); !errors.Is(err, store.ErrUnavailable) {
				t.Fatalf("claim by the old databases after the cutover: %v", err)
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
			paced = pacedCheck(t, 20, 400, func(st ExpandStatus) int64 { return st.RowsClean })
			if err := s.ExpandCleanup(ctx, ExpandOptions{Page: 20, Rate: 400, OnProgress: paced}); err != nil {
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
			noChangesIndex(t, s, engine, "after cleanup")
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

// TestExpandPurgedStayGone: what is deleted in the old databases while an
// expansion copies — a final task purged by ID, tasks deleted by a bulk
// operation, pending ones among them — does not come back from the twin
// after the cutover; and what refers to the old copies is kept right: a
// bulk reschedule walked before the cutover is not applied again to the
// moved rows, and while the cleanup runs, a schedule's withdrawal and a
// topic's requeue change and count each task once.
func TestExpandPurgedStayGone(t *testing.T) {
	t.Parallel()
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			f, twins := newExpandFixture(t, engine)
			m := len(twins)
			s := f.open(t, f.old)
			f.add(t, s, "a", 600)
			f.add(t, s, "del", 300)
			f.add(t, s, "w", 300)
			f.add(t, s, "r", 300)
			grown := router.Topology{Databases: 2 * m, Tables: 4}
			moves := func(id string) bool { db, _ := grown.Locate(f.tasks[id].ShardHash); return db >= m }
			// Dead tasks, for the requeue by topic.
			dead := 0
			for id, st := range f.status {
				if k := f.tasks[id].Key; st == task.StatusPending && strings.HasPrefix(k, "r-") {
					db, tb, _ := s.locate(id)
					if _, err := s.w[db].ExecContext(ctx, s.d.rebind(`UPDATE `+s.names[tb]+` SET status = ?, updated_at = ? WHERE id = ?`), int(task.StatusDead), time.Now().UnixMicro(), id); err != nil {
						t.Fatal(err)
					}
					f.status[id] = task.StatusDead
					dead++
				}
			}
			f.check(t, s, "before")

			if err := s.ExpandBegin(ctx, twins); err != nil {
				t.Fatal(err)
			}
			if err := s.ExpandCopy(ctx, ExpandOptions{Page: 100}); err != nil {
				t.Fatal(err)
			}
			// Pages written but their cursors lost (a kill between the
			// two): written again, replacing what is there (on PostgreSQL
			// the COPY fails and statements take over).
			if _, err := s.w[0].ExecContext(ctx, `UPDATE ontime_expansion SET after_id = '', phase = 0`); err != nil {
				t.Fatal(err)
			}
			if err := s.ExpandCopy(ctx, ExpandOptions{}); err != nil {
				t.Fatal(err)
			}
			// Copied, then deleted at the source.
			purged := 0
			for id, st := range f.status {
				if st == task.StatusCancelled && moves(id) && !strings.HasPrefix(f.tasks[id].Key, "del-") && purged < 30 {
					if _, err := s.Purge(ctx, id); err != nil {
						t.Fatal(err)
					}
					delete(f.status, id)
					purged++
				}
			}
			if purged == 0 {
				t.Fatal("no cancelled task moves")
			}
			del := &store.Operation{ID: "opdelete", Action: store.OpDelete, Filter: store.OpFilter{Topic: "t", KeyPrefix: "del-"}, CreatedAt: time.Now()}
			shift := &store.Operation{ID: "opshift", Action: store.OpReschedule, Shift: time.Hour, Filter: store.OpFilter{Topic: "t", KeyPrefix: "a-"}, CreatedAt: time.Now()}
			walk := func(s *Store, op *store.Operation) (changed int64) {
				dbs, tables := s.OperationTables()
				for db := range dbs {
					for tb := range tables {
						for {
							pg, err := s.OperationPage(ctx, op, db, tb, 50, time.Now())
							if err != nil {
								t.Fatal(err)
							}
							changed += pg.Changed
							if pg.Done {
								break
							}
						}
					}
				}
				return changed
			}
			deleted, movedDeleted := int64(0), 0
			for id, st := range f.status {
				if strings.HasPrefix(f.tasks[id].Key, "del-") && st != task.StatusClaimed {
					deleted++
					if moves(id) {
						movedDeleted++
					}
					delete(f.status, id)
				}
			}
			if n := walk(s, del); n != deleted || movedDeleted == 0 {
				t.Fatalf("bulk delete during the copy: %d deleted, want %d (%d moving)", n, deleted, movedDeleted)
			}
			shifted := map[string]time.Time{}
			for id, st := range f.status {
				if st == task.StatusPending && strings.HasPrefix(f.tasks[id].Key, "a-") {
					got, err := s.Get(ctx, id)
					if err != nil {
						t.Fatal(err)
					}
					shifted[id] = got.DueAt.Add(time.Hour)
				}
			}
			if n := walk(s, shift); n != int64(len(shifted)) {
				t.Fatalf("bulk reschedule during the copy: %d changed, want %d", n, len(shifted))
			}
			f.check(t, s, "after the deletes")
			if err := s.ExpandCutover(ctx, ExpandOptions{Page: 100}); err != nil {
				t.Fatal(err)
			}
			s.Close()
			all := append(append([]string{}, f.old...), twins...)
			s = f.open(t, all)
			f.check(t, s, "after cutover")
			for id := range f.tasks {
				if _, ok := f.status[id]; ok {
					continue
				}
				if got, err := s.Get(ctx, id); !errors.Is(err, store.ErrNotFound) {
					t.Fatalf("%s, deleted during the copy, is back after the cutover: %+v %v", id, got, err)
				}
			}
			// The reschedule's walk goes on over the grown store: the
			// twins' tables are walked already.
			if n := walk(s, shift); n != 0 {
				t.Fatalf("bulk reschedule after the cutover changed %d rows again", n)
			}
			for id, due := range shifted {
				got, err := s.Get(ctx, id)
				if err != nil || !got.DueAt.Equal(due) {
					t.Fatalf("%s due %v, want %v (shifted once): %v", id, got.DueAt, due, err)
				}
			}
			// While the cleanup runs: each task withdrawn and requeued once.
			withdrawn := int64(0)
			for id, st := range f.status {
				if strings.HasPrefix(f.tasks[id].Key, "w-") && (st == task.StatusPending || st == task.StatusClaimed) {
					withdrawn++
					f.status[id] = task.StatusCancelled
				}
			}
			if n, err := s.WithdrawFires(ctx, "t", "w-", "w.", time.Time{}, "withdrawn"); err != nil || n != withdrawn {
				t.Fatalf("withdraw during the cleanup: %d %v, want %d", n, err, withdrawn)
			}
			if n, err := s.RequeueTopic(ctx, "t", time.Now().Add(time.Hour)); err != nil || n != int64(dead) {
				t.Fatalf("requeue during the cleanup: %d %v, want %d", n, err, dead)
			}
			for id, st := range f.status {
				if st == task.StatusDead {
					f.status[id] = task.StatusPending
				}
			}
			f.check(t, s, "withdrawn and requeued")
			if err := s.ExpandCleanup(ctx, ExpandOptions{Page: 100}); err != nil {
				t.Fatal(err)
			}
			f.check(t, s, "after cleanup")
			// A node stopped for the cutover that reads the state only
			// after the cleanup still learns the new databases.
			w, err := OpenWatch(engine, all[0])
			if err != nil {
				t.Fatal(err)
			}
			ts, err := w.Read(ctx)
			w.Close()
			if err != nil || ts.Phase != PhaseNone || ts.From != m || strings.Join(ts.Twins, " ") != strings.Join(twins, " ") || ts.Epoch != s.Epoch() {
				t.Fatalf("the state after the cleanup: %+v %v", ts, err)
			}
			for id, n := range copies(t, s, engine, all) {
				if _, ok := f.status[id]; !ok || n != 1 {
					t.Fatalf("%s: %d copies after cleanup (known %v)", id, n, ok)
				}
			}
		})
	}
}

// TestExpandBeginCutShort: an expander killed between marking the new
// databases and recording the expansion leaves them marked; run again with
// the same databases, it takes them (CI found the refusal: the chaos
// test's expander killed 1.5 s after its start, still beginning). A new
// database of another store, or marked as another twin, is still refused.
func TestExpandBeginCutShort(t *testing.T) {
	t.Parallel()
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			f, twins := newExpandFixture(t, engine)
			m := len(twins)
			s := f.open(t, f.old)
			f.add(t, s, "a", 100)
			first, err := readIdentity(ctx, s.w[0])
			if err != nil {
				t.Fatal(err)
			}
			mark := func(index int) {
				t.Helper()
				tw, err := s.openTwins(ctx, "--databases", twins, m)
				if err != nil {
					t.Fatal(err)
				}
				defer tw.close()
				if err := s.setMeta(ctx, tw.dbs[0], metaStoreID, first.storeID, metaDatabaseID, newRandomID(), metaDatabaseIndex, strconv.Itoa(index), metaExpanding, "1"); err != nil {
					t.Fatal(err)
				}
			}
			// Marked as another twin than the one it is given as.
			mark(m + 1)
			if err := s.ExpandBegin(ctx, twins); !errors.Is(err, ErrExpansion) || !strings.Contains(err.Error(), "already belongs to an ontime store") {
				t.Fatalf("a new database marked as another twin: %v", err)
			}
			// Marked as the twin it is given as: a begin cut short.
			mark(m)
			if err := s.ExpandBegin(ctx, twins); err != nil {
				t.Fatalf("again after a begin cut short: %v", err)
			}
			if st, err := s.ExpansionStatus(ctx); err != nil || st.Phase != PhaseCopy || st.To != 2*m {
				t.Fatalf("after the begin: %+v %v", st, err)
			}
			if err := s.ExpandCopy(ctx, ExpandOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := s.ExpandAbort(ctx); err != nil {
				t.Fatal(err)
			}
			f.check(t, s, "after the abort")
			// A database of another store.
			other := testdb.DSNs(t, engine, 1)
			o, err := Open(ctx, Config{Driver: engine, DSNs: other, Tables: 4, Segments: 2})
			if err != nil {
				t.Fatal(err)
			}
			o.Close()
			given := append(append([]string{}, other...), twins[1:]...)
			if err := s.ExpandBegin(ctx, given); !errors.Is(err, ErrExpansion) || !strings.Contains(err.Error(), "[0] already belongs to an ontime store") {
				t.Fatalf("a database of another store: %v", err)
			}
		})
	}
}
