package scanjob

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/ontimehq/ontime/internal/store"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql" // the "mysql" driver of the tests' own connection
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver
	_ "modernc.org/sqlite"             // the "sqlite" driver

	"github.com/ontimehq/ontime/internal/deliver/broker"
	"github.com/ontimehq/ontime/internal/testdb"
)

// userDB is a database of the users' kind holding bill_0: seed 000's
// bill(id, status, x, y) with seed 003's retry_count and
// next_select_time, the (status, id) index the fetch needs, rows 1…n at
// status 1 and two more (n+1, n+2) at status 3 that no job's where takes.
type userDB struct {
	engine, dsn string
	db          *sql.DB
}

func newUserDB(t *testing.T, engine string, n int) *userDB {
	t.Helper()
	dsn := testdb.DSNs(t, engine, 1)[0]
	driver, open := engine, dsn
	next := "DATETIME(3) NULL"
	switch engine {
	case "postgres":
		driver, next = "pgx", "TIMESTAMPTZ NULL"
	case "sqlite":
		open, next = "file:"+dsn+"?_pragma=busy_timeout(10000)", "TEXT NULL"
	}
	db, err := sql.Open(driver, open)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	u := &userDB{engine: engine, dsn: dsn, db: db}
	u.exec(t, `CREATE TABLE bill_0 (id BIGINT NOT NULL PRIMARY KEY, status INT NOT NULL, x VARCHAR(64) NOT NULL, y INT NOT NULL,
		retry_count INT NOT NULL DEFAULT 0, next_select_time `+next+`)`)
	u.exec(t, `CREATE INDEX bill_0_status_id ON bill_0 (status, id)`)
	var vals []string
	for id := 1; id <= n+2; id++ {
		status := 1
		if id > n {
			status = 3
		}
		vals = append(vals, fmt.Sprintf("(%d, %d, 'bill-%d', %d)", id, status, id, id%97))
	}
	u.exec(t, "INSERT INTO bill_0 (id, status, x, y) VALUES "+strings.Join(vals, ", "))
	return u
}

func (u *userDB) exec(t *testing.T, q string, args ...any) {
	t.Helper()
	if _, err := u.db.Exec(u.rebind(q), args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func (u *userDB) rebind(q string) string {
	if u.engine != "postgres" {
		return q
	}
	var b strings.Builder
	n := 0
	for _, c := range q {
		if c == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

// row is a bill row's state.
type row struct{ status, retries int }

func (u *userDB) rows(t *testing.T) map[int64]row {
	t.Helper()
	rs, err := u.db.Query(`SELECT id, status, retry_count FROM bill_0`)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	out := map[int64]row{}
	for rs.Next() {
		var id int64
		var r row
		if err := rs.Scan(&id, &r.status, &r.retries); err != nil {
			t.Fatal(err)
		}
		out[id] = r
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// nextIs reports whether row id's next_select_time is at, as the job
// binds times on the engine.
func (u *userDB) nextIs(t *testing.T, id int64, at time.Time) bool {
	t.Helper()
	var n int
	arg := srcDialect{name: u.engine}.timeArg(at)
	if err := u.db.QueryRow(u.rebind(`SELECT COUNT(*) FROM bill_0 WHERE id = ? AND next_select_time = ?`), id, arg).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// billSpec is a job over u's bill_0 handing rows to an http target.
func billSpec(name string, u *userDB) SQLSpec {
	return SQLSpec{Name: name, Cron: never, Driver: u.engine, Databases: []string{u.dsn}, Table: "bill_0", Key: "id",
		Columns: []string{"id", "x", "y"}, Where: map[string]any{"status": 1}, Page: 3, Batch: 2,
		RetryColumn: "retry_count", NextColumn: "next_select_time", Target: "http://receiver.test/bill",
		Set: map[string]any{"status": 2}}
}

// recSender is a Sender that records the batches it got and answers
// what answer says (nil: every row processed).
type recSender struct {
	mu      sync.Mutex
	batches []*Batch
	answer  func(b *Batch) ([]any, error)
}

func (r *recSender) Send(_ context.Context, _ string, b *Batch) ([]any, error) {
	r.mu.Lock()
	r.batches = append(r.batches, b)
	r.mu.Unlock()
	if r.answer != nil {
		return r.answer(b)
	}
	return nil, nil
}

// keys lists the batches' keys, batch by batch in key order (the batches
// of one page are sent at once).
func (r *recSender) keys() [][]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out [][]any
	for _, b := range r.batches {
		out = append(out, b.Keys)
	}
	slices.SortFunc(out, func(a, b []any) int { return int(a[0].(int64) - b[0].(int64)) })
	return out
}

func sqlService(t *testing.T, st State, clk Clock, node string, snd Sender, specs ...SQLSpec) *Service {
	t.Helper()
	s := newService(t, st, clk, node, func(c *Config) { c.Senders = map[string]Sender{"http": snd} })
	for _, sp := range specs {
		if err := s.AddSQL(context.Background(), sp); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// runOnce runs an item of a service that was not started and returns
// the one run it recorded.
func runOnce(t *testing.T, s *Service, st *memState, job, item, trig string, fireAt time.Time) store.JobRun {
	t.Helper()
	before := map[string]bool{}
	for _, r := range st.allRuns(job) {
		before[r.ID] = true
	}
	runNow(s, job, item, trig, fireAt)
	var out []store.JobRun
	for _, r := range st.allRuns(job) {
		if !before[r.ID] {
			out = append(out, r)
		}
	}
	if len(out) != 1 {
		t.Fatalf("%d runs recorded, want 1: %+v", len(out), out)
	}
	return out[0]
}

// jobInfo is the job's view, as GET /v1/jobs/{name} renders it.
func jobInfo(s *Service, name string) Info { return s.info(s.jobs[name]) }

func ks(ids ...int64) []any {
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}

// TestSQLPageLoop walks an item page by page on every engine: rows in key
// order, process.batch rows per call, on_success.set written for exactly
// the rows processed that still match the where filters, a failed row pushed back by the backoff from the
// clock's now (and fetched again only once that time came), the run's
// counts recorded and the item left with nothing to resume.
func TestSQLPageLoop(t *testing.T) {
	t.Parallel()
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			u := newUserDB(t, engine, 7)
			st, clk := newMemState(), NewFakeClock(sec(5))
			var failedOnce atomic.Bool
			snd := &recSender{answer: func(b *Batch) ([]any, error) {
				if slices.Contains(b.Keys, any(int64(5))) && failedOnce.CompareAndSwap(false, true) {
					return []any{json.Number("5")}, nil
				}
				if slices.Contains(b.Keys, any(int64(6))) {
					// Changed meanwhile by its application: on_success
					// must not overwrite it.
					if _, err := u.db.Exec(`UPDATE bill_0 SET status = 9 WHERE id = 6`); err != nil {
						return nil, err
					}
				}
				return nil, nil
			}}
			s := sqlService(t, st, clk, "n1", snd, billSpec("bill", u))

			r := runOnce(t, s, st, "bill", "0.0.0", "manual", sec(5))
			if want := [][]any{ks(1, 2), ks(3), ks(4, 5), ks(6), ks(7)}; !reflect.DeepEqual(snd.keys(), want) {
				t.Fatalf("batches %v, want %v", snd.keys(), want)
			}
			for _, b := range snd.batches {
				if b.Job != "bill" || b.Item != "0.0.0" || len(b.Rows) != len(b.Keys) {
					t.Fatalf("batch %+v", b)
				}
				if b.Keys[0] == any(int64(4)) {
					if want := map[string]any{"id": int64(4), "x": "bill-4", "y": int64(4)}; !reflect.DeepEqual(b.Rows[0], want) {
						t.Fatalf("row 4 sent as %#v, want %#v", b.Rows[0], want)
					}
				}
			}
			want := map[int64]row{1: {2, 0}, 2: {2, 0}, 3: {2, 0}, 4: {2, 0}, 5: {1, 1}, 6: {9, 0}, 7: {2, 0}, 8: {3, 0}, 9: {3, 0}}
			if got := u.rows(t); !reflect.DeepEqual(got, want) {
				t.Fatalf("rows after the run\n got %v\nwant %v", got, want)
			}
			if !u.nextIs(t, 5, sec(6)) {
				t.Fatal("the failed row is not pushed back to now + backoff")
			}
			if r.Trigger != "manual" || !r.FireAt.Equal(sec(5)) || r.Status != store.RunDone || r.Fetched != 7 || r.Processed != 6 ||
				r.Failed != 1 || r.Left != 0 || r.Cursor != "" || r.Error != "" || !r.EndedAt.Equal(sec(5)) {
				t.Fatalf("run %+v", r)
			}
			if it := st.item("bill", "0.0.0"); it.RunID != "" || it.Cursor != "" || !it.LastFire.Equal(sec(5)) || it.Owner != "n1" {
				t.Fatalf("item %+v", it)
			}

			// Still 03:04:05: the pushed-back row is not due.
			if r := runOnce(t, s, st, "bill", "0.0.0", "manual", sec(5)); r.Fetched != 0 || r.Status != store.RunDone {
				t.Fatalf("second run %+v", r)
			}
			clk.Advance(time.Second)
			if r := runOnce(t, s, st, "bill", "0.0.0", "manual", sec(6)); r.Fetched != 1 || r.Processed != 1 || r.Failed != 0 {
				t.Fatalf("third run %+v", r)
			}
			if got := snd.keys(); len(got) != 6 || !reflect.DeepEqual(got[5], ks(7)) || !reflect.DeepEqual(got[4], ks(6)) {
				t.Fatalf("batches %v", got)
			}
			want[5] = row{2, 1}
			if got := u.rows(t); !reflect.DeepEqual(got, want) {
				t.Fatalf("rows at the end\n got %v\nwant %v", got, want)
			}
		})
	}
}

// TestSQLRowsLeftAfterMaxAttempts: a call that fails fails its batch, a
// row listed in the answer fails alone (its key matched across types);
// each failure doubles the push-back, and after max_attempts a row is
// left: counted once, never fetched again.
func TestSQLRowsLeftAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	u := newUserDB(t, "sqlite", 4)
	st, clk := newMemState(), NewFakeClock(sec(5))
	snd := &recSender{answer: func(b *Batch) ([]any, error) {
		switch b.Keys[0] {
		case any(int64(2)):
			return nil, errors.New("receiver down")
		case any(int64(3)):
			return []any{"3"}, nil
		}
		return nil, nil
	}}
	spec := billSpec("bill", u)
	spec.Batch, spec.MaxAttempts = 1, 2
	s := sqlService(t, st, clk, "n1", snd, spec)

	r := runOnce(t, s, st, "bill", "0.0.0", "cron", sec(5))
	if r.Fetched != 4 || r.Processed != 2 || r.Failed != 2 || r.Left != 0 {
		t.Fatalf("first run %+v", r)
	}
	if !u.nextIs(t, 2, sec(6)) || !u.nextIs(t, 3, sec(6)) {
		t.Fatal("first push-back is not backoff")
	}
	clk.Advance(time.Second)
	r = runOnce(t, s, st, "bill", "0.0.0", "cron", sec(6))
	if r.Fetched != 2 || r.Failed != 2 || r.Left != 2 {
		t.Fatalf("second run %+v", r)
	}
	if !u.nextIs(t, 2, sec(8)) {
		t.Fatal("second push-back is not 2 × backoff")
	}
	clk.Advance(time.Hour)
	if r := runOnce(t, s, st, "bill", "0.0.0", "cron", sec(6).Add(time.Hour)); r.Fetched != 0 {
		t.Fatalf("a row left after max_attempts was fetched again: %+v", r)
	}
	want := map[int64]row{1: {2, 0}, 2: {1, 2}, 3: {1, 2}, 4: {2, 0}, 5: {3, 0}, 6: {3, 0}}
	if got := u.rows(t); !reflect.DeepEqual(got, want) {
		t.Fatalf("rows\n got %v\nwant %v", got, want)
	}
}

// TestSQLStopResumesFromCursor: an item that moves mid-run stops after
// the page at hand with its cursor saved; the next holder resumes after
// that cursor and sends none of the rows done before.
func TestSQLStopResumesFromCursor(t *testing.T) {
	t.Parallel()
	u := newUserDB(t, "sqlite", 6)
	st, clk := newMemState(), NewFakeClock(sec(5))
	spec := billSpec("bill", u)
	spec.Page, spec.Batch = 2, 2
	var n1 *Service
	snd1 := &recSender{answer: func(b *Batch) ([]any, error) {
		if b.Keys[0] == any(int64(3)) {
			n1.SetOwned(nil) // the coordinator moves the item during page 2
		}
		return nil, nil
	}}
	n1 = sqlService(t, st, clk, "n1", snd1, spec)
	n1.OwnAll()
	r1 := runOnce(t, n1, st, "bill", "0.0.0", "cron", sec(0))
	if r1.Status != store.RunMoved || r1.Cursor != "4" || r1.Processed != 4 {
		t.Fatalf("moved run %+v", r1)
	}
	if it := st.item("bill", "0.0.0"); it.RunID != r1.ID || it.Cursor != "4" {
		t.Fatalf("item after the move %+v", it)
	}

	snd2 := &recSender{}
	n2 := sqlService(t, st, clk, "n2", snd2, spec)
	r2 := runOnce(t, n2, st, "bill", "0.0.0", "acquire", time.Time{})
	if got := snd2.keys(); !reflect.DeepEqual(got, [][]any{ks(5, 6)}) {
		t.Fatalf("the next holder sent %v", got)
	}
	if r2.Trigger != "resume" || !r2.FireAt.Equal(sec(0)) || r2.Node != "n2" || r2.Status != store.RunDone || r2.Processed != 2 {
		t.Fatalf("resumed run %+v", r2)
	}
	if it := st.item("bill", "0.0.0"); it.RunID != "" || it.Cursor != "" {
		t.Fatalf("item at the end %+v", it)
	}
	for id, r := range u.rows(t) {
		if id <= 6 && r.status != 2 {
			t.Fatalf("row %d: %+v", id, r)
		}
	}
}

// TestSQLFencedRunStops: a run whose item another node took stops after
// the page in flight; what it delivered is marked, nothing after is sent.
func TestSQLFencedRunStops(t *testing.T) {
	t.Parallel()
	u := newUserDB(t, "sqlite", 6)
	st, clk := newMemState(), NewFakeClock(sec(5))
	spec := billSpec("bill", u)
	spec.Page, spec.Batch = 2, 2
	snd := &recSender{answer: func(b *Batch) ([]any, error) {
		_, err := st.TakeItem(context.Background(), "bill", "0.0.0", "n2", 777, sec(5))
		return nil, err
	}}
	s := sqlService(t, st, clk, "n1", snd, spec)
	runNow(s, "bill", "0.0.0", "manual", sec(5))
	if got := snd.keys(); !reflect.DeepEqual(got, [][]any{ks(1, 2)}) {
		t.Fatalf("sent %v after losing the item", got)
	}
	want := map[int64]row{1: {2, 0}, 2: {2, 0}, 3: {1, 0}, 4: {1, 0}, 5: {1, 0}, 6: {1, 0}, 7: {3, 0}, 8: {3, 0}}
	if got := u.rows(t); !reflect.DeepEqual(got, want) {
		t.Fatalf("rows\n got %v\nwant %v", got, want)
	}
	runs := st.allRuns("bill")
	if len(runs) != 1 || runs[0].Status != store.RunLost || runs[0].Fetched != 0 || runs[0].Cursor != "" {
		t.Fatalf("the stale run wrote after the take: %+v", runs)
	}
	if it := st.item("bill", "0.0.0"); it.Owner != "n2" || it.Token != 777 || it.RunID != runs[0].ID {
		t.Fatalf("item %+v", it)
	}
}

// TestSQLMaxRowsAndSegments: an item takes only its segment's rows (key
// mod segments), and a run ends after max_rows, done, the next run
// starting from the beginning again (the rows set no longer match).
func TestSQLMaxRowsAndSegments(t *testing.T) {
	t.Parallel()
	u := newUserDB(t, "sqlite", 10)
	st, clk := newMemState(), NewFakeClock(sec(5))
	spec := billSpec("bill", u)
	spec.Segments, spec.MaxRows, spec.Page, spec.Batch = 2, 3, 2, 2
	snd := &recSender{}
	s := sqlService(t, st, clk, "n1", snd, spec)
	if got := s.ItemKeys(); !slices.Equal(got, []string{"job:bill:0.0.0", "job:bill:0.0.1"}) {
		t.Fatalf("items %v", got)
	}
	r := runOnce(t, s, st, "bill", "0.0.1", "manual", sec(5))
	if got := snd.keys(); !reflect.DeepEqual(got, [][]any{ks(1, 3), ks(5)}) {
		t.Fatalf("first run sent %v", got)
	}
	if r.Status != store.RunDone || r.Fetched != 3 || r.Cursor != "" {
		t.Fatalf("first run %+v", r)
	}
	runOnce(t, s, st, "bill", "0.0.1", "manual", sec(5))
	if got := snd.keys(); !reflect.DeepEqual(got, [][]any{ks(1, 3), ks(5), ks(7, 9)}) {
		t.Fatalf("second run sent %v", got)
	}
	for id, r := range u.rows(t) {
		want := 1
		switch {
		case id > 10:
			want = 3
		case id%2 == 1:
			want = 2
		}
		if r.status != want {
			t.Errorf("row %d: status %d, want %d", id, r.status, want)
		}
	}
}

// TestIndexAdvice: registering a job EXPLAINs its fetch on every engine
// and names the index that serves it, or says which one to create with a
// statement that runs on the job's engine (issue 25 item 8: MySQL and
// SQLite need the index named): run, the warning goes away.
func TestIndexAdvice(t *testing.T) {
	t.Parallel()
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			u := newUserDB(t, engine, 3)
			s := sqlService(t, newMemState(), NewFakeClock(base), "n1", &recSender{}, billSpec("indexed", u))
			if ic := jobInfo(s, "indexed").Index; !ic.OK || ic.Index != "bill_0_status_id" || ic.Plan == "" || ic.Warning != "" || ic.Table != "bill_0" || ic.DDL != "" {
				t.Fatalf("with the index: %+v", ic)
			}
			drop := "DROP INDEX bill_0_status_id"
			if engine == "mysql" {
				drop += " ON bill_0"
			}
			u.exec(t, drop)
			if err := s.AddSQL(context.Background(), billSpec("unindexed", u)); err != nil {
				t.Fatal(err)
			}
			ic := jobInfo(s, "unindexed").Index
			if ic.OK || ic.Plan == "" || !strings.Contains(ic.Warning, "no index of bill_0 starts with (status, id)") ||
				ic.DDL == "" || !strings.HasSuffix(ic.Warning, ": "+ic.DDL) {
				t.Fatalf("without the index: %+v", ic)
			}
			if _, err := u.db.Exec(ic.DDL); err != nil {
				t.Fatalf("the advice %q does not run on %s: %v", ic.DDL, engine, err)
			}
			if err := s.AddSQL(context.Background(), billSpec("advised", u)); err != nil {
				t.Fatal(err)
			}
			if ic := jobInfo(s, "advised").Index; !ic.OK || ic.Index != "bill_0_status_id" || ic.Warning != "" || ic.DDL != "" {
				t.Fatalf("after the advice ran: %+v", ic)
			}
		})
	}
}

// TestIndexDDLNames: the advised index is named after the table and its
// columns, quoted for the engine, and a name beyond PostgreSQL's 63 bytes
// is cut with a hash of the whole, so two cut alike still differ.
func TestIndexDDLNames(t *testing.T) {
	t.Parallel()
	my := &source{d: srcDialect{name: "mysql"}}
	if got := my.indexDDL("bill_7", []string{"kind", "status", "id"}); got != "CREATE INDEX `bill_7_kind_status_id` ON `bill_7` (`kind`, `status`, `id`)" {
		t.Errorf("mysql: %s", got)
	}
	pg := &source{d: srcDialect{name: "postgres", numbered: true}}
	long := strings.Repeat("t", 60)
	a := pg.indexDDL(long, []string{"status_a", "id"})
	b := pg.indexDDL(long, []string{"status_b", "id"})
	name := func(ddl string) string { return strings.Split(ddl, `"`)[1] }
	if len(name(a)) != 63 || name(a) == name(b) || !strings.HasPrefix(name(a), long[:54]) {
		t.Errorf("long names: %s / %s", a, b)
	}
}

// TestIndexServes: an index serves the fetch when its leading columns are
// the where columns in any order, and the next one is the key.
func TestIndexServes(t *testing.T) {
	t.Parallel()
	where := []string{"kind", "status"}
	for _, c := range []struct {
		cols []string
		want bool
	}{
		{[]string{"kind", "status", "id"}, true},
		{[]string{"status", "kind", "id", "x"}, true},
		{[]string{"status", "id"}, false},
		{[]string{"kind", "status"}, false},
		{[]string{"kind", "id", "status"}, false},
		{[]string{"id"}, false},
	} {
		if got := serves(c.cols, where, "id"); got != c.want {
			t.Errorf("serves(%v) = %v", c.cols, got)
		}
	}
}

// TestAddSQL: registration refuses what cannot run, naming the key, and
// keeps a job whose source does not answer yet (with a warning).
func TestAddSQL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := newUserDB(t, "sqlite", 1)
	none, err := broker.NewSet(nil, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	s := newService(t, newMemState(), NewFakeClock(base), "n1", func(c *Config) {
		c.Senders = map[string]Sender{"http": &recSender{}, "mq": MQSender{Brokers: none}}
	})
	if err := s.AddSQL(ctx, billSpec("bill", u)); err != nil {
		t.Fatal(err)
	}
	for want, mod := range map[string]func(*SQLSpec){
		"name: job \"bill\" is declared twice": func(sp *SQLSpec) {},
		"source.page":                          func(sp *SQLSpec) { sp.Name, sp.Page = "b", -1 },
		"process.target: names broker \"q\"":   func(sp *SQLSpec) { sp.Name, sp.Target = "b", "mq://q/orders" },
		"source.databases[0]: malformed MySQL": func(sp *SQLSpec) { sp.Name, sp.Driver, sp.Databases = "b", "mysql", []string{"no slash"} },
	} {
		sp := billSpec("bill", u)
		mod(&sp)
		if err := s.AddSQL(ctx, sp); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", want, err)
		}
	}
	if s.Len() != 1 {
		t.Fatalf("%d jobs registered", s.Len())
	}
	sp := billSpec("https-job", u)
	sp.Target = "https://x/"
	if err := s.AddSQL(ctx, sp); !errors.Is(err, ErrNoSender) {
		t.Fatalf("a target without a sender: %v", err)
	}

	down := billSpec("down", u)
	down.Driver, down.Databases = "mysql", []string{"root@tcp(127.0.0.1:1)/nothing"}
	if err := s.AddSQL(ctx, down); err != nil {
		t.Fatal(err)
	}
	in := jobInfo(s, "down")
	if ic := in.Index; ic.OK || !strings.HasPrefix(ic.Warning, "source unreachable at registration: source.databases[0]:") {
		t.Fatalf("index check of an unreachable source: %+v", ic)
	}
	// Its statements were never checked: it runs nothing until they are.
	if in.State != StateUnchecked || in.Error != in.Index.Warning {
		t.Fatalf("state %q, error %q", in.State, in.Error)
	}
	st := s.cfg.State.(*memState)
	runNow(s, "down", "0.0.0", "manual", base)
	if runs := st.allRuns("down"); len(runs) != 0 {
		t.Fatalf("an unchecked job ran: %+v", runs)
	}
}
