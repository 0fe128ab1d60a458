package sqlstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/router"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/testdb"
)

// keyedIn returns a task whose key lands in table of a one-database
// topology of tables tables.
func keyedIn(t *testing.T, tables, table int, name string, due time.Time) store.NewTask {
	t.Helper()
	topo := router.Topology{Databases: 1, Tables: tables}
	for i := range 10000 {
		k := fmt.Sprintf("%s-%d", name, i)
		if _, tb := topo.Locate(router.HashKey(k)); tb == table {
			return newTask(t, k, due, 2)
		}
	}
	t.Fatalf("no key lands in table %d", table)
	return store.NewTask{}
}

// An Insert spanning two tables of one database is one transaction: when
// the second table fails, the rows of the first are not written either.
// Tasks of one call with the same key: the first is created, the others
// find it, as if inserted one after the other.
func TestInsertOneTransactionPerDatabase(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := openT(t, engine, testdb.DSNs(t, engine, 1), 2, 2)
			due := time.Now().Add(time.Hour)

			a, b := newTask(t, "dup", due, 2), newTask(t, "dup", due, 2)
			res, err := s.Insert(ctx, []store.NewTask{a, newTask(t, "", due, 2), b, newTask(t, "dup", due, 2)})
			if err != nil {
				t.Fatal(err)
			}
			if res[0].Existing || res[0].Task.ID != a.ID || !res[2].Existing || res[2].Task.ID != a.ID || !res[3].Existing || res[3].Task.ID != a.ID {
				t.Fatalf("duplicates in one call: %+v %+v %+v; want %s created once", res[0], res[2], res[3], a.ID)
			}

			if _, err := s.w[0].ExecContext(ctx, `DROP TABLE `+s.names[1]); err != nil {
				t.Fatal(err)
			}
			var tasks []store.NewTask
			for i := range 10 {
				tasks = append(tasks, keyedIn(t, 2, i%2, fmt.Sprintf("x%d", i), due))
			}
			if _, err := s.Insert(ctx, tasks); err == nil {
				t.Fatal("Insert into a dropped table answered no error")
			}
			var n int
			if err := s.w[0].QueryRowContext(ctx, `SELECT COUNT(*) FROM `+s.names[0]+` WHERE task_key LIKE 'x%'`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != 0 {
				t.Fatalf("a failed Insert left %d rows in the table that did not fail", n)
			}
		})
	}
}

// Concurrent Inserts of the same keys in different orders, each one
// transaction per database: every key ends with one task, which every
// call answers, created by exactly one of them (deadlocks between the
// transactions are retried; MariaDB's read-back sees the winner).
func TestInsertConcurrentSameKeys(t *testing.T) {
	for _, engine := range testdb.Engines {
		for _, hold := range []time.Duration{0, time.Minute} {
			t.Run(fmt.Sprintf("%s/hold=%s", engine, hold), func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				s, err := Open(ctx, Config{Driver: engine, DSNs: testdb.DSNs(t, engine, 1), Tables: 3, Segments: 2, KeyHold: hold})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				due := time.Now().Add(time.Hour)
				const callers, keys = 8, 40
				results := make([][]store.Inserted, callers)
				batches := make([][]store.NewTask, callers)
				for c := range callers {
					for k := range keys {
						batches[c] = append(batches[c], newTask(t, fmt.Sprintf("k-%d", k), due, 2))
					}
					rand.Shuffle(keys, func(i, j int) { batches[c][i], batches[c][j] = batches[c][j], batches[c][i] })
				}
				var wg sync.WaitGroup
				errs := make([]error, callers)
				for c := range callers {
					wg.Go(func() { results[c], errs[c] = s.Insert(ctx, batches[c]) })
				}
				wg.Wait()
				ids := map[string]string{}
				created := map[string]int{}
				for c := range callers {
					if errs[c] != nil {
						t.Fatalf("caller %d: %v", c, errs[c])
					}
					for i, r := range results[c] {
						k := batches[c][i].Key
						if id, ok := ids[k]; ok && id != r.Task.ID {
							t.Fatalf("key %s answered as %s and %s", k, id, r.Task.ID)
						}
						ids[k] = r.Task.ID
						if !r.Existing {
							created[k]++
						}
					}
				}
				for k := range keys {
					key := fmt.Sprintf("k-%d", k)
					if created[key] != 1 {
						t.Fatalf("key %s created %d times", key, created[key])
					}
					got, err := s.GetByKey(ctx, "t", key)
					if err != nil || got.ID != ids[key] {
						t.Fatalf("key %s names %v (%v); want %s", key, got, err, ids[key])
					}
				}
			})
		}
	}
}
