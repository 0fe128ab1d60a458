package topics_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/stagetest"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/store/sqlstore"
	"github.com/ontimehq/ontime/internal/testdb"
	"github.com/ontimehq/ontime/internal/topics"
)

// BenchmarkTopicsList compares what GET /v1/topics costs per request on
// SQLite with ONTIME_BENCH_ROWS task rows (default 100,000) in 20 topics:
// a count per request (before the cache) and an answer from the cache.
//
//	ONTIME_BENCH_ROWS=1000000 go test -run - -bench TopicsList -benchtime 5x ./internal/topics/
func BenchmarkTopicsList(b *testing.B) {
	rows := 100_000
	if v := os.Getenv("ONTIME_BENCH_ROWS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 200 {
			b.Fatalf("ONTIME_BENCH_ROWS=%q: want a number ≥ 200", v)
		}
		rows = n
	}
	dsn := testdb.SQLite(b)
	st, err := sqlstore.Open(context.Background(), sqlstore.Config{Driver: "sqlite", DSNs: []string{dsn},
		Tables: stagetest.Tables, Segments: stagetest.Segments})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	total := seed(b, st, dsn, rows)
	ctx := context.Background()
	b.Run("count-per-request", func(b *testing.B) {
		for b.Loop() {
			if _, err := st.TopicStats(ctx, ""); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cache", func(b *testing.B) {
		c, err := topics.NewCounts(topics.CountsConfig{Store: st, Every: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		l, err := c.List(ctx) // the first count, outside the loop
		if err != nil {
			b.Fatal(err)
		}
		var n int64
		for _, ts := range l.Topics {
			for _, v := range ts.Counts {
				n += v
			}
		}
		if n != total {
			b.Fatalf("the cache counted %d rows, want %d", n, total)
		}
		for b.Loop() {
			if _, err := c.List(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// seed inserts 200 tasks through the store (20 topics), then doubles
// every task table's rows in SQL (new IDs) until there are at least rows;
// it returns how many there are.
func seed(b *testing.B, st store.Store, dsn string, rows int) int64 {
	b.Helper()
	var nts []store.NewTask
	for i := range 200 {
		nts = append(nts, stagetest.NewTask(b, fmt.Sprintf("bench.t%02d", i%20), "", time.Now().Add(time.Duration(i)*time.Minute)))
	}
	if _, err := st.Insert(context.Background(), nts); err != nil {
		b.Fatal(err)
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	tables := queryStrings(b, db, `SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE '%shard_hash%'`)
	total := int64(200)
	for round := 0; total < int64(rows); round++ {
		for _, t := range tables {
			cols := queryStrings(b, db, `SELECT name FROM pragma_table_info('`+t+`')`)
			sel := make([]string, len(cols))
			for i, c := range cols {
				sel[i] = c
				if c == "id" {
					sel[i] = fmt.Sprintf("id || '.%d'", round)
				}
			}
			q := `INSERT INTO ` + t + ` (` + strings.Join(cols, ", ") + `) SELECT ` + strings.Join(sel, ", ") + ` FROM ` + t
			if _, err := db.ExecContext(ctx, q); err != nil {
				b.Fatal(err)
			}
		}
		total *= 2
	}
	return total
}

func queryStrings(b *testing.B, db *sql.DB, q string) []string {
	b.Helper()
	rows, err := db.Query(q)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			b.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	return out
}
