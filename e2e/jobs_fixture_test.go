package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver
	_ "modernc.org/sqlite"             // the "sqlite" driver

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/internal/testdb"
)

// billDB is one database of users' tables bill_0 … bill_{n-1}, seed 000's
// bill(id, status, x, y, z) with seed 003's retry_count and
// next_select_time, and the index the job's fetch needs: (status, id).
type billDB struct {
	engine string
	dsn    string
	db     *sql.DB
}

func sqlOpen(t testing.TB, engine, dsn string) *sql.DB {
	t.Helper()
	driver := map[string]string{"mysql": "mysql", "postgres": "pgx", "sqlite": "sqlite"}[engine]
	if engine == "mysql" {
		mc, err := mysql.ParseDSN(dsn)
		if err != nil {
			t.Fatal(err)
		}
		mc.InterpolateParams = true
		dsn = mc.FormatDSN()
	}
	if engine == "sqlite" {
		dsn = "file:" + dsn + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)"
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// newBillDB creates a fresh database of the engine with tables bill_0 …
// with rows rows each, every row status 1.
func newBillDB(t testing.TB, engine string, tables, rows int) *billDB {
	t.Helper()
	dsn := testdb.DSNs(t, engine, 1)[0]
	b := &billDB{engine: engine, dsn: dsn, db: sqlOpen(t, engine, dsn)}
	ctx := context.Background()
	next := "DATETIME(3) NULL"
	switch engine {
	case "postgres":
		next = "TIMESTAMPTZ NULL"
	case "sqlite":
		next = "TEXT NULL"
	}
	for i := range tables {
		name := fmt.Sprintf("bill_%d", i)
		stmts := []string{
			fmt.Sprintf(`CREATE TABLE %s (id BIGINT NOT NULL PRIMARY KEY, status INT NOT NULL, x VARCHAR(64) NOT NULL, y INT NOT NULL, z INT NOT NULL,
				retry_count INT NOT NULL DEFAULT 0, next_select_time %s)`, name, next),
			fmt.Sprintf(`CREATE INDEX %s_status_id ON %s (status, id)`, name, name),
		}
		for _, s := range stmts {
			if _, err := b.db.ExecContext(ctx, s); err != nil {
				t.Fatalf("%s: %v", s, err)
			}
		}
		for lo := 1; lo <= rows; lo += 1000 {
			hi := min(lo+999, rows)
			var sb strings.Builder
			sb.WriteString("INSERT INTO " + name + " (id, status, x, y, z) VALUES ")
			for id := lo; id <= hi; id++ {
				if id > lo {
					sb.WriteString(",")
				}
				fmt.Fprintf(&sb, "(%d, 1, 'bill-%d-%d', %d, %d)", id, i, id, id%97, id%13)
			}
			if _, err := b.db.ExecContext(ctx, sb.String()); err != nil {
				t.Fatalf("insert into %s: %v", name, err)
			}
		}
	}
	return b
}

// count counts rows of the tables with status st.
func (b *billDB) count(t testing.TB, tables, st int) int {
	t.Helper()
	total := 0
	for i := range tables {
		var n int
		q := fmt.Sprintf("SELECT COUNT(*) FROM bill_%d WHERE status = %d", i, st)
		if err := b.db.QueryRowContext(context.Background(), q).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		total += n
	}
	return total
}

// jobReceiver is a webhook endpoint of a SQL job: it records every row it
// got by (item's database and table, id).
type jobReceiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	// rows counts deliveries per "db.table/id".
	rows  map[string]int
	calls int
	// fail, when set, names rows to answer as failed ({"failed": [id…]}).
	fail func(item string, id int64) bool
	// status, when set, answers a whole call with this HTTP status when != 0.
	status func() int
}

func newJobReceiver(t testing.TB) *jobReceiver {
	r := &jobReceiver{rows: map[string]int{}}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

type jobCall struct {
	Job  string           `json:"job"`
	Item string           `json:"item"`
	Rows []map[string]any `json:"rows"`
}

func (r *jobReceiver) serve(w http.ResponseWriter, req *http.Request) {
	raw, _ := io.ReadAll(req.Body)
	var c jobCall
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	if err := dec.Decode(&c); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	status, fail := r.status, r.fail
	r.mu.Unlock()
	if status != nil {
		if s := status(); s != 0 {
			w.WriteHeader(s)
			return
		}
	}
	dbTable := c.Item[:strings.LastIndexByte(c.Item, '.')]
	var failed []int64
	r.mu.Lock()
	r.calls++
	for _, row := range c.Rows {
		id, _ := row["id"].(json.Number).Int64()
		if fail != nil && fail(c.Item, id) {
			failed = append(failed, id)
			continue
		}
		r.rows[fmt.Sprintf("%s/%d", dbTable, id)]++
	}
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if len(failed) > 0 {
		_ = json.NewEncoder(w).Encode(map[string]any{"failed": failed})
		return
	}
	w.WriteHeader(http.StatusOK)
}

// delivered returns how many distinct rows arrived and how many arrived
// more than once.
func (r *jobReceiver) delivered() (rows, dups int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.rows {
		if n > 1 {
			dups += n - 1
		}
	}
	return len(r.rows), dups
}

// waitRows waits until the receiver has want distinct rows.
func (r *jobReceiver) waitRows(t *testing.T, d time.Duration, want int) {
	t.Helper()
	waitFor(t, d, fmt.Sprintf("%d rows delivered", want), func() bool {
		n, _ := r.delivered()
		return n >= want
	})
}

// startJobNode runs an in-process node (SQLite task store) with its API on
// a real socket and returns the API's base URL.
func startJobNode(t *testing.T, mod func(*ontime.Config)) (string, *ontime.Node) {
	t.Helper()
	cfg := ontime.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Store.Tables = 2
	cfg.Store.Segments = 1
	if mod != nil {
		mod(&cfg)
	}
	return runNode(t, cfg)
}
