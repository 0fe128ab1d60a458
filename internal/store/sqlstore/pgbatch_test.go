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
// it replaced was atomic. And its fixed statements are prepared once per
// connection: a call after the first adds no prepared statement, whatever
// the number of rows.
func TestPgBatchIsAtomicAndPreparedOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const tables = 2
	s := openT(t, "postgres", testdb.DSNs(t, "postgres", 1), tables, 2)
	// One connection: every call below meets the same prepared statements.
	s.w[0].SetMaxOpenConns(1)
	now := time.Now()
	_, refs := claimedIn(t, s, tables, 2, "b", now, store.Lease{Owner: "n1", Until: now.Add(time.Minute), Token: 3})

	// A Start's statements for both tables, then one that fails.
	set, setArgs, _ := startSet(now.Add(time.Minute))
	var stmts []pgStmt
	for _, g := range s.refGroups(refs) {
		ids, toks := refArrays(pick(refs, g.idx))
		stmts = append(stmts, pgStmt{q: s.d.rebind(`UPDATE ` + s.names[g.table] + ` SET ` + set + ` WHERE status = ? AND ` + refsIn),
			args: append(append([]any{}, setArgs...), int(task.StatusClaimed), ids, toks), fixed: true})
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

	prepared := func() int {
		t.Helper()
		var n int
		if err := s.w[0].QueryRowContext(ctx, `SELECT count(*) FROM pg_prepared_statements`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// Start and Finish through the batch: first one task of each table
	// (their statements are prepared), then the others, more rows per
	// table (nothing more is prepared).
	var first, rest []store.Ref
	seen := map[int]bool{}
	for _, g := range s.refGroups(refs) {
		for _, i := range g.idx {
			if !seen[g.table] {
				seen[g.table] = true
				first = append(first, refs[i])
			} else {
				rest = append(rest, refs[i])
			}
		}
	}
	started, err := s.Start(ctx, first, now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	before := prepared()
	started2, err := s.Start(ctx, rest, now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if got := len(started) + len(started2); got != len(refs) {
		t.Fatalf("started %d of %d", got, len(refs))
	}
	done := func(ts []*task.Task) []store.Outcome {
		var outs []store.Outcome
		for _, tk := range ts {
			if tk.Status != task.StatusRunning || tk.Attempts != 1 {
				t.Fatalf("started task %s is %v with %d attempts", tk.ID, tk.Status, tk.Attempts)
			}
			outs = append(outs, store.Outcome{Ref: store.Ref{ID: tk.ID, Token: tk.Token}, Done: true})
		}
		return outs
	}
	if err := s.Finish(ctx, done(started)); err != nil {
		t.Fatal(err)
	}
	mid := prepared()
	if err := s.Finish(ctx, done(started2)); err != nil {
		t.Fatal(err)
	}
	if after := prepared(); before != mid-tables || after != mid {
		t.Fatalf("prepared statements %d (started) → %d (finished) → %d (finished more): want the Finish's %d once, then none", before, mid, after, tables)
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
