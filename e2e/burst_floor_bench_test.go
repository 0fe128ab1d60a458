package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/sqldb"
	"github.com/ontimehq/ontime/internal/testdb"
)

// BenchmarkBurstFloor is the floor of issue 24's goal 5 (a burst's drain
// rate at 2,000,000 tasks ≥ 0.8× its rate at 50,000): the least a store
// does to drain a burst, on the same server, measured the same way at
// both sizes, so that the ratio ontime reaches can be read against the
// ratio the server allows. N rows with 1 KB payloads, all due, in 16
// tables of the fewest columns and indexes a due-ordered claim needs
// (id primary key; (status, due_at)); 8 workers, each taking a table in
// turn: claim up to 1,000 due rows in due order (PostgreSQL: one UPDATE …
// WHERE id IN (SELECT … FOR UPDATE SKIP LOCKED) RETURNING the payloads;
// MariaDB: SELECT … FOR UPDATE SKIP LOCKED and the UPDATE in one
// transaction), then mark them done (one UPDATE). Each task is written
// three times, as ontime writes it (insert, claim-and-start, outcome),
// and nothing is delivered: no HTTP, no task pipeline, no counts.
//
//	ONTIME_BURST_FLOOR_ENGINE=postgres ONTIME_BURST_FLOOR_TASKS=2000000 \
//	  go test ./e2e -run '^$' -bench BenchmarkBurstFloor -benchtime 1x -timeout 60m
//
// Reports the drain (drained/s: N over the time from the first claim to
// the last row done) and the fill (filled/s), and fails if a row is not
// done exactly once.
func BenchmarkBurstFloor(b *testing.B) {
	engine := os.Getenv("ONTIME_BURST_FLOOR_ENGINE")
	if engine == "" {
		engine = "postgres"
	}
	if engine != "postgres" && engine != "mysql" {
		b.Fatalf("ONTIME_BURST_FLOOR_ENGINE=%q: postgres or mysql", engine)
	}
	n := 50000
	if v := os.Getenv("ONTIME_BURST_FLOOR_TASKS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1000 {
			b.Fatalf("ONTIME_BURST_FLOOR_TASKS=%q: a number ≥ 1000", v)
		}
	}
	for range b.N {
		f := newBurstFloor(b, engine)
		fill := f.fill(b, n)
		drain := f.drain(b, n)
		b.ReportMetric(float64(n)/fill.Seconds(), "filled/s")
		b.ReportMetric(float64(n)/drain.Seconds(), "drained/s")
		b.Logf("burst floor, %s: %d tasks × 1 KB filled in %s, drained in %s (%.0f/s)", engine, n, fill.Round(time.Millisecond), drain.Round(time.Millisecond), float64(n)/drain.Seconds())
	}
}

const (
	burstFloorTables  = 16
	burstFloorWorkers = 8
	burstFloorBatch   = 1000
)

type burstFloor struct {
	engine string
	db     *sql.DB
	pg     bool
}

func newBurstFloor(b *testing.B, engine string) *burstFloor {
	b.Helper()
	db, err := sqldb.Open(engine, testdb.DSNs(b, engine, 1)[0], sqldb.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(burstFloorWorkers + 2)
	db.SetMaxIdleConns(burstFloorWorkers + 2)
	f := &burstFloor{engine: engine, db: db, pg: engine == "postgres"}
	blob := "BYTEA"
	if !f.pg {
		blob = "BLOB"
	}
	for t := range burstFloorTables {
		if _, err := db.Exec(fmt.Sprintf(`CREATE TABLE floor_%d (id BIGINT NOT NULL PRIMARY KEY, due_at BIGINT NOT NULL, status SMALLINT NOT NULL, payload %s NOT NULL)`, t, blob)); err != nil {
			b.Fatal(err)
		}
		if _, err := db.Exec(fmt.Sprintf(`CREATE INDEX floor_%d_due ON floor_%d (status, due_at)`, t, t)); err != nil {
			b.Fatal(err)
		}
	}
	return f
}

func (f *burstFloor) ph(i int) string {
	if f.pg {
		return "$" + strconv.Itoa(i)
	}
	return "?"
}

// fill inserts n rows, all due a second ago, 1,000 per statement, from 2
// writers (as the burst test submits from 2 clients).
func (f *burstFloor) fill(b *testing.B, n int) time.Duration {
	b.Helper()
	payload := []byte(`{"pad":"` + strings.Repeat("x", 1000) + `"}`)
	due := time.Now().Add(-time.Second).UnixMicro()
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for range 2 {
		wg.Go(func() {
			for {
				from := int(next.Add(burstFloorBatch)) - burstFloorBatch
				if from >= n {
					return
				}
				rows := min(burstFloorBatch, n-from)
				var q strings.Builder
				fmt.Fprintf(&q, "INSERT INTO floor_%d (id, due_at, status, payload) VALUES ", (from/burstFloorBatch)%burstFloorTables)
				args := make([]any, 0, 3*rows)
				for i := range rows {
					if i > 0 {
						q.WriteString(", ")
					}
					fmt.Fprintf(&q, "(%s, %s, 0, %s)", f.ph(3*i+1), f.ph(3*i+2), f.ph(3*i+3))
					args = append(args, int64(from+i), due+int64(i), payload)
				}
				if _, err := f.db.Exec(q.String(), args...); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return time.Since(start)
}

// drain claims and finishes every row; it fails unless each was claimed
// once and is done.
func (f *burstFloor) drain(b *testing.B, n int) time.Duration {
	b.Helper()
	ctx := context.Background()
	now := time.Now().UnixMicro()
	var claimed atomic.Int64
	var turn atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, burstFloorWorkers)
	start := time.Now()
	for range burstFloorWorkers {
		wg.Go(func() {
			empty := 0
			for empty < burstFloorTables {
				table := int(turn.Add(1)) % burstFloorTables
				ids, err := f.claim(ctx, table, now)
				if err != nil {
					errs <- err
					return
				}
				if len(ids) == 0 {
					empty++
					continue
				}
				empty = 0
				claimed.Add(int64(len(ids)))
				if err := f.finish(ctx, table, ids); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	done := 0
	for t := range burstFloorTables {
		var c int
		if err := f.db.QueryRow(fmt.Sprintf(`SELECT COUNT(*) FROM floor_%d WHERE status = 2`, t)).Scan(&c); err != nil {
			b.Fatal(err)
		}
		done += c
	}
	if claimed.Load() != int64(n) || done != n {
		b.Fatalf("%d rows claimed and %d done, want %d each", claimed.Load(), done, n)
	}
	return took
}

// claim marks up to burstFloorBatch due rows of table claimed and returns
// their IDs, reading their payloads as a delivery would.
func (f *burstFloor) claim(ctx context.Context, table int, now int64) ([]int64, error) {
	if f.pg {
		rows, err := f.db.QueryContext(ctx, fmt.Sprintf(`UPDATE floor_%[1]d SET status = 1 WHERE id IN (
			SELECT id FROM floor_%[1]d WHERE status = 0 AND due_at <= $1 ORDER BY due_at LIMIT %[2]d FOR UPDATE SKIP LOCKED) RETURNING id, payload`, table, burstFloorBatch), now)
		if err != nil {
			return nil, err
		}
		return scanFloorIDs(rows)
	}
	tx, err := f.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback() }()
	rows, err := tx.QueryContext(ctx, fmt.Sprintf(`SELECT id, payload FROM floor_%d WHERE status = 0 AND due_at <= ? ORDER BY due_at LIMIT %d FOR UPDATE SKIP LOCKED`, table, burstFloorBatch), now)
	if err != nil {
		return nil, err
	}
	ids, err := scanFloorIDs(rows)
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(`UPDATE floor_%d SET status = 1 WHERE id IN (%s)`, table, floorIDList(ids))); err != nil {
		return nil, err
	}
	return ids, tx.Commit()
}

// finish marks ids of table done.
func (f *burstFloor) finish(ctx context.Context, table int, ids []int64) error {
	_, err := f.db.ExecContext(ctx, fmt.Sprintf(`UPDATE floor_%d SET status = 2 WHERE id IN (%s)`, table, floorIDList(ids)))
	return err
}

func scanFloorIDs(rows *sql.Rows) ([]int64, error) {
	defer rows.Close()
	var ids []int64
	var payload []byte
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id, &payload); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

func floorIDList(ids []int64) string {
	var b strings.Builder
	for i, id := range ids {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.FormatInt(id, 10))
	}
	return b.String()
}
