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

// A batch is one implicit transaction: when its last statement fails, the
// writes of the statements before it are rolled back, as the CTE statement
// it replaced was atomic. And its statements are not kept prepared: a
// generic plan PostgreSQL would keep for them was a scan of the table.
func TestPgBatchIsAtomicAndUnprepared(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const tables = 2
	s := openT(t, "postgres", testdb.DSNs(t, "postgres", 1), tables, 2)
	// One connection: every call below runs on the one whose prepared
	// statements are counted.
	s.w[0].SetMaxOpenConns(1)
	now := time.Now()
	_, refs := claimedIn(t, s, tables, 2, "b", now, store.Lease{Owner: "n1", Until: now.Add(time.Minute), Token: 3})

	// A Start's statements for both tables, then one that fails.
	set, setArgs, _ := startSet(now.Add(time.Minute))
	var stmts []pgStmt
	for _, g := range s.refGroups(refs) {
		ids, toks := refArrays(pick(refs, g.idx))
		stmts = append(stmts, pgStmt{q: s.d.rebind(`UPDATE ` + s.names[g.table] + ` SET ` + set + ` WHERE status = ? AND ` + refsIn),
			args: append(append([]any{}, setArgs...), int(task.StatusClaimed), ids, toks)})
	}
	if len(stmts) != tables {
		t.Fatalf("%d statements, want one per table", len(stmts))
	}
	failing := append(stmts, pgStmt{q: `SELECT 1 / (count(*) - count(*)) FROM ` + s.names[0]})
	if err := s.pgBatch(ctx, 0, nil, failing); err == nil {
		t.Fatal("a batch with a failing statement returned no error")
	}
	for _, r := range refs {
		tk, err := s.Get(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if tk.Status != task.StatusClaimed || tk.Attempts != 0 {
			t.Fatalf("task %s is %v with %d attempts after a failed batch: its statement was not rolled back", r.ID, tk.Status, tk.Attempts)
		}
	}

	// One-row Starts and Finishes, more than the five custom plans after
	// which PostgreSQL would keep a prepared statement's generic plan
	// (made while the table is small: a sequential scan by status).
	for _, r := range refs {
		started, err := s.Start(ctx, []store.Ref{r}, now.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if len(started) != 1 || started[0].Status != task.StatusRunning || started[0].Attempts != 1 {
			t.Fatalf("Start of %s: %+v", r.ID, started)
		}
	}
	for _, r := range refs {
		if err := s.Finish(ctx, []store.Outcome{{Ref: r, Done: true}}); err != nil {
			t.Fatal(err)
		}
	}
	// Nothing of theirs is kept prepared on the connection: each call is
	// planned for its own rows.
	var kept int
	if err := s.w[0].QueryRowContext(ctx, `SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE 'UPDATE %'`).Scan(&kept); err != nil {
		t.Fatal(err)
	}
	if kept != 0 {
		t.Fatalf("%d Start or Finish statements kept prepared on the connection", kept)
	}
	for _, r := range refs {
		tk, err := s.Get(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if tk.Status != task.StatusDone {
			t.Fatalf("task %s is %v after Finish", r.ID, tk.Status)
		}
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
