package sqlstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/testdb"
)

// slowKeyed turns off the engine's fast keyed insert (PostgreSQL's keyed
// statement, SQLite's key hold in the INSERT): keyed rows go through the
// statements of insertTx, a SELECT of the keys, then the INSERT. MariaDB
// has none (it compares the statements with themselves).
func slowKeyed(s *Store) {
	s.ins.keyed, s.ins.hold = false, false
}

// keyedAnswer is what a caller learns of one keyed insert.
type keyedAnswer struct {
	existing bool
	id       string
	held     bool
}

// keyedScenario inserts, in a store of 3 tables with a key hold, a live
// task, one cancelled (holding its key) and a keyless one, then the tasks
// of TestKeyedInsertStatement's batch, all in one Insert (alone: each in
// an Insert of its own, in order), and answers each one's result and the
// store's counts.
func keyedScenario(t *testing.T, s *Store, base []store.NewTask, batch []store.NewTask, alone bool) ([]keyedAnswer, map[string]int64) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Insert(ctx, base); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Cancel(ctx, base[1].ID); err != nil {
		t.Fatal(err)
	}
	var out []store.Inserted
	if alone {
		for _, nt := range batch {
			r, err := s.Insert(ctx, []store.NewTask{nt})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, r...)
		}
	} else {
		var err error
		if out, err = s.Insert(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	answers := make([]keyedAnswer, len(out))
	for i, r := range out {
		answers[i] = keyedAnswer{r.Existing, r.Task.ID, !r.HeldUntil.IsZero()}
	}
	counts, err := s.Count(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byStatus := map[string]int64{}
	for st, n := range counts {
		byStatus[st.String()] = n
	}
	return answers, byStatus
}

// Every engine's fast keyed insert answers each task as the statements of
// insertTx do (created; the live holder; a final holder within the hold,
// with its hold; a replace over a final task; the same key twice; keyless
// rows; an ID inserted before), in one Insert spanning three tables and
// in one Insert per task (a server engine's group commit of one table).
func TestKeyedFastPathsAnswerAsSlow(t *testing.T) {
	for _, engine := range testdb.Engines {
		for _, alone := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/alone=%v", engine, alone), func(t *testing.T) {
				t.Parallel()
				due := time.Now().Add(time.Hour)
				live, final, again := keyedIn(t, 3, 0, "live", due), keyedIn(t, 3, 1, "final", due), newTask(t, "", due, 2)
				repl := func(nt store.NewTask) store.NewTask { nt.ReplaceFinal = true; return nt }
				same := func(nt store.NewTask) store.NewTask { return newTask(t, nt.Key, due, 2) }
				fresh := keyedIn(t, 3, 2, "fresh", due)
				batch := []store.NewTask{fresh, same(live), same(final), repl(same(final)), repl(same(final)), same(fresh),
					newTask(t, "", due, 2), again, repl(keyedIn(t, 3, 0, "r", due)), keyedIn(t, 3, 1, "s", due)}
				base := []store.NewTask{live, final, again}
				var got [2][]keyedAnswer
				var counts [2]map[string]int64
				for n, slow := range []bool{true, false} {
					s, err := Open(context.Background(), Config{Driver: engine, DSNs: testdb.DSNs(t, engine, 1), Tables: 3, Segments: 2, KeyHold: time.Hour})
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { s.Close() })
					if slow {
						slowKeyed(s)
					}
					got[n], counts[n] = keyedScenario(t, s, base, batch, alone)
				}
				for i := range batch {
					if i == 2 && !alone {
						// A keep over a key that a replace of the same Insert
						// makes live again may answer either: the final task
						// (as if before the replace: the slow path reads the
						// keys first) or the replace's (after it), as in
						// TestKeyedInsertStatement. Checked below.
						continue
					}
					if got[0][i] != got[1][i] {
						t.Errorf("task %d: fast %+v, slow %+v", i, got[1][i], got[0][i])
					}
				}
				if fmt.Sprint(counts[0]) != fmt.Sprint(counts[1]) {
					t.Errorf("counts: fast %v, slow %v", counts[1], counts[0])
				}
				// What the slow path answers, spelled out: 2 is held by the
				// final task (or, in one statement, may meet 3's task).
				if a := got[1][2]; !a.existing || !(a.id == final.ID && a.held || a.id == batch[3].ID && !a.held) {
					t.Errorf("a keep over a held key: %+v", a)
				}
				if a := got[1][1]; !a.existing || a.id != live.ID {
					t.Errorf("a key held live: %+v", a)
				}
				if a := got[1][5]; !a.existing || a.id != fresh.ID {
					t.Errorf("the same key twice: %+v", a)
				}
			})
		}
	}
}

// Concurrent single keyed Inserts of the same keys in different orders
// (the group commit of one table on a server engine, SQLite's writer
// taking them one after another): every key ends with one live task,
// created by exactly one call, which every call answers.
func TestKeyedAloneConcurrent(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s, err := Open(ctx, Config{Driver: engine, DSNs: testdb.DSNs(t, engine, 1), Tables: 2, Segments: 2, KeyHold: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			due := time.Now().Add(time.Hour)
			const callers, keys = 8, 24
			var mu sync.Mutex
			ids := map[string]map[string]bool{}
			created := map[string]int{}
			var wg sync.WaitGroup
			errs := make(chan error, callers)
			for range callers {
				order := rand.Perm(keys)
				wg.Go(func() {
					for _, k := range order {
						key := fmt.Sprintf("k-%d", k)
						r, err := s.Insert(ctx, []store.NewTask{newTask(t, key, due, 2)})
						if err != nil {
							errs <- err
							return
						}
						mu.Lock()
						if ids[key] == nil {
							ids[key] = map[string]bool{}
						}
						ids[key][r[0].Task.ID] = true
						if !r[0].Existing {
							created[key]++
						}
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			for k := range keys {
				key := fmt.Sprintf("k-%d", k)
				if created[key] != 1 || len(ids[key]) != 1 {
					t.Fatalf("key %s: created %d times, answered as %v", key, created[key], ids[key])
				}
				got, err := s.GetByKey(ctx, "t", key)
				if err != nil || !ids[key][got.ID] {
					t.Fatalf("key %s names %v (%v); want %v", key, got, err, ids[key])
				}
			}
		})
	}
}
