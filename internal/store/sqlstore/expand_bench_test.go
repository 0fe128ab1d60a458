package sqlstore

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/testdb"
)

// BenchmarkExpand doubles a store of ONTIME_BENCH_EXPAND_ROWS rows (default
// 200,000) per engine, 1 → 2 databases × 16 tables, and reports the copy's
// rows moved per second (half the rows move) and the cleanup's rows
// deleted per second, beside the baseline of the same invocation: rows
// inserted per second by Insert in batches of 1,000 into the same store.
// The copy's rate leaves out its fixed costs: ExpandBegin (the new
// databases' migration, reported as begin-s) and the wait of copyKnown +
// 1 s for the nodes to hear of the expansion.
//
//	go test ./internal/store/sqlstore -run '^$' -bench Expand -benchtime=1x -count 3
func BenchmarkExpand(b *testing.B) {
	rows := 200_000
	if v, err := strconv.Atoi(os.Getenv("ONTIME_BENCH_EXPAND_ROWS")); err == nil && v > 0 {
		rows = v
	}
	for _, engine := range testdb.Engines {
		b.Run(engine, func(b *testing.B) {
			ctx := context.Background()
			var inserted, moved, deleted, insertSecs, beginSecs, copySecs, cleanSecs float64
			for range b.N {
				b.StopTimer()
				old, twin := testdb.DSNs(b, engine, 1), testdb.DSNs(b, engine, 1)
				s, err := Open(ctx, Config{Driver: engine, DSNs: old, Tables: 16, Segments: 4})
				if err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				for done := 0; done < rows; done += 1000 {
					if _, err := s.Insert(ctx, batch(b, min(1000, rows-done), time.Now().Add(time.Hour), false)); err != nil {
						b.Fatal(err)
					}
				}
				insertSecs += time.Since(start).Seconds()
				inserted += float64(rows)
				// Rows written an hour ago, as in a store that grew for a
				// while: the catch-up pass copies only what changed since
				// the copy began (nothing here).
				for _, t := range s.names {
					if _, err := s.w[0].ExecContext(ctx, `UPDATE `+t+` SET updated_at = updated_at - 3600000000`); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				start = time.Now()
				if err := s.ExpandBegin(ctx, twin); err != nil {
					b.Fatal(err)
				}
				beginSecs += time.Since(start).Seconds()
				// The copy's fixed wait for the nodes to hear of it
				// (copyKnown + 1 s) is a constant, not throughput: the
				// expansion is recorded as begun that long ago.
				if err := s.setMeta(ctx, s.w[0], metaExpandSince, strconv.FormatInt(time.Now().Add(-copyKnown-2*time.Second).UnixMicro(), 10)); err != nil {
					b.Fatal(err)
				}
				start = time.Now()
				if err := s.ExpandCopy(ctx, ExpandOptions{}); err != nil {
					b.Fatal(err)
				}
				copySecs += time.Since(start).Seconds()
				st, err := s.ExpansionStatus(ctx)
				if err != nil {
					b.Fatal(err)
				}
				moved += float64(st.RowsCopy)
				deleted += float64(st.RowsCopy) // every copy left behind
				if err := s.ExpandCutover(ctx, ExpandOptions{}); err != nil {
					b.Fatal(err)
				}
				s.Close()
				s, err = Open(ctx, Config{Driver: engine, DSNs: append(old, twin...), Tables: 16, Segments: 4})
				if err != nil {
					b.Fatal(err)
				}
				start = time.Now()
				if err := s.ExpandCleanup(ctx, ExpandOptions{}); err != nil {
					b.Fatal(err)
				}
				cleanSecs += time.Since(start).Seconds()
				s.Close()
			}
			b.ReportMetric(inserted/insertSecs, "inserted/s")
			b.ReportMetric(moved/copySecs, "moved/s")
			b.ReportMetric(deleted/cleanSecs, "deleted/s")
			b.ReportMetric(float64(rows), "rows")
			b.ReportMetric(beginSecs/float64(b.N), "begin-s")
		})
	}
}
