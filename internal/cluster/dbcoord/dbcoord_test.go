package dbcoord

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/ontimehq/ontime/internal/testdb"
)

type node struct {
	id     string
	db     *sql.DB
	c      *Coordinator
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	items  []string
	term   int64
}

func (n *node) owned() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.items)
}

func openDB(t *testing.T, engine, dsn string) *sql.DB {
	t.Helper()
	driver := map[string]string{"sqlite": "sqlite", "mysql": "mysql", "postgres": "pgx"}[engine]
	if engine == "sqlite" {
		dsn = "file:" + dsn + "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)"
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func startNode(t *testing.T, engine, dsn, id string, items []string, ttl time.Duration) *node {
	t.Helper()
	n := &node{id: id, db: openDB(t, engine, dsn), done: make(chan struct{})}
	if err := Migrate(context.Background(), n.db, engine); err != nil {
		t.Fatal(err)
	}
	c, err := New(Config{DB: n.db, Dialect: engine, NodeID: id, Addr: "127.0.0.1:0", TTL: ttl, Items: items,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil)),
		OnAssign: func(term int64, its []string) {
			n.mu.Lock()
			n.items, n.term = its, term
			n.mu.Unlock()
		}})
	if err != nil {
		t.Fatal(err)
	}
	n.c = c
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	go func() {
		defer close(n.done)
		_ = c.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-n.done })
	return n
}

// crash stops a node the way kill -9 does: its connections die, it never
// says goodbye. (Closing the pool makes every later query fail.)
func (n *node) crash() {
	n.db.Close()
	n.cancel()
	<-n.done
}

func waitBalanced(t *testing.T, nodes []*node, items []string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		owner := map[string]string{}
		ok := true
		lo, hi := len(items), 0
		for _, n := range nodes {
			mine := n.owned()
			lo, hi = min(lo, len(mine)), max(hi, len(mine))
			for _, it := range mine {
				if prev, dup := owner[it]; dup {
					// Two live nodes owning one item at once is the bug this guards.
					t.Fatalf("item %s owned by %s and %s", it, prev, n.id)
				}
				owner[it] = n.id
			}
		}
		if len(owner) != len(items) || hi-lo > 1 {
			ok = false
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not balanced within %s: %d of %d items owned, counts %d..%d", within, len(owner), len(items), lo, hi)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestElectAssignFailover(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			dsn := testdb.DSNs(t, engine, 1)[0]
			items := make([]string, 64)
			for i := range items {
				items[i] = fmt.Sprintf("0.%d.%d", i/4, i%4)
			}
			const ttl = 900 * time.Millisecond
			a := startNode(t, engine, dsn, "a", items, ttl)
			b := startNode(t, engine, dsn, "b", items, ttl)
			c := startNode(t, engine, dsn, "c", items, ttl)
			all := []*node{a, b, c}
			waitBalanced(t, all, items, 20*time.Second)

			st, err := a.c.Status(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if st.Leader == "" || st.Term < 1 || len(st.Nodes) != 3 {
				t.Fatalf("status: %+v", st)
			}
			// Kill the leader: a new leader with a higher term, its items move.
			var leader *node
			for _, n := range all {
				if n.id == st.Leader {
					leader = n
				}
			}
			leader.crash()
			var rest []*node
			for _, n := range all {
				if n != leader {
					rest = append(rest, n)
				}
			}
			waitBalanced(t, rest, items, 20*time.Second)
			st2, err := rest[0].c.Status(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if st2.Leader == "" || st2.Leader == leader.id || st2.Term <= st.Term {
				t.Fatalf("after leader death: leader %q term %d (was %q term %d)", st2.Leader, st2.Term, st.Leader, st.Term)
			}
			// A fourth node joins: balanced again, the survivors keep most items.
			before := map[string][]string{}
			for _, n := range rest {
				before[n.id] = n.owned()
			}
			d := startNode(t, engine, dsn, "d", items, ttl)
			waitBalanced(t, append(rest, d), items, 20*time.Second)
			for _, n := range rest {
				kept := 0
				for _, it := range n.owned() {
					if slices.Contains(before[n.id], it) {
						kept++
					}
				}
				if kept != len(n.owned()) {
					t.Errorf("node %s gained items on a join (%d of %d kept)", n.id, kept, len(n.owned()))
				}
			}
		})
	}
}

func TestConfigValidation(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Fatal("nil DB accepted")
	}
	db := openDB(t, "sqlite", testdb.SQLite(t))
	if _, err := New(Config{DB: db, Dialect: "oracle", NodeID: "a"}); err == nil {
		t.Fatal("bad dialect accepted")
	}
	if _, err := New(Config{DB: db, Dialect: "sqlite", NodeID: "a", TTL: time.Millisecond}); err == nil {
		t.Fatal("tiny TTL accepted")
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
