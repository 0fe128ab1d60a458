package operation_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/operation"
	"github.com/ontimehq/ontime/internal/router"
	"github.com/ontimehq/ontime/internal/sqldb"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/store/sqlstore"
	"github.com/ontimehq/ontime/internal/task"
	"github.com/ontimehq/ontime/internal/testdb"
)

// fixture is a store of 2 databases × 3 tables and raw connections to
// its databases, to set up states and to check rows behind the store.
type fixture struct {
	t      testing.TB
	engine string
	st     *sqlstore.Store
	raw    []*sql.DB
	tables int
	base   time.Time
}

func open(t testing.TB, engine string) *fixture {
	t.Helper()
	dsns := testdb.DSNs(t, engine, 2)
	st, err := sqlstore.Open(context.Background(), sqlstore.Config{Driver: engine, DSNs: dsns, Tables: 3, Segments: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := &fixture{t: t, engine: engine, st: st, tables: 3, base: time.Now().Add(time.Hour).Truncate(time.Second)}
	for _, dsn := range dsns {
		db, err := sqldb.Open(engine, dsn, sqldb.Options{SQLite: "_pragma=busy_timeout(10000)"})
		if err != nil {
			t.Fatal(err)
		}
		db.SetMaxOpenConns(2) // the servers' connections are shared with other tests
		t.Cleanup(func() { db.Close() })
		f.raw = append(f.raw, db)
	}
	return f
}

// row is one task the test makes: what it is, and whether the filter
// under test should match it.
type row struct {
	topic, key string
	due        time.Time
}

// insert writes rows (pending), n at a time, and returns their IDs in order.
func (f *fixture) insert(rows []row) []string {
	f.t.Helper()
	ids := make([]string, len(rows))
	const batch = 5000
	for start := 0; start < len(rows); start += batch {
		var nts []store.NewTask
		for i := start; i < min(start+batch, len(rows)); i++ {
			r := rows[i]
			due := r.due
			v, err := task.Validate(task.Spec{Topic: r.topic, Key: r.key, DueAt: &due, Payload: []byte(`{}`), Target: "http://127.0.0.1:1/h"}, task.Limits{}, due.Add(-2*time.Hour))
			if err != nil {
				f.t.Fatal(err)
			}
			var hash uint32
			if r.key != "" {
				hash = router.HashKey(r.key)
			}
			id, p := router.NewID(time.Now(), hash, r.key != "")
			ids[i] = id
			nts = append(nts, store.NewTask{ID: id, ShardHash: p.ShardHash, Seg: p.Segment(2), Validated: v})
		}
		res, err := f.st.Insert(context.Background(), nts)
		if err != nil {
			f.t.Fatal(err)
		}
		for j, r := range res {
			if r.Existing {
				f.t.Fatalf("row %d existed", start+j)
			}
		}
	}
	return ids
}

// exec runs q on every task table of every database (%s is the table).
func (f *fixture) exec(q string, args ...any) {
	f.t.Helper()
	for _, db := range f.raw {
		for i := range f.tables {
			qq := fmt.Sprintf(q, fmt.Sprintf("ontime_tasks_%04d", i))
			if f.engine == "postgres" {
				qq = rebind(qq)
			}
			if _, err := db.Exec(qq, args...); err != nil {
				f.t.Fatalf("%s: %v", qq, err)
			}
		}
	}
}

// count sums q's single number over every task table.
func (f *fixture) count(q string, args ...any) int64 {
	f.t.Helper()
	var total int64
	for _, db := range f.raw {
		for i := range f.tables {
			qq := fmt.Sprintf(q, fmt.Sprintf("ontime_tasks_%04d", i))
			if f.engine == "postgres" {
				qq = rebind(qq)
			}
			var n sql.NullInt64
			if err := db.QueryRow(qq, args...).Scan(&n); err != nil {
				f.t.Fatalf("%s: %v", qq, err)
			}
			total += n.Int64
		}
	}
	return total
}

func rebind(q string) string {
	var b strings.Builder
	n := 0
	for _, c := range q {
		if c == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

// service builds an executor of node on f's store.
func (f *fixture) service(node string, ttl time.Duration) *operation.Service {
	f.t.Helper()
	s, err := operation.New(operation.Config{Store: f.st, NodeID: node, LeaseTTL: ttl, PageSize: 500, Poll: 20 * time.Millisecond})
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

// runToEnd runs s until op has ended, and returns it.
func (f *fixture) runToEnd(s *operation.Service, id string) *store.Operation {
	f.t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		s.RunOnce(ctx)
		op, err := s.Get(ctx, id)
		if err != nil {
			f.t.Fatal(err)
		}
		if op.State == store.OpDone || op.State == store.OpFailed {
			return op
		}
		time.Sleep(50 * time.Millisecond)
	}
	f.t.Fatalf("operation %s did not end", id)
	return nil
}

func TestOperationFilters(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			testFilters(t, engine)
		})
	}
}

func testFilters(t *testing.T, engine string) {
	ctx := context.Background()
	f := open(t, engine)
	s := f.service("n1", 5*time.Second)
	// 400 tasks: topics a and b; keys with LIKE's wildcards in them.
	var rows []row
	for i := range 400 {
		topic := "a"
		if i%4 == 0 {
			topic = "b"
		}
		key := ""
		switch i % 5 {
		case 0:
			key = fmt.Sprintf("o%%d-%d", i) // "o%d-…": a literal % after o
		case 1:
			key = fmt.Sprintf("oxd-%d", i) // what LIKE 'o%d%' would also match
		case 2:
			key = fmt.Sprintf("o_d-%d", i)
		case 3:
			key = fmt.Sprintf("ord-%d", i)
		}
		rows = append(rows, row{topic: topic, key: key, due: f.base.Add(time.Duration(i) * time.Minute)})
	}
	ids := f.insert(rows)
	// States: every 3rd dead with an error, every 7th done, the rest pending.
	statusOf := func(i int) task.Status {
		switch {
		case i%3 == 0:
			return task.StatusDead
		case i%7 == 0:
			return task.StatusDone
		}
		return task.StatusPending
	}
	errOf := func(i int) string {
		if statusOf(i) != task.StatusDead {
			return ""
		}
		if i%2 == 0 {
			return "HTTP 503: 50% _off_"
		}
		return "timeout"
	}
	for i, id := range ids {
		if st := statusOf(i); st != task.StatusPending {
			f.exec(`UPDATE %s SET status = ?, last_error = ? WHERE id = ?`, int(st), errOf(i), id)
		}
	}

	type want struct {
		matched, changed int64
	}
	check := func(name string, sp operation.Spec, w want, verify string, vargs ...any) {
		t.Helper()
		op, err := s.Create(ctx, sp)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := f.runToEnd(s, op.ID)
		if got.State != store.OpDone || got.Matched != w.matched || got.Changed != w.changed || got.TablesDone != got.Tables {
			t.Fatalf("%s: %+v, want matched %d changed %d, done", name, got, w.matched, w.changed)
		}
		if verify != "" {
			if n := f.count(verify, vargs...); n != 0 {
				t.Fatalf("%s: %d rows fail %s", name, n, verify)
			}
		}
	}
	expect := func(match func(i int) bool, eligible ...task.Status) want {
		var w want
		for i := range rows {
			if match(i) {
				w.matched++
				for _, e := range eligible {
					if statusOf(i) == e {
						w.changed++
					}
				}
			}
		}
		return w
	}

	// Dry run: counts, changes nothing.
	keyPct := func(i int) bool { return rows[i].topic == "a" && strings.HasPrefix(rows[i].key, "o%") }
	before := f.count(`SELECT COUNT(*) FROM %s WHERE status = 5`)
	check("dry run", operation.Spec{Action: "cancel", Filter: store.OpFilter{Topic: "a", KeyPrefix: "o%"}, DryRun: true},
		expect(keyPct, task.StatusPending, task.StatusClaimed), "")
	if after := f.count(`SELECT COUNT(*) FROM %s WHERE status = 5`); after != before {
		t.Fatalf("dry run cancelled %d tasks", after-before)
	}
	// Cancel by topic and a key prefix holding %: only keys that start
	// with "o%", not "oxd" nor "o_d".
	check("cancel key prefix", operation.Spec{Action: "cancel", Filter: store.OpFilter{Topic: "a", KeyPrefix: "o%"}},
		expect(keyPct, task.StatusPending), "")
	if n := f.count(`SELECT COUNT(*) FROM %s WHERE status = 5 AND (topic <> 'a' OR task_key IS NULL OR task_key NOT LIKE 'o!%%%%' ESCAPE '!')`); n != 0 {
		t.Fatalf("cancel touched %d tasks outside its filter", n)
	}
	if n := f.count(`SELECT COUNT(*) FROM %s WHERE status = 5`); n != expect(keyPct, task.StatusPending).changed {
		t.Fatalf("cancelled %d", n)
	}
	// Requeue dead tasks whose error holds "50% _": LIKE's wildcards are
	// plain characters.
	errMatch := func(i int) bool { return strings.Contains(errOf(i), "50% _") && rows[i].topic == "a" }
	check("requeue error contains", operation.Spec{Action: "requeue", Filter: store.OpFilter{Topic: "a", ErrorContains: "50% _", Statuses: []task.Status{task.StatusDead}}},
		expect(errMatch, task.StatusDead), `SELECT COUNT(*) FROM %s WHERE moved_by = 3 AND (status <> 0 OR attempts <> 0 OR topic <> 'a')`)
	if n := f.count(`SELECT COUNT(*) FROM %s WHERE moved_by = 3`); n != expect(errMatch, task.StatusDead).changed {
		t.Fatalf("requeued %d", n)
	}
	// Reschedule by a due range and status pending, to an instant.
	lo, hi := f.base.Add(100*time.Minute), f.base.Add(200*time.Minute)
	// Pending in the range: requeued tasks were due at their requeue, now.
	pendingNow := func(i int) bool { return statusOf(i) == task.StatusPending && !keyPct(i) }
	var w want
	for i := range rows {
		if !rows[i].due.Before(lo) && rows[i].due.Before(hi) && pendingNow(i) {
			w.matched++
			w.changed++
		}
	}
	to := f.base.Add(48 * time.Hour)
	check("reschedule due_at", operation.Spec{Action: "reschedule", Filter: store.OpFilter{DueAfter: lo, DueBefore: hi, Statuses: []task.Status{task.StatusPending}}, DueAt: to},
		w, `SELECT COUNT(*) FROM %s WHERE moved_by = 2 AND (due_at <> ? OR first_due_at < ? OR first_due_at >= ?)`, to.UnixMicro(), lo.UnixMicro(), hi.UnixMicro())
	if n := f.count(`SELECT COUNT(*) FROM %s WHERE moved_by = 2`); n != w.changed {
		t.Fatalf("rescheduled %d", n)
	}
	// Then shifted back by a negative shift: exactly once.
	check("reschedule shift", operation.Spec{Action: "reschedule", Filter: store.OpFilter{DueAfter: to, DueBefore: to.Add(time.Second)}, Shift: -time.Hour},
		w, `SELECT COUNT(*) FROM %s WHERE moved_by = 2 AND due_at <> ?`, to.Add(-time.Hour).UnixMicro())
	// Delete done tasks of topic b.
	doneB := func(i int) bool { return rows[i].topic == "b" && statusOf(i) == task.StatusDone }
	check("delete done", operation.Spec{Action: "delete", Filter: store.OpFilter{Topic: "b", Statuses: []task.Status{task.StatusDone}}},
		expect(doneB, task.StatusDone), "")
	if n := f.count(`SELECT COUNT(*) FROM %s WHERE topic = 'b' AND status = 3`); n != 0 {
		t.Fatalf("%d done tasks of b left", n)
	}
	// Delete passes over running tasks.
	check("delete running", operation.Spec{Action: "delete", Filter: store.OpFilter{Statuses: []task.Status{task.StatusRunning}}}, want{}, "")

	// Requeue passes over a dead task whose key a live task holds.
	kr := f.insert([]row{{topic: "k", key: "same", due: f.base}})
	f.exec(`UPDATE %s SET status = 4 WHERE id = ?`, kr[0])
	f.insert([]row{{topic: "k", key: "same", due: f.base}})
	check("requeue held key", operation.Spec{Action: "requeue", Filter: store.OpFilter{Topic: "k"}}, want{matched: 2, changed: 0}, "")

	// The list shows them newest first.
	ops, err := s.List(ctx, 0)
	if err != nil || len(ops) != 8 || ops[0].Filter.Topic != "k" {
		t.Fatalf("list: %d, %v", len(ops), err)
	}
	if _, err := s.Get(ctx, "01JD5Q5H0C8Y2X4ZV7M3N9P6RT"); !errors.Is(err, store.ErrOperationNotFound) {
		t.Fatalf("get unknown: %v", err)
	}
}

func TestOperationValidate(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		sp    operation.Spec
		field string
	}{
		{operation.Spec{Filter: store.OpFilter{Topic: "a"}}, "action"},
		{operation.Spec{Action: "purge", Filter: store.OpFilter{Topic: "a"}}, "action"},
		{operation.Spec{Action: "cancel"}, "filter"},
		{operation.Spec{Action: "cancel", Filter: store.OpFilter{Topic: "a b"}}, "filter.topic"},
		{operation.Spec{Action: "cancel", Filter: store.OpFilter{Statuses: []task.Status{9}}}, "filter.status"},
		{operation.Spec{Action: "cancel", Filter: store.OpFilter{KeyPrefix: strings.Repeat("k", 256)}}, "filter.key_prefix"},
		{operation.Spec{Action: "cancel", Filter: store.OpFilter{KeyPrefix: "\xff"}}, "filter.key_prefix"},
		{operation.Spec{Action: "cancel", Filter: store.OpFilter{DueAfter: now, DueBefore: now}}, "filter.due_before"},
		{operation.Spec{Action: "cancel", Filter: store.OpFilter{ErrorContains: strings.Repeat("e", 1025)}}, "filter.error_contains"},
		{operation.Spec{Action: "cancel", Filter: store.OpFilter{Topic: "a"}, Delay: time.Hour}, "delay"},
		{operation.Spec{Action: "delete", Filter: store.OpFilter{Topic: "a"}, DueAt: now}, "due_at"},
		{operation.Spec{Action: "cancel", Filter: store.OpFilter{Topic: "a"}, Shift: time.Hour}, "shift"},
		{operation.Spec{Action: "reschedule", Filter: store.OpFilter{Topic: "a"}}, "due_at"},
		{operation.Spec{Action: "reschedule", Filter: store.OpFilter{Topic: "a"}, Delay: time.Hour, Shift: time.Hour}, "due_at"},
		{operation.Spec{Action: "reschedule", Filter: store.OpFilter{Topic: "a"}, Delay: -time.Hour}, "delay"},
		{operation.Spec{Action: "reschedule", Filter: store.OpFilter{Topic: "a"}, Shift: 11 * 365 * 24 * time.Hour}, "shift"},
		{operation.Spec{Action: "reschedule", Filter: store.OpFilter{Topic: "a"}, Shift: time.Nanosecond}, "shift"},
		{operation.Spec{Action: "reschedule", Filter: store.OpFilter{Topic: "a"}, DueAt: now.Add(11 * 365 * 24 * time.Hour)}, "due_at"},
		{operation.Spec{Action: "requeue", Filter: store.OpFilter{Topic: "a"}, Shift: time.Hour}, "shift"},
	} {
		_, err := operation.Validate(c.sp, now)
		var fe *task.FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%+v: %v, want an error on %s", c.sp, err, c.field)
		}
	}
	if _, err := operation.Validate(operation.Spec{Action: "reschedule", Filter: store.OpFilter{Topic: "a"}, Shift: -time.Minute}, now); err != nil {
		t.Fatal(err)
	}
}

// TestOperationKilled runs a reschedule by a shift — the change a second
// application would show (twice the shift) — over many rows, kills its
// executor's context in the middle of a page, and resumes it on another
// node: every matching row moved exactly once, no other row moved.
// ONTIME_BULK_ROWS sets the rows (1,000,000 for the figure);
// 20,000 by default, 6,000 with -short.
func TestOperationKilled(t *testing.T) {
	n := 20000
	if testing.Short() {
		n = 6000
	}
	if v := os.Getenv("ONTIME_BULK_ROWS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			t.Fatal(err)
		}
	}
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) { testKilled(t, engine, n) })
	}
}

func testKilled(t *testing.T, engine string, n int) {
	f := open(t, engine)
	rows := make([]row, n)
	var want int64
	lo, hi := f.base.Add(10*time.Second), f.base.Add(time.Duration(n)*time.Second*3/4)
	for i := range rows {
		r := row{topic: "bulk", due: f.base.Add(time.Duration(i) * time.Second)}
		if i%10 == 9 {
			r.topic = "other"
		}
		if i%3 != 0 {
			r.key = "m-" + strconv.Itoa(i)
		} else {
			r.key = "n-" + strconv.Itoa(i)
		}
		rows[i] = r
		if r.topic == "bulk" && strings.HasPrefix(r.key, "m") && !r.due.Before(lo) && r.due.Before(hi) {
			want++
		}
	}
	start := time.Now()
	f.insert(rows)
	t.Logf("%s: inserted %d rows in %s", engine, n, time.Since(start).Round(time.Millisecond))
	ctx := context.Background()
	a := f.service("node-a", 500*time.Millisecond)
	op, err := a.Create(ctx, operation.Spec{Action: "reschedule", Filter: store.OpFilter{Topic: "bulk", KeyPrefix: "m", DueAfter: lo, DueBefore: hi}, Shift: 90 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	// Rows made after the operation are not its business, even matching.
	late := f.insert([]row{{topic: "bulk", key: "m-late", due: lo}})
	// Run on node a; cancel its context in the middle of a page once
	// about half the rows are walked.
	actx, kill := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); a.RunOnce(actx) }()
	for {
		cur, err := a.Get(ctx, op.ID)
		if err != nil {
			t.Fatal(err)
		}
		if cur.Changed >= want/2 {
			break
		}
		if cur.State == store.OpDone {
			t.Fatal("the operation ended before it could be killed")
		}
		time.Sleep(2 * time.Millisecond)
	}
	kill()
	<-done
	mid, _ := a.Get(ctx, op.ID)
	t.Logf("%s: killed at %d/%d changed, %d/%d tables, cursor %s", engine, mid.Changed, want, mid.TablesDone, mid.Tables, mid.Cursor)
	if mid.State != store.OpRunning {
		t.Fatalf("state after the kill: %s", mid.State)
	}
	// Node b takes over once a's lease has run out.
	b := f.service("node-b", 500*time.Millisecond)
	start = time.Now()
	end := f.runToEnd(b, op.ID)
	t.Logf("%s: resumed and finished in %s", engine, time.Since(start).Round(time.Millisecond))
	if end.State != store.OpDone || end.Changed != want || end.Matched != want {
		t.Fatalf("end: %+v, want %d matched and changed", end, want)
	}
	shift := (90 * time.Minute).Microseconds()
	if n := f.count(`SELECT COUNT(*) FROM %s WHERE due_at = first_due_at + ?`, shift); n != want {
		t.Fatalf("%d rows moved once, want %d", n, want)
	}
	if n := f.count(`SELECT COUNT(*) FROM %s WHERE due_at <> first_due_at AND due_at <> first_due_at + ?`, shift); n != 0 {
		t.Fatalf("%d rows moved otherwise (twice, or outside the filter)", n)
	}
	if n := f.count(`SELECT COUNT(*) FROM %s WHERE due_at <> first_due_at AND NOT (topic = 'bulk' AND task_key LIKE 'm%%' AND first_due_at >= ? AND first_due_at < ?)`,
		lo.UnixMicro(), hi.UnixMicro()); n != 0 {
		t.Fatalf("%d rows outside the filter moved", n)
	}
	if n := f.count(`SELECT COUNT(*) FROM %s WHERE id = ? AND due_at <> first_due_at`, late[0]); n != 0 {
		t.Fatal("a task made after the operation moved")
	}
}

// TestOperationTwoRunners: two runners walking one operation at once (a
// node that lost its lease and does not know it yet, beside its
// successor) change each row once: a page is fenced by its progress row.
func TestOperationTwoRunners(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			f := open(t, engine)
			rows := make([]row, 3000)
			for i := range rows {
				rows[i] = row{topic: "two", due: f.base.Add(time.Duration(i) * time.Second)}
			}
			f.insert(rows)
			op, err := operation.Validate(operation.Spec{Action: "reschedule", Filter: store.OpFilter{Topic: "two"}, Shift: time.Minute}, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if err := f.st.CreateOperation(ctx, op); err != nil {
				t.Fatal(err)
			}
			dbs, tables := f.st.OperationTables()
			errs := make(chan error, 2)
			var changed [2]int64
			for r := range 2 {
				go func() {
					for db := range dbs {
						for tb := range tables {
							for {
								pg, err := f.st.OperationPage(ctx, op, db, tb, 100, time.Now())
								if err != nil {
									errs <- err
									return
								}
								changed[r] += pg.Changed
								if pg.Done {
									break
								}
							}
						}
					}
					errs <- nil
				}()
			}
			for range 2 {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
			if changed[0]+changed[1] != 3000 {
				t.Fatalf("changed %d + %d, want 3000", changed[0], changed[1])
			}
			if n := f.count(`SELECT COUNT(*) FROM %s WHERE due_at = first_due_at + ?`, time.Minute.Microseconds()); n != 3000 {
				t.Fatalf("%d rows moved once, want 3000", n)
			}
			got, err := f.st.Operation(ctx, op.ID)
			if err != nil || got.Changed != 3000 || got.Matched != 3000 || got.TablesDone != got.Tables {
				t.Fatalf("progress: %+v %v", got, err)
			}
		})
	}
}

// TestOperationCancelKeyHold: a bulk cancel holds a key as a single cancel
// does: a submit of the key within retention.key_hold gets the cancelled
// task back, held until the cancel plus the hold.
func TestOperationCancelKeyHold(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			const hold = time.Hour
			st, err := sqlstore.Open(ctx, sqlstore.Config{Driver: engine, DSNs: testdb.DSNs(t, engine, 1), Tables: 2, Segments: 1, KeyHold: hold})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			f := &fixture{t: t, engine: engine, st: st, tables: 2, base: time.Now().Add(time.Hour)}
			ids := f.insert([]row{{topic: "kh", key: "bulk", due: f.base}, {topic: "kh", key: "single", due: f.base}})
			s := f.service("n", time.Second)
			op, err := s.Create(ctx, operation.Spec{Action: "cancel", Filter: store.OpFilter{Topic: "kh", KeyPrefix: "bulk"}})
			if err != nil {
				t.Fatal(err)
			}
			if got := f.runToEnd(s, op.ID); got.Changed != 1 {
				t.Fatalf("bulk cancel: %+v", got)
			}
			if _, err := st.Cancel(ctx, ids[1]); err != nil {
				t.Fatal(err)
			}
			for i, key := range []string{"bulk", "single"} {
				cur, err := st.Get(ctx, ids[i])
				if err != nil || cur.Status != task.StatusCancelled {
					t.Fatalf("%s: %v %v", key, cur, err)
				}
				due := f.base
				v, _ := task.Validate(task.Spec{Topic: "kh", Key: key, DueAt: &due, Payload: []byte(`{}`), Target: "http://127.0.0.1:1/h"}, task.Limits{}, time.Now())
				id, p := router.NewID(time.Now(), router.HashKey(key), true)
				res, err := st.Insert(ctx, []store.NewTask{{ID: id, ShardHash: p.ShardHash, Seg: 0, Validated: v}})
				if err != nil {
					t.Fatal(err)
				}
				if !res[0].Existing || res[0].Task.ID != ids[i] || !res[0].HeldUntil.Equal(cur.UpdatedAt.Add(hold)) {
					t.Fatalf("%s cancel: resubmit %+v, want the cancelled task held until %v", key, res[0], cur.UpdatedAt.Add(hold))
				}
			}
		})
	}
}

// TestOperationKeep: an idle executor deletes the operations that finished
// longer than Keep ago, with their progress rows; newer ones stay.
func TestOperationKeep(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			f := open(t, engine)
			f.insert([]row{{topic: "keep", due: f.base}})
			s := f.service("n", time.Second)
			old, err := s.Create(ctx, operation.Spec{Action: "cancel", Filter: store.OpFilter{Topic: "keep"}, DryRun: true})
			if err != nil {
				t.Fatal(err)
			}
			f.runToEnd(s, old.ID)
			time.Sleep(50 * time.Millisecond)
			cut := time.Now()
			fresh, err := s.Create(ctx, operation.Spec{Action: "cancel", Filter: store.OpFilter{Topic: "keep"}, DryRun: true})
			if err != nil {
				t.Fatal(err)
			}
			f.runToEnd(s, fresh.ID)
			if n, err := f.st.DeleteOperations(ctx, cut); err != nil || n != 1 {
				t.Fatalf("delete: %d %v, want 1", n, err)
			}
			if _, err := s.Get(ctx, old.ID); !errors.Is(err, store.ErrOperationNotFound) {
				t.Fatalf("old operation: %v", err)
			}
			if got, err := s.Get(ctx, fresh.ID); err != nil || got.Matched != 1 {
				t.Fatalf("fresh operation: %+v %v", got, err)
			}
			var left int64
			for _, db := range f.raw {
				var n int64
				q := `SELECT COUNT(*) FROM ontime_operation_progress WHERE op_id = ?`
				if engine == "postgres" {
					q = rebind(q)
				}
				if err := db.QueryRow(q, old.ID).Scan(&n); err != nil {
					t.Fatal(err)
				}
				left += n
			}
			if left != 0 {
				t.Fatalf("%d progress rows of the deleted operation left", left)
			}
		})
	}
}
