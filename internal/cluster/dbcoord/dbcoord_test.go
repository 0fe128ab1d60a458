package dbcoord

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/ontimehq/ontime/internal/cluster/clustertest"
	"github.com/ontimehq/ontime/internal/testdb"
)

type node struct {
	*clustertest.Recorder
	db     *sql.DB
	c      *Coordinator
	cancel context.CancelFunc
	done   chan struct{}
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
	n := &node{Recorder: &clustertest.Recorder{ID: id}, db: openDB(t, engine, dsn), done: make(chan struct{})}
	if err := Migrate(context.Background(), n.db, engine); err != nil {
		t.Fatal(err)
	}
	c, err := New(Config{DB: n.db, Dialect: engine, NodeID: id, Addr: "127.0.0.1:0", TTL: ttl, Items: items,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil)), OnAssign: n.OnAssign})
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

func recs(ns []*node) []*clustertest.Recorder {
	out := make([]*clustertest.Recorder, len(ns))
	for i, n := range ns {
		out[i] = n.Recorder
	}
	return out
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
			const ttl = 1500 * time.Millisecond
			a := startNode(t, engine, dsn, "a", items, ttl)
			b := startNode(t, engine, dsn, "b", items, ttl)
			c := startNode(t, engine, dsn, "c", items, ttl)
			all := []*node{a, b, c}
			clustertest.WaitBalanced(t, recs(all), items, 20*time.Second)

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
				if n.ID == st.Leader {
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
			clustertest.WaitBalanced(t, recs(rest), items, 20*time.Second)
			st2, err := rest[0].c.Status(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if st2.Leader == "" || st2.Leader == leader.ID || st2.Term <= st.Term {
				t.Fatalf("after leader death: leader %q term %d (was %q term %d)", st2.Leader, st2.Term, st.Leader, st.Term)
			}
			// A fourth node joins: balanced again, the survivors keep most items.
			before := map[string][]string{}
			for _, n := range rest {
				before[n.ID] = n.Owned()
			}
			d := startNode(t, engine, dsn, "d", items, ttl)
			clustertest.WaitBalanced(t, recs(append(rest, d)), items, 20*time.Second)
			clustertest.KeptOnJoin(t, before, recs(rest))
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
