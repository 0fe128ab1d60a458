package sqlstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
	"github.com/ontimehq/ontime/internal/testdb"
)

// A lease sweep on SQLite writes its rows in statements of at most
// liteStatementRows (each statement's journal is in the writer's memory),
// and still moves every row it matches: a heartbeat's ExtendHeld over more
// claims than one statement takes, and the EndLeases of a node that is
// gone.
func TestLiteLeaseSweepsAreBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const tables, segs = 1, 2
	s := openT(t, "sqlite", testdb.DSNs(t, "sqlite", 1), tables, segs)
	now := time.Now()
	lease := store.Lease{Owner: "n1", Until: now.Add(3 * time.Second), Token: 7}
	pad := []byte(`{"pad":"` + strings.Repeat("x", 1000) + `"}`)
	const n = 2*liteStatementRows + 1500 // more than two statements
	for done := 0; done < n; {
		var news []store.NewTask
		for ; done < n && len(news) < 1000; done++ {
			nt := newTask(t, "", now.Add(time.Minute), segs)
			nt.Payload = pad
			l := lease
			nt.Claim = &l
			news = append(news, nt)
		}
		if _, err := s.Insert(ctx, news); err != nil {
			t.Fatal(err)
		}
	}
	leasesAt := func(at time.Time) int {
		t.Helper()
		total := 0
		for _, name := range s.names {
			var k int
			if err := s.r[0].QueryRowContext(ctx, `SELECT COUNT(*) FROM `+name+` WHERE lease_until = ?`, micros(at)).Scan(&k); err != nil {
				t.Fatal(err)
			}
			total += k
		}
		return total
	}
	// liteBounded itself: statements of at most liteStatementRows rows,
	// the last one short, every row moved once.
	until := now.Add(time.Hour)
	var calls []int64
	counting := func(ctx context.Context, q string, args ...any) (int64, error) {
		k, err := s.execRetried(ctx, 0, q, args...)
		calls = append(calls, k)
		return k, err
	}
	w := extendWhere(segs, 1)
	moved, err := liteBounded(ctx, counting, s.names[0], leaseCols, []any{micros(until), now.UnixMicro()},
		w, []any{int(task.StatusClaimed), micros(until), int64(7)})
	if err != nil {
		t.Fatal(err)
	}
	if moved != int64(n) {
		t.Fatalf("liteBounded moved %d leases, want %d", moved, n)
	}
	for i, k := range calls {
		if k > liteStatementRows || i < len(calls)-1 && k != liteStatementRows {
			t.Fatalf("statement %d of %v wrote %d rows: want %d in each but the last, at most %d in the last", i, calls, k, liteStatementRows, liteStatementRows)
		}
	}
	if len(calls) != n/liteStatementRows+1 {
		t.Fatalf("%d statements for %d rows of %d each: %v", len(calls), n, liteStatementRows, calls)
	}

	// A heartbeat: every claim moves to its end.
	until = until.Add(time.Hour)
	got, err := s.ExtendHeld(ctx, task.StatusClaimed, []int64{7}, nil, until, until)
	if err != nil {
		t.Fatal(err)
	}
	if got != n || leasesAt(until) != n {
		t.Fatalf("ExtendHeld moved %d leases (want %d), %d of %d end at its time", got, n, leasesAt(until), n)
	}

	// The node is gone: every lease it held ends, every segment.
	ended := 0
	for table := range tables {
		for seg := range segs {
			k, err := s.EndLeases(ctx, store.Item{Table: table, Segment: seg}, until, store.Holders{Only: []string{"n1"}})
			if err != nil {
				t.Fatal(err)
			}
			ended += k
		}
	}
	if ended != n || leasesAt(until) != 0 {
		t.Fatalf("EndLeases ended %d of %d leases, %d still end at %v", ended, n, leasesAt(until), until)
	}
}
