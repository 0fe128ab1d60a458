package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/internal/testdb"
	"github.com/ontimehq/ontime/outbox"
)

// outboxApp is a user's database: a users table and an outbox table.
type outboxApp struct {
	engine, dsn string
	db          *sql.DB
	tb          outbox.Table
}

func newOutboxApp(t testing.TB, engine string) *outboxApp {
	t.Helper()
	return newOutboxAppAt(t, engine, testdb.DSNs(t, engine, 1)[0])
}

// newOutboxAppAt makes the user's tables in the database of dsn.
func newOutboxAppAt(t testing.TB, engine, dsn string) *outboxApp {
	t.Helper()
	a := &outboxApp{engine: engine, dsn: dsn, db: sqlOpen(t, engine, dsn)}
	tb, err := outbox.NewTable(a.db, "outbox")
	if err != nil {
		t.Fatal(err)
	}
	a.tb = tb
	ddl, err := outbox.DDL(tb.Dialect, tb.Name)
	if err != nil {
		t.Fatal(err)
	}
	ddl = append(ddl, `CREATE TABLE users (account_no VARCHAR(64) NOT NULL)`)
	for _, s := range ddl {
		if _, err := a.db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	return a
}

// register writes a user row and its message in one transaction, then
// commits it or rolls it back.
func (a *outboxApp) register(ctx context.Context, acct string, m outbox.Message, commit bool) error {
	tx, err := a.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	ph := "?"
	if a.engine == "postgres" {
		ph = "$1"
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO users (account_no) VALUES ("+ph+")", acct); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := outbox.Put(ctx, tx, a.tb, m); err != nil {
		_ = tx.Rollback()
		return err
	}
	if !commit {
		return tx.Rollback()
	}
	return tx.Commit()
}

type seqMsg struct {
	K   string `json:"k"`
	Seq int    `json:"seq"`
}

// writeKeys writes keys × perKey messages from writers goroutines, each
// key's messages one after another (each commits before the next begins),
// and for every writer 3 transactions that roll back.
func (a *outboxApp) writeKeys(t *testing.T, keys, perKey, writers int, target string) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for s := range perKey {
				for k := w; k < keys; k += writers {
					key := fmt.Sprintf("acct-%d", k)
					p, _ := json.Marshal(seqMsg{K: key, Seq: s})
					if err := a.register(ctx, key, outbox.Message{Topic: "user.registered", Key: key, Payload: p, Target: target}, true); err != nil {
						errs <- err
						return
					}
				}
				if s < 3 {
					key := fmt.Sprintf("rb-%d", w)
					p, _ := json.Marshal(seqMsg{K: key, Seq: s})
					if err := a.register(ctx, key, outbox.Message{Topic: "user.registered", Key: key, Payload: p, Target: target}, false); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// deliveredMessages counts the messages a receiver took (answered 2xx):
// one delivered twice counts once, by one task or by two.
func deliveredMessages(r *receiver) int {
	n := map[seqMsg]bool{}
	for _, c := range r.allCalls() {
		raw, _ := json.Marshal(c.Body["payload"])
		var m seqMsg
		if json.Unmarshal(raw, &m) == nil && m.K != "" && c.Code/100 == 2 {
			n[m] = true
		}
	}
	return len(n)
}

// checkOrder checks the receiver's calls: every key's messages all
// delivered, in their order (first deliveries), none rolled back, each by
// one task; it returns the number of duplicate deliveries.
func checkOrder(t *testing.T, calls []call, keys, perKey int) int {
	t.Helper()
	seen := map[string]int{} // key → next seq expected
	got := map[seqMsg]int{}
	tasks := map[seqMsg]map[string]bool{} // message → the tasks that delivered it
	dups := 0
	for _, c := range calls {
		raw, _ := json.Marshal(c.Body["payload"])
		var m seqMsg
		if err := json.Unmarshal(raw, &m); err != nil || m.K == "" {
			continue
		}
		if m.K[:3] == "rb-" {
			t.Errorf("a rolled-back message was delivered: %+v", m)
		}
		if tasks[m] == nil {
			tasks[m] = map[string]bool{}
		}
		if tasks[m][c.ID] = true; len(tasks[m]) == 2 {
			// A relay retried (a node killed, an item moved) finds the
			// task it made by its key: a second task is a key check that
			// missed its holder.
			t.Errorf("message %+v became two tasks: %v", m, tasks[m])
		}
		got[m]++
		if got[m] > 1 {
			dups++
			continue
		}
		if m.Seq != seen[m.K] {
			t.Errorf("key %s: message %d delivered when %d was next", m.K, m.Seq, seen[m.K])
		}
		seen[m.K] = m.Seq + 1
	}
	for k := range keys {
		if n := seen[fmt.Sprintf("acct-%d", k)]; n != perKey {
			t.Errorf("key acct-%d: %d messages delivered in order, want %d", k, n, perKey)
		}
	}
	return dups
}

func outboxNode(t testing.TB, cfg ontime.Config) *ontime.Node {
	t.Helper()
	ctx := context.Background()
	node, err := ontime.NewNode(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = node.Stop(ctx)
	})
	return node
}

func outboxConfig(engine, dsn string) ontime.OutboxConfig {
	return ontime.OutboxConfig{Name: "main", Driver: engine, Databases: []string{dsn}, Table: "outbox",
		IdlePoll: ontime.Duration(50 * time.Millisecond)}
}

func countRows(t *testing.T, db *sql.DB, where string) int {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM outbox WHERE " + where).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestOutboxRelayEveryEngine: on each engine, messages written by 4
// concurrent writers in the users' transactions are each delivered once,
// every key's in the order written; rolled-back ones never; a delayed one
// not before its due time; malformed rows are set aside, with the error,
// and stall nothing; delivered rows are deleted.
func TestOutboxRelayEveryEngine(t *testing.T) {
	t.Parallel()
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			app := newOutboxApp(t, engine)
			rcv := newReceiver(t)
			// Malformed rows written by hand: a topic with a space, a
			// payload that is not JSON, written before everything else.
			if _, err := app.db.Exec(`INSERT INTO outbox (topic, msg_key, payload, target) VALUES ('bad topic', 'acct-0', 'null', '` + rcv.srv.URL + `')`); err != nil {
				t.Fatal(err)
			}
			if _, err := app.db.Exec(`INSERT INTO outbox (topic, msg_key, payload, target) VALUES ('user.registered', '', 'not json', '` + rcv.srv.URL + `')`); err != nil {
				t.Fatal(err)
			}
			cfg := ontime.DefaultConfig()
			cfg.DataDir = t.TempDir()
			cfg.Outboxes = []ontime.OutboxConfig{outboxConfig(engine, app.dsn)}
			node := outboxNode(t, cfg)
			const keys, perKey = 12, 6
			app.writeKeys(t, keys, perKey, 4, rcv.srv.URL)
			due := time.Now().Add(1500 * time.Millisecond)
			if err := app.register(context.Background(), "late", outbox.Message{Topic: "user.late", Key: "late", DueAt: due,
				Payload: json.RawMessage(`{"late":true}`), Target: rcv.srv.URL}, true); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 4*time.Minute, "every message delivered", func() bool { return len(rcv.delivered()) >= keys*perKey+1 })
			calls := rcv.allCalls()
			if dups := checkOrder(t, calls, keys, perKey); dups != 0 {
				t.Errorf("%d duplicate deliveries without a crash", dups)
			}
			for _, c := range calls {
				if c.Body["topic"] == "user.late" && c.At.Before(due) {
					t.Errorf("delivered at %s, before its due time %s", c.At, due)
				}
			}
			waitFor(t, 30*time.Second, "delivered rows deleted", func() bool { return countRows(t, app.db, "status <> 3") == 0 })
			if n := countRows(t, app.db, "status = 3 AND last_error <> ''"); n != 2 {
				t.Errorf("%d rows set aside with an error, want 2", n)
			}
			// The status (GET /v1/outboxes) shows them on every engine.
			l, err := node.Outboxes(context.Background())
			if err != nil || len(l.Outboxes) != 1 || len(l.Outboxes[0].Tables) != 1 {
				t.Fatalf("outboxes: %v %+v", err, l)
			}
			if tv := l.Outboxes[0].Tables[0]; tv.Error != "" || tv.SetAside != 2 || len(tv.SetAsideSample) != 2 || tv.Waiting != 0 ||
				tv.HeldKeys != 0 || tv.Relayed < keys*perKey+1 || tv.SetAsideSample[0].Error == "" {
				t.Errorf("outbox status %+v", tv)
			}
		})
	}
}

// TestOutboxRelayFailover: two nodes relay one MariaDB outbox of 4
// segments (their items split by the database coordinator); one node
// stops while messages are written; the other takes its items and every
// message is delivered, every key's in order.
func TestOutboxRelayFailover(t *testing.T) {
	t.Parallel()
	app := newOutboxApp(t, "mysql")
	rcv := newReceiver(t)
	store := testdb.DSNs(t, "postgres", 1)
	nodeCfg := func(id string) ontime.Config {
		cfg := ontime.DefaultConfig()
		cfg.NodeID = id
		cfg.DataDir = t.TempDir()
		cfg.Store.Driver = "postgres"
		cfg.Store.Databases = store
		cfg.Cluster.Coordinator = "database"
		cfg.Cluster.LeaseTTL = ontime.Duration(2 * time.Second)
		cfg.Delivery.LeaseTTL = ontime.Duration(2 * time.Second)
		oc := outboxConfig("mysql", app.dsn)
		oc.Segments = 4
		cfg.Outboxes = []ontime.OutboxConfig{oc}
		return cfg
	}
	ctx := context.Background()
	n1, err := ontime.NewNode(ctx, nodeCfg("o1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := n1.Start(ctx); err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = n1.Stop(context.Background())
		}
	})
	n2 := outboxNode(t, nodeCfg("o2"))
	api := httptest.NewServer(n2.HTTPHandler())
	defer api.Close()
	waitFor(t, 30*time.Second, "the outbox's items split over both nodes", func() bool {
		var v apiv1.JobView
		if getJSON(t, api.URL+"/v1/jobs/outbox.main", &v) != http.StatusOK {
			return false
		}
		owners := map[string]bool{}
		for _, it := range v.ItemStates {
			owners[it.Owner] = true
		}
		return owners["o1"] && owners["o2"]
	})
	const keys, perKey = 16, 10
	done := make(chan struct{})
	go func() {
		defer close(done)
		app.writeKeys(t, keys, perKey, 4, rcv.srv.URL)
	}()
	waitFor(t, 60*time.Second, "some messages delivered", func() bool { return len(rcv.delivered()) >= keys*perKey/4 })
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := n1.Stop(sctx); err != nil {
		t.Fatal(err)
	}
	stopped = true
	<-done
	waitFor(t, 90*time.Second, "every message delivered after the failover", func() bool { return len(rcv.delivered()) >= keys*perKey })
	checkOrder(t, rcv.allCalls(), keys, perKey)
	waitFor(t, 30*time.Second, "delivered rows deleted", func() bool { return countRows(t, app.db, "1 = 1") == 0 })
}

// TestOutboxReRelayFindsItsTask: a relay that died after submitting a
// message's task but before recording it leaves the row waiting; the next
// relay finds the task it made (same key) instead of making a second one,
// and the message is delivered once.
func TestOutboxReRelayFindsItsTask(t *testing.T) {
	t.Parallel()
	app := newOutboxApp(t, "sqlite")
	rcv := newReceiver(t)
	due := time.Now().Add(2 * time.Second)
	if err := app.register(context.Background(), "a", outbox.Message{Topic: "user.registered", Key: "acct-1", DueAt: due,
		Payload: json.RawMessage(`{"k":"acct-1","seq":0}`), Target: rcv.srv.URL}, true); err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	// The dead relay's submit: the task of row 1 of database 0, table 0.
	cfg := ontime.DefaultConfig()
	cfg.DataDir = dataDir
	ctx := context.Background()
	n1, err := ontime.NewNode(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := n1.Start(ctx); err != nil {
		t.Fatal(err)
	}
	first, created, err := n1.Submit(ctx, ontime.TaskSpec{Topic: "user.registered", Key: "acct-1#main/0.0/1", DueAt: due,
		Payload: json.RawMessage(`{"k":"acct-1","seq":0}`), Target: rcv.srv.URL})
	if err != nil || !created {
		t.Fatal(created, err)
	}
	if err := n1.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	cfg.Outboxes = []ontime.OutboxConfig{outboxConfig("sqlite", app.dsn)}
	outboxNode(t, cfg)
	waitFor(t, 60*time.Second, "the message delivered and its row deleted", func() bool {
		return len(rcv.delivered()) >= 1 && countRows(t, app.db, "1 = 1") == 0
	})
	time.Sleep(500 * time.Millisecond) // a second task would be due already
	if d := rcv.delivered(); len(d) != 1 || d[first.ID] != 1 {
		t.Fatalf("deliveries %v, want one of task %s", d, first.ID)
	}
}

// TestOutboxWakeUp: with idle_poll at its longest (1 minute), messages are
// relayed by a pass that a wake-up started, not by the poll: on PostgreSQL
// the table's trigger notifies the relay (LISTEN); on SQLite the writer
// wakes the embedded node (Node.WakeOutbox) after committing. Counted by
// ontime_outbox_passes_total{cause="wake",found="true"}; without wake-ups
// there is no such pass. Every message is delivered.
func TestOutboxWakeUp(t *testing.T) {
	t.Parallel()
	for _, engine := range []string{"postgres", "sqlite"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			app := newOutboxApp(t, engine)
			rcv := newReceiver(t)
			cfg := ontime.DefaultConfig()
			cfg.DataDir = t.TempDir()
			oc := outboxConfig(engine, app.dsn)
			oc.IdlePoll = ontime.Duration(time.Minute)
			cfg.Outboxes = []ontime.OutboxConfig{oc}
			node := outboxNode(t, cfg)
			api := httptest.NewServer(node.HTTPHandler())
			defer api.Close()
			woken := `ontime_outbox_passes_total{cause="wake",found="true",outbox="main"}`
			const n = 5
			for i := range n {
				// A relay that has just finished a row polls every few
				// milliseconds and backs off from there; a message written
				// then may be found by a poll already under way, before its
				// wake-up lands (CI saw all five go that way). After a pause
				// the relay waits more than a second between polls, so the
				// wake-up is what finds the message.
				time.Sleep(1500 * time.Millisecond)
				key := fmt.Sprintf("acct-%d", i)
				p, _ := json.Marshal(seqMsg{K: key, Seq: 0})
				if err := app.register(context.Background(), key, outbox.Message{Topic: "user.registered", Key: key, Payload: p, Target: rcv.srv.URL}, true); err != nil {
					t.Fatal(err)
				}
				if engine == "sqlite" {
					if err := node.WakeOutbox("main"); err != nil {
						t.Fatal(err)
					}
				}
				waitFor(t, 50*time.Second, "the message delivered", func() bool { return len(rcv.delivered()) >= i+1 })
			}
			checkOrder(t, rcv.allCalls(), n, 1)
			if c := counter(t, api.URL, woken); c < 1 {
				t.Fatalf("%s = %v: no message was relayed by a woken pass", woken, c)
			}
			if err := node.WakeOutbox("nope"); !errors.Is(err, ontime.ErrNotFound) {
				t.Fatalf("WakeOutbox of an unknown outbox: %v", err)
			}
		})
	}
}
