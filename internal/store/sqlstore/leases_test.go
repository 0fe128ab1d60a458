package sqlstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
	"github.com/ontimehq/ontime/internal/testdb"
)

// On PostgreSQL and MariaDB a heartbeat never waits for a row another
// transaction holds: it skips it and extends the rest. Waiting made it one
// side of a deadlock with a Start or a Finish locking the same rows in
// another order, which PostgreSQL breaks only after deadlock_timeout (a
// second): every task of that Start went out a second late; InnoDB breaks
// it at once, but the Start is retried whole. The locked row is left as it
// was, and the next heartbeat, once the lock is gone, extends it.
func TestExtendHeldSkipsLockedRows(t *testing.T) {
	t.Parallel()
	for _, driver := range []string{"postgres", "mysql"} {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			testExtendHeldSkipsLockedRows(t, driver)
		})
	}
}

func testExtendHeldSkipsLockedRows(t *testing.T, driver string) {
	ctx := context.Background()
	const tables, segs = 2, 2
	s := openT(t, driver, testdb.DSNs(t, driver, 1), tables, segs)
	now := time.Now()
	const token = 7
	soonEnd := now.Add(2 * time.Second)
	news, _ := claimedIn(t, s, tables, segs, "held", now, store.Lease{Owner: "n1", Until: soonEnd, Token: token})
	// More tokens than one statement takes: two chunks.
	tokens := []int64{token}
	for i := range heldChunk + 100 {
		tokens = append(tokens, int64(1000+i))
	}

	locked := news[len(news)-1].ID // in the last table
	tx, err := s.w[0].BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SELECT id FROM `+s.names[tables-1]+s.d.rebind(` WHERE id = ? FOR UPDATE`), locked); err != nil {
		t.Fatal(err)
	}
	until := now.Add(time.Minute)
	// A heartbeat that waited for the lock would run into this deadline:
	// the lock is held until it returns.
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	n, err := s.ExtendHeld(wctx, task.StatusClaimed, tokens, nil, now.Add(10*time.Second), until)
	cancel()
	if err != nil {
		t.Fatalf("ExtendHeld with a row locked: %v", err)
	}
	if n != len(news)-1 {
		t.Fatalf("ExtendHeld moved %d leases with one row locked, want %d", n, len(news)-1)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	for _, nt := range news {
		got, err := s.Get(ctx, nt.ID)
		if err != nil {
			t.Fatal(err)
		}
		want := until
		if nt.ID == locked {
			want = soonEnd
		}
		if got.LeaseUntil.UnixMicro() != want.UnixMicro() {
			t.Fatalf("task %s: lease %v, want %v (locked: %v)", nt.ID, got.LeaseUntil, want, nt.ID == locked)
		}
	}
	n, err = s.ExtendHeld(ctx, task.StatusClaimed, tokens, nil, now.Add(10*time.Second), until)
	if err != nil || n != 1 {
		t.Fatalf("ExtendHeld after the lock: %d %v, want the one row left", n, err)
	}
}

// claimedIn inserts three tasks due now in each of the tables of s (one
// database, segs segments each), claims them all under lease and returns
// the tasks and the claims' refs.
func claimedIn(t *testing.T, s *Store, tables, segs int, prefix string, now time.Time, lease store.Lease) ([]store.NewTask, []store.Ref) {
	t.Helper()
	ctx := context.Background()
	var news []store.NewTask
	for table := range tables {
		for i := range 3 {
			news = append(news, keyedIn(t, tables, table, fmt.Sprintf("%s-%d-%d", prefix, table, i), now.Add(-time.Second)))
		}
	}
	if _, err := s.Insert(ctx, news); err != nil {
		t.Fatal(err)
	}
	var refs []store.Ref
	for table := range tables {
		for seg := range segs {
			got, err := s.Claim(ctx, store.Item{Table: table, Segment: seg}, now, now, lease, 10)
			if err != nil {
				t.Fatal(err)
			}
			refs = append(refs, got...)
		}
	}
	if len(refs) != len(news) {
		t.Fatalf("claimed %d of %d", len(refs), len(news))
	}
	return news, refs
}
