package e2e

import (
	"database/sql"
	"fmt"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/internal/sqldb"
	"github.com/ontimehq/ontime/internal/testdb"
)

// TestBulkKill9 (issue 29 item 5): an `ontime serve` running a bulk
// reschedule by a shift is killed with SIGKILL in the middle of it and
// started again under the same node_id: the operation resumes where its
// pages committed, and in the end every matching task moved exactly once
// (a page applied twice would show twice the shift) and no other moved.
func TestBulkKill9(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) { bulkKill9(t, engine) })
	}
}

func bulkKill9(t *testing.T, engine string) {
	n := 15000
	if testing.Short() {
		n = 6000
	}
	dsn := testdb.DSNs(t, engine, 1)[0]
	cfg := writeChaosConfig(t, t.TempDir(), fmt.Sprintf(`node_id: bulk-kill
log_level: warn
store:
  driver: %s
  databases: ["%s"]
  tables: 4
operations:
  page_size: 100
`, engine, dsn))
	addr := freeAddr(t)
	p := startServe(t, cfg, addr)
	c := newAPIClient(t, "http://"+addr)
	ctx := t.Context()
	base := time.Now().Add(2 * time.Hour).Truncate(time.Second)
	want := 0
	for start := 0; start < n; start += 1000 {
		var reqs []apiv1.TaskRequest
		for i := start; i < min(start+1000, n); i++ {
			key := "n-" + strconv.Itoa(i)
			if i%3 != 0 {
				key = "m-" + strconv.Itoa(i)
				want++
			}
			reqs = append(reqs, apiv1.TaskRequest{Topic: "bulk", Key: key, DueAt: base.Add(time.Duration(i) * time.Second).Format(time.RFC3339),
				Target: "http://127.0.0.1:1/h"})
		}
		items, err := c.SubmitBatch(ctx, reqs)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range items {
			if it.Error != nil {
				t.Fatalf("submit: %+v", it.Error)
			}
		}
	}
	op, err := c.CreateOperation(ctx, apiv1.OperationRequest{Action: "reschedule", Filter: apiv1.OperationFilter{Topic: "bulk", KeyPrefix: "m-"}, Shift: "90m"})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "a third of the operation", func() bool {
		cur, err := c.Operation(ctx, op.ID)
		if err != nil {
			t.Fatal(err)
		}
		if cur.Status == "done" {
			t.Fatal("the operation ended before the kill")
		}
		return cur.Changed >= int64(want/3)
	})
	_ = p.signal(t, syscall.SIGKILL) // its error is the kill's
	startServe(t, cfg, addr)
	var end *apiv1.Operation
	waitFor(t, 5*time.Minute, "the operation's end", func() bool {
		end, err = c.Operation(ctx, op.ID)
		if err != nil {
			t.Fatal(err)
		}
		return end.Status == "done" || end.Status == "failed"
	})
	if end.Status != "done" || end.Changed != int64(want) || end.Matched != int64(want) {
		t.Fatalf("after the restart: %+v, want %d matched and changed", end, want)
	}
	db, err := sqldb.Open(engine, dsn, sqldb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	shift := (90 * time.Minute).Microseconds()
	once, other := 0, 0
	for i := range 4 {
		tbl := fmt.Sprintf("ontime_tasks_%04d", i)
		q1, q2 := `SELECT COUNT(*) FROM `+tbl+` WHERE due_at = first_due_at + ?`, `SELECT COUNT(*) FROM `+tbl+` WHERE due_at <> first_due_at AND (due_at <> first_due_at + ? OR task_key NOT LIKE 'm-%')`
		if engine == "postgres" {
			q1, q2 = `SELECT COUNT(*) FROM `+tbl+` WHERE due_at = first_due_at + $1`, `SELECT COUNT(*) FROM `+tbl+` WHERE due_at <> first_due_at AND (due_at <> first_due_at + $1 OR task_key NOT LIKE 'm-%')`
		}
		var a, b int
		if err := db.QueryRow(q1, shift).Scan(&a); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRow(q2, shift).Scan(&b); err != nil && err != sql.ErrNoRows {
			t.Fatal(err)
		}
		once, other = once+a, other+b
	}
	if once != want || other != 0 {
		t.Fatalf("%d tasks moved once (want %d), %d moved otherwise", once, want, other)
	}
}
