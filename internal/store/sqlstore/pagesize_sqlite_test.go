package sqlstore

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/router"
	"github.com/ontimehq/ontime/internal/sqldb"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
	"github.com/ontimehq/ontime/internal/testdb"
)

// liteWithPageSize creates a SQLite database in WAL mode with the given
// page size, as an older ontime (or another tool) would have.
func liteWithPageSize(t testing.TB, size int) string {
	t.Helper()
	dsn := testdb.SQLite(t)
	db, err := sqldb.Open(sqldb.SQLite, dsn, sqldb.Options{SQLite: fmt.Sprintf("_pragma=page_size(%d)", size)})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`PRAGMA journal_mode = WAL`); err != nil {
		t.Fatal(err)
	}
	return dsn
}

func pageSize(t testing.TB, s *Store) int {
	t.Helper()
	var n int
	if err := s.r[0].QueryRow(`PRAGMA page_size`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A new SQLite store is created with litePageSize pages, in WAL mode; one
// created before keeps its own page size and works as it did.
func TestLitePageSize(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openT(t, "sqlite", testdb.DSNs(t, "sqlite", 1), 1, 2)
	if got := pageSize(t, s); got != litePageSize {
		t.Fatalf("a new store's page size: %d, want %d", got, litePageSize)
	}
	var mode string
	if err := s.r[0].QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("a new store's journal mode: %q %v, want wal", mode, err)
	}

	old := openT(t, "sqlite", []string{liteWithPageSize(t, 4096)}, 1, 2)
	if got := pageSize(t, old); got != 4096 {
		t.Fatalf("an existing store's page size: %d, want its 4096", got)
	}
	nt := newTask(t, "k", time.Now().Add(time.Hour), 2)
	if _, err := old.Insert(ctx, []store.NewTask{nt}); err != nil {
		t.Fatal(err)
	}
	if got, err := old.Get(ctx, nt.ID); err != nil || got.Key != "k" {
		t.Fatalf("a task in the existing store: %v %v", got, err)
	}
}

// BenchmarkLitePageSize: n tasks inserted (batches of 1,000), claimed and
// started, at SQLite's default page size and at litePageSize, with 1 KB
// and 33-byte payloads. 2026-12-07, two runs: with 1 KB, insert 0.44–0.45
// → 0.32–0.34 s, claim 0.97–0.98 → 0.40–0.41 s, start 1.20–1.24 →
// 0.66–0.70 s; with 33 bytes 0.23–0.24 → 0.23–0.26, 0.29–0.30 →
// 0.27–0.30, 0.47–0.48 → 0.46 s.
//
//	go test ./internal/store/sqlstore -run '^$' -bench LitePageSize -benchtime 1x
func BenchmarkLitePageSize(b *testing.B) {
	const n = 20000
	for _, size := range []int{4096, litePageSize} {
		for _, payload := range []string{`{"pad":"` + strings.Repeat("x", 1000) + `"}`, `{"order":"A-12345","amount":1999}`} {
			b.Run(fmt.Sprintf("page=%d/payload=%d", size, len(payload)), func(b *testing.B) {
				var insert, claim, start time.Duration
				for b.Loop() {
					b.StopTimer()
					s, err := Open(context.Background(), Config{Driver: "sqlite", DSNs: []string{liteWithPageSize(b, size)}, Tables: 1, Segments: 8})
					if err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					i, c, st := insertClaimStart(b, s, n, []byte(payload))
					insert, claim, start = insert+i, claim+c, start+st
					s.Close()
				}
				runs := float64(b.N)
				b.ReportMetric(insert.Seconds()/runs, "insert-s")
				b.ReportMetric(claim.Seconds()/runs, "claim-s")
				b.ReportMetric(start.Seconds()/runs, "start-s")
			})
		}
	}
}

func insertClaimStart(b *testing.B, s *Store, n int, payload []byte) (insert, claim, start time.Duration) {
	ctx := context.Background()
	now := time.Now()
	due := now.Add(30 * time.Second)
	insert = insertBurst(b, s, n, due, payload)
	t0 := time.Now()
	lease := store.Lease{Owner: "n1", Until: now.Add(time.Minute), Token: 7}
	var refs []store.Ref
	for seg := range 8 {
		for {
			got, err := s.Claim(ctx, store.Item{Table: 0, Segment: seg}, due.Add(time.Second), now, lease, 2000)
			if err != nil {
				b.Fatal(err)
			}
			refs = append(refs, got...)
			if len(got) < 2000 {
				break
			}
		}
	}
	claim = time.Since(t0)
	if len(refs) != n {
		b.Fatalf("claimed %d of %d", len(refs), n)
	}
	t0 = time.Now()
	for i := 0; i < len(refs); i += 2048 {
		if _, err := s.Start(ctx, refs[i:min(i+2048, len(refs))], now.Add(2*time.Minute)); err != nil {
			b.Fatal(err)
		}
	}
	return insert, claim, time.Since(t0)
}

// insertBurst inserts n tasks of topic t due at due, with payload, in
// batches of 1,000 over 8 segments, and returns the time the inserts took.
func insertBurst(b *testing.B, s *Store, n int, due time.Time, payload []byte) (took time.Duration) {
	ctx := context.Background()
	for done := 0; done < n; {
		var news []store.NewTask
		for ; done < n && len(news) < 1000; done++ {
			v, err := task.Validate(task.Spec{Topic: "t", DueAt: &due, Payload: payload}, task.Limits{}, due.Add(-time.Minute))
			if err != nil {
				b.Fatal(err)
			}
			id, p := router.NewID(time.Now(), 0, false)
			news = append(news, store.NewTask{ID: id, ShardHash: p.ShardHash, Seg: p.Segment(8), Validated: v})
		}
		t0 := time.Now()
		if _, err := s.Insert(ctx, news); err != nil {
			b.Fatal(err)
		}
		took += time.Since(t0)
	}
	return took
}
