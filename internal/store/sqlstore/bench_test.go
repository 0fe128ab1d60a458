package sqlstore

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
	"github.com/ontimehq/ontime/internal/testdb"
)

// Store benchmarks, per engine, 1 database × 16 tables × 4 segments:
//
//	go test ./internal/store/sqlstore -run '^$' -bench . -benchtime=20x
//
// tasks/s is the figure to read; each op is one batch of 500 (1,000 in
// BenchmarkInsertBatch).
const benchBatch = 500

func benchStore(b *testing.B, engine string) *Store {
	s, err := Open(context.Background(), Config{Driver: engine, DSNs: testdb.DSNs(b, engine, 1), Tables: 16, Segments: 4})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

func batch(b *testing.B, n int, due time.Time, keyed bool) []store.NewTask {
	out := make([]store.NewTask, n)
	for i := range out {
		key := ""
		if keyed {
			key = fmt.Sprintf("k-%d-%d", time.Now().UnixNano(), i)
		}
		out[i] = newTask(b, key, due, 4)
	}
	return out
}

// insertBatch is the batch of BenchmarkInsertBatch: the size the
// comparisons with River (InsertMany with COPY) and asynq use.
const insertBatch = 1000

// BenchmarkInsertBatch: one Insert of 1,000 keyed tasks per op, spread over
// the 16 tables, with each engine's insert plan (insert_dialect.go) and,
// for the ratio, the plan before it ("legacy": VALUES lists of 500 rows):
//
//	go test ./internal/store/sqlstore -run '^$' -bench InsertBatch -benchtime=3s
func BenchmarkInsertBatch(b *testing.B) {
	for _, engine := range testdb.Engines {
		for _, v := range insertVariants(engine) {
			b.Run(engine+"/"+v.name, func(b *testing.B) { benchInsert(b, engine, 0, v.plan, true) })
		}
		// With a key hold every keyed batch first reads its keys' rows
		// (keys.go): the cost of key reuse, against the line above.
		b.Run(engine+"/key_hold", func(b *testing.B) { benchInsert(b, engine, 10*time.Minute, nil, true) })
		// Tasks without keys, what bench/ and the e2e benchmarks submit:
		// on PostgreSQL they go by COPY (insert_postgres.go); "statements"
		// is the plan without it.
		b.Run(engine+"/nokey", func(b *testing.B) { benchInsert(b, engine, 0, nil, false) })
		if engine == "postgres" {
			stmts := planFor(dialects[engine])
			stmts.copy = false
			b.Run(engine+"/nokey_statements", func(b *testing.B) { benchInsert(b, engine, 0, &stmts, false) })
		}
	}
}

type insertVariant struct {
	name string
	plan *insertPlan // nil: the engine's own
}

func insertVariants(engine string) []insertVariant {
	own := planFor(dialects[engine])
	out := []insertVariant{{"legacy", &legacyPlan}, {"plan", nil}}
	if engine == "sqlite" {
		// The plan's VALUES lists built and parsed per call, against the
		// prepared statements (insert_sqlite.go) that "plan" uses.
		out = append(out, insertVariant{"text", &own})
	}
	if os.Getenv("ONTIME_BENCH_INSERT_VARIANTS") == "" {
		return out
	}
	// The alternatives measured before choosing each plan.
	switch engine {
	case "postgres":
		cached := own
		cached.mode = pgx.QueryExecModeCacheStatement
		values := own
		values.arrays, values.rows = false, 1000
		out = append(out, insertVariant{"arrays_cached", &cached}, insertVariant{"values1000", &values})
	default:
		for _, n := range []int{250, 1000, 2000} {
			p := own
			p.rows = n
			out = append(out, insertVariant{fmt.Sprintf("values%d", n), &p})
		}
	}
	return out
}

func benchInsert(b *testing.B, engine string, hold time.Duration, plan *insertPlan, keyed bool) {
	s := benchStore(b, engine)
	if os.Getenv("ONTIME_BENCH_ONE_TABLE") != "" {
		var err error
		s, err = Open(context.Background(), Config{Driver: engine, DSNs: testdb.DSNs(b, engine, 1), Tables: 1, Segments: 4})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
	}
	s.cfg.KeyHold = hold
	if plan != nil {
		s.ins = *plan
		s.lite = nil // SQLite: the text statements of the plan
	}
	ctx := context.Background()
	due := time.Now().Add(time.Hour)
	for b.Loop() {
		b.StopTimer()
		tasks := batch(b, insertBatch, due, keyed)
		b.StartTimer()
		if _, err := s.Insert(ctx, tasks); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(insertBatch*b.N)/b.Elapsed().Seconds(), "tasks/s")
}

// BenchmarkClaimStartFinish: claim a batch from each item, start it and
// finish it: the store's share of delivering tasks.
func BenchmarkClaimStartFinish(b *testing.B) {
	for _, engine := range testdb.Engines {
		b.Run(engine, func(b *testing.B) {
			s := benchStore(b, engine)
			ctx := context.Background()
			items := s.Items()
			now := time.Now()
			// One op claims, starts and finishes up to 500 tasks of one item.
			var claimed int
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				it := items[i%len(items)]
				var tasks []store.NewTask
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
				b.StartTimer()
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
				claimed += len(refs)
			}
			b.ReportMetric(float64(claimed)/b.Elapsed().Seconds(), "tasks/s")
		})
	}
}

// BenchmarkIdleScanWithFarFutureRows: the cost of one scanner round (a
// claim that finds nothing plus NextDue) on an item of a table that holds
// many far-future rows. Rows: ONTIME_BENCH_ROWS (default 200,000; the issue's
// figure is 10,000,000 — set it to measure that).
func BenchmarkIdleScanWithFarFutureRows(b *testing.B) {
	rows := 200_000
	if v, err := strconv.Atoi(os.Getenv("ONTIME_BENCH_ROWS")); err == nil && v > 0 {
		rows = v
	}
	for _, engine := range testdb.Engines {
		b.Run(engine, func(b *testing.B) {
			ctx := context.Background()
			s, err := Open(ctx, Config{Driver: engine, DSNs: testdb.DSNs(b, engine, 1), Tables: 1, Segments: 4})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			far := time.Now().Add(30 * 24 * time.Hour)
			for n := 0; n < rows; n += benchBatch {
				if _, err := s.Insert(ctx, batch(b, min(benchBatch, rows-n), far, false)); err != nil {
					b.Fatal(err)
				}
			}
			it := store.Item{}
			b.ResetTimer()
			for b.Loop() {
				now := time.Now()
				refs, err := s.Claim(ctx, it, now.Add(30*time.Second), now, store.Lease{Owner: "b", Until: now.Add(time.Minute), Token: 1}, 500)
				if err != nil || len(refs) != 0 {
					b.Fatal(err, len(refs))
				}
				if _, _, err := s.NextDue(ctx, it); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(rows), "rows")
			_ = task.StatusPending
		})
	}
}

// BenchmarkInsertSmall: one Insert of n keyless tasks per op, the sizes
// group commit hands the store under concurrent single submits (1: a lone
// submitter), on SQLite with the prepared statements ("plan") and with
// the text statements built per call ("text"):
//
//	go test ./internal/store/sqlstore -run '^$' -bench InsertSmall -benchtime=2000x
func BenchmarkInsertSmall(b *testing.B) {
	for _, engine := range testdb.Engines {
		for _, n := range []int{1, 16, 100} {
			for _, text := range []bool{false, true} {
				if text && engine != "sqlite" {
					continue
				}
				name := fmt.Sprintf("%s/n=%d/plan", engine, n)
				if text {
					name = fmt.Sprintf("%s/n=%d/text", engine, n)
				}
				b.Run(name, func(b *testing.B) {
					s := benchStore(b, engine)
					if text {
						s.lite = nil
					}
					ctx := context.Background()
					due := time.Now().Add(time.Hour)
					for b.Loop() {
						b.StopTimer()
						tasks := batch(b, n, due, false)
						b.StartTimer()
						if _, err := s.Insert(ctx, tasks); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "tasks/s")
				})
			}
		}
	}
}

// BenchmarkInsertSmallKeyed: one Insert of n keyed tasks per op, with the
// default key hold (10m): what group commit hands the store under
// concurrent keyed single submits (1: a lone submitter), each key in the
// table its hash routes it to (n=16 touches most of the 16 tables):
//
//	go test ./internal/store/sqlstore -run '^$' -bench InsertSmallKeyed -benchtime=500x
//
// On PostgreSQL "nosync" runs the same with synchronous_commit off for the
// benchmark's sessions: the statements' and round trips' cost without the
// WAL flush, which on a shared disk swings by more than the difference.
func BenchmarkInsertSmallKeyed(b *testing.B) {
	for _, engine := range testdb.Engines {
		for _, n := range []int{1, 16, 100} {
			for _, nosync := range []bool{false, true} {
				if nosync && engine != "postgres" {
					continue
				}
				name := fmt.Sprintf("%s/n=%d", engine, n)
				if nosync {
					name += "/nosync"
				}
				b.Run(name, func(b *testing.B) { benchInsertKeyed(b, engine, n, nosync, true) })
				if engine != "mysql" {
					// The statements of insertTx instead of the engine's
					// fast keyed insert (insert_keyed.go, insert_sqlite.go),
					// for the ratio.
					b.Run(name+"/statements", func(b *testing.B) { benchInsertKeyed(b, engine, n, nosync, false) })
				}
			}
		}
	}
}

func benchInsertKeyed(b *testing.B, engine string, n int, nosync, keyedStatement bool) {
	dsns := testdb.DSNs(b, engine, 1)
	if nosync {
		dsns[0] += "&synchronous_commit=off"
	}
	s, err := Open(context.Background(), Config{Driver: engine, DSNs: dsns, Tables: 16, Segments: 4, KeyHold: 10 * time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	if !keyedStatement {
		slowKeyed(s)
	}
	ctx := context.Background()
	due := time.Now().Add(time.Hour)
	for b.Loop() {
		b.StopTimer()
		tasks := batch(b, n, due, true)
		b.StartTimer()
		if _, err := s.Insert(ctx, tasks); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "tasks/s")
}
