package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/store"
)

// BenchmarkCountsWriteCost: what the count triggers (schema 20) cost the
// write path, measured in one process with the triggers dropped and made
// again between rounds, so that a shared machine's load falls on both
// sides alike. Per engine: a batch insert of 1,000 keyless tasks (COPY on
// PostgreSQL), of 1,000 keyed ones, and claim → start → finish of 500
// tasks of one item. It reports each side's median wall time per op and
// the CPU it cost: the test process's (SQLite runs in it) and, on
// PostgreSQL, the server backend's (the store's pool held to one
// connection, so that one backend does all the work): CPU time, unlike
// wall time, stays put on a loaded machine.
//
//	go test ./internal/store/sqlstore -run '^$' -bench CountsWriteCost -benchtime 1x -v
//
// ONTIME_BENCH_ROUNDS sets the rounds (default 15); MariaDB has no
// triggers and is not measured.
func BenchmarkCountsWriteCost(b *testing.B) {
	writeCost(b, "triggers", func(b *testing.B, s *Store, on bool) {
		ctx := context.Background()
		if on {
			// Steps 20 and 25 again make the triggers (and recount).
			migrateAgain(b, s, s.migrateCounts, s.migrateDueCounts)
			return
		}
		for _, t := range s.names {
			for _, k := range []string{"count_ins", "count_del", "count_upd", "due_ins", "due_del", "due_upd"} {
				q := `DROP TRIGGER IF EXISTS ` + t + `_` + k
				if s.d.name == "postgres" {
					q += ` ON ` + t
				}
				if _, err := s.w[0].ExecContext(ctx, q); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// BenchmarkDueCountsWriteCost: what maintaining the due counters (schema
// 25) adds to the count triggers of schema 20, measured like
// BenchmarkCountsWriteCost: rounds with the counts' triggers alone (step
// 20's functions on PostgreSQL, the due triggers dropped on SQLite)
// alternated with rounds with both.
//
//	go test ./internal/store/sqlstore -run '^$' -bench DueCountsWriteCost -benchtime 1x -v
func BenchmarkDueCountsWriteCost(b *testing.B) {
	writeCost(b, "due counters", func(b *testing.B, s *Store, on bool) {
		if on {
			migrateAgain(b, s, s.migrateDueCounts)
			return
		}
		migrateAgain(b, s, s.migrateCounts)
		for _, t := range s.names {
			for _, k := range []string{"due_ins", "due_del", "due_upd"} {
				if s.d.name == "sqlite" {
					if _, err := s.w[0].ExecContext(context.Background(), `DROP TRIGGER IF EXISTS `+t+`_`+k); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
	})
}

// migrateAgain runs schema steps again on the store's first database.
func migrateAgain(b *testing.B, s *Store, steps ...func(context.Context, *sql.Conn) error) {
	ctx := context.Background()
	c, err := s.w[0].Conn(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	for _, step := range steps {
		if err := step(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
}

// writeCost measures the write path with what toggle turns on and off,
// alternated round by round (BenchmarkCountsWriteCost says how).
func writeCost(b *testing.B, what string, toggle func(b *testing.B, s *Store, on bool)) {
	rounds := 15
	if v, err := strconv.Atoi(os.Getenv("ONTIME_BENCH_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	for _, engine := range []string{"sqlite", "postgres"} {
		b.Run(engine, func(b *testing.B) {
			s := benchStore(b, engine)
			ctx := context.Background()
			cpu := func() time.Duration { return procSelfCPU(b) }
			if engine == "postgres" {
				s.w[0].SetMaxOpenConns(1)
				var pid int
				if err := s.w[0].QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
					b.Fatal(err)
				}
				cpu = func() time.Duration { return threadCPU(b, pid) }
			}
			triggers := func(on bool) { toggle(b, s, on) }
			items := s.Items()
			due := time.Now().Add(time.Hour)
			ops := []struct {
				name string
				run  func(i int) (wall, cpu time.Duration)
			}{
				{"insert keyless", func(int) (time.Duration, time.Duration) {
					tasks := batch(b, insertBatch, due, false)
					t0, c0 := time.Now(), cpu()
					if _, err := s.Insert(ctx, tasks); err != nil {
						b.Fatal(err)
					}
					return time.Since(t0), cpu() - c0
				}},
				// The due counters' worst case: every task of the batch in
				// an (hour, topic) of its own, a week and 200 topics.
				{"insert spread", func(int) (time.Duration, time.Duration) {
					tasks := batch(b, insertBatch, due, false)
					for j := range tasks {
						tasks[j].Topic = fmt.Sprintf("t%03d", j%200)
						tasks[j].DueAt = due.Add(time.Duration(j) * 10 * time.Minute)
					}
					t0, c0 := time.Now(), cpu()
					if _, err := s.Insert(ctx, tasks); err != nil {
						b.Fatal(err)
					}
					return time.Since(t0), cpu() - c0
				}},
				{"insert keyed", func(int) (time.Duration, time.Duration) {
					tasks := batch(b, insertBatch, due, true)
					t0, c0 := time.Now(), cpu()
					if _, err := s.Insert(ctx, tasks); err != nil {
						b.Fatal(err)
					}
					return time.Since(t0), cpu() - c0
				}},
				{"claim start finish", func(i int) (time.Duration, time.Duration) {
					it := items[i%len(items)]
					var tasks []store.NewTask
					now := time.Now()
					for len(tasks) < benchBatch {
						nt := newTask(b, "", now.Add(-time.Second), 4)
						db, table := s.topo.Locate(nt.ShardHash)
						if db == it.DB && table == it.Table && nt.Seg == it.Segment {
							tasks = append(tasks, nt)
						}
					}
					if _, err := s.Insert(ctx, tasks); err != nil {
						b.Fatal(err)
					}
					t0, c0 := time.Now(), cpu()
					refs, err := s.Claim(ctx, it, time.Now(), time.Now(), store.Lease{Owner: "bench", Until: time.Now().Add(time.Minute), Token: int64(i + 1)}, benchBatch)
					if err != nil {
						b.Fatal(err)
					}
					started, err := s.Start(ctx, refs, time.Now().Add(time.Minute))
					if err != nil {
						b.Fatal(err)
					}
					outs := make([]store.Outcome, len(started))
					for j, t := range started {
						outs[j] = store.Outcome{Ref: store.Ref{ID: t.ID, Token: t.Token}, Done: true}
					}
					if err := s.Finish(ctx, outs); err != nil {
						b.Fatal(err)
					}
					wall, used := time.Since(t0), cpu()-c0
					if len(refs) != benchBatch {
						b.Fatalf("claimed %d of %d", len(refs), benchBatch)
					}
					return wall, used
				}},
			}
			took := map[string]map[bool][]time.Duration{}
			used := map[string]map[bool]time.Duration{}
			for _, op := range ops {
				took[op.name] = map[bool][]time.Duration{}
				used[op.name] = map[bool]time.Duration{}
			}
			i := 0
			for b.Loop() {
				for r := range rounds {
					// Alternate which side goes first.
					for _, on := range []bool{r%2 == 0, r%2 != 0} {
						triggers(on)
						for _, op := range ops {
							op.run(i) // a warm-up after the schema change: statements prepared again
							i++
							wall, c := op.run(i)
							took[op.name][on] = append(took[op.name][on], wall)
							used[op.name][on] += c
							i++
						}
					}
				}
			}
			triggers(true)
			for _, op := range ops {
				off, on := median(took[op.name][false]), median(took[op.name][true])
				n := time.Duration(len(took[op.name][false]))
				coff, con := used[op.name][false]/n, used[op.name][true]/n
				b.Logf("%-20s wall p50 without %s %8.2f ms, with %8.2f ms (%.3f); CPU per op without %8.2f ms, with %8.2f ms (%.3f)",
					op.name, what, ms(off), ms(on), on.Seconds()/off.Seconds(), ms(coff), ms(con), con.Seconds()/coff.Seconds())
				b.ReportMetric(con.Seconds()/coff.Seconds(), "cpu-ratio/"+strings.ReplaceAll(op.name, " ", "_"))
			}
		})
	}
}

func median(ds []time.Duration) time.Duration {
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return ds[len(ds)/2]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// procSelfCPU is the test process's CPU time, user and system.
func procSelfCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// threadCPU is the CPU time of process pid (a PostgreSQL backend, one
// thread) from /proc/PID/schedstat, in nanoseconds.
func threadCPU(b *testing.B, pid int) time.Duration {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/schedstat")
	if err != nil {
		b.Fatal(err)
	}
	ns, err := strconv.ParseInt(strings.Fields(string(raw))[0], 10, 64)
	if err != nil {
		b.Fatal(err)
	}
	return time.Duration(ns)
}
