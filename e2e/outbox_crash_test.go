package e2e

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/internal/testdb"
	"github.com/ontimehq/ontime/outbox"
)

// TestOutboxServerCrash: the relay's own writes to a PostgreSQL outbox
// table commit without waiting for the disk (synchronous_commit off), so a
// crash of the outbox's server may undo the last of them: rows it had put
// in flight come back waiting, rows it had deleted come back. The outbox is
// on a private server (its own data directory and port) whose WAL writer
// waits 10 s, so that the last commits are still in its memory when it is
// stopped with -m immediate; the task store is on the shared server. Then,
// so that the test does not depend on what the crash happened to undo,
// rows of delivered messages are put back as such a crash leaves them
// (waiting, and in flight with their task). Every message is delivered
// once, in its key's order, and every row is finished again.
func TestOutboxServerCrash(t *testing.T) {
	t.Parallel()
	const keys, perKey = 40, 5
	// Its WAL writer waits 10 s between rounds: commits that do not wait
	// for the disk stay in the server's memory until then.
	pg := testdb.StartPostgres(t, "autovacuum=off", "wal_writer_delay=10s")
	dsn := pg.CreateDatabase()
	app := newOutboxAppAt(t, "postgres", dsn)
	rcv := newReceiver(t)
	cfg := ontime.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Store.Driver = "postgres"
	cfg.Store.Databases = testdb.DSNs(t, "postgres", 1)
	cfg.Outboxes = []ontime.OutboxConfig{outboxConfig("postgres", dsn)}
	outboxNode(t, cfg)

	// Half the messages, relayed and finished; the crash; the other half.
	app.writeKeys(t, keys, perKey/2, 4, rcv.srv.URL)
	waitFor(t, 60*time.Second, "the first messages delivered and their rows finished", func() bool {
		return len(rcv.delivered()) >= keys*(perKey/2) && countRows(t, app.db, "1 = 1") == 0
	})
	pg.Crash()
	pg.Start()
	first := len(rcv.allCalls())
	// The test's own pooled connections died with the server: the first
	// queries may fail.
	back := -1
	waitFor(t, 30*time.Second, "the outbox readable after the restart", func() bool {
		return app.db.QueryRow(`SELECT COUNT(*) FROM outbox`).Scan(&back) == nil
	})
	t.Logf("the crash undid the relay's last writes to %d rows", back)

	// A crash that undid more: delivered messages' rows back, a third
	// waiting (their in-flight mark lost), a third in flight with their
	// task (their deletion lost). Their task keys name the rows.
	restored := 0
	for i, c := range rcv.allCalls() {
		if i%3 == 2 {
			continue
		}
		key, _ := c.Body["key"].(string)
		msgKey, where, ok := strings.Cut(key, "#")
		id, err := strconv.ParseInt(where[strings.LastIndexByte(where, '/')+1:], 10, 64)
		if !ok || err != nil {
			t.Fatalf("task key %q does not name its row", key)
		}
		payload, _ := json.Marshal(c.Body["payload"])
		status, taskID := outbox.StatusWaiting, ""
		if i%3 == 1 {
			status, taskID = outbox.StatusInFlight, c.ID
		}
		if _, err := app.db.Exec(`INSERT INTO outbox (id, topic, msg_key, key_shard, payload, target, status, task_id) OVERRIDING SYSTEM VALUE
			VALUES ($1, 'user.registered', $2, $3, $4, $5, $6, $7) ON CONFLICT (id) DO UPDATE SET status = EXCLUDED.status, task_id = EXCLUDED.task_id`,
			id, msgKey, outbox.KeyShard(msgKey), payload, rcv.srv.URL, status, taskID); err != nil {
			t.Fatal(err)
		}
		restored++
	}
	t.Logf("%d rows of delivered messages put back", restored)

	// The second half: the same keys, their messages numbered from 0
	// again, behind the rows put back.
	app.writeKeys(t, keys, perKey, 4, rcv.srv.URL)
	waitFor(t, 90*time.Second, "every row finished", func() bool { return countRows(t, app.db, "1 = 1") == 0 })
	time.Sleep(time.Second) // a message relayed twice would be delivered by now

	// No task delivered twice, none made twice (each half's messages
	// once, in their key's order).
	for id, n := range rcv.delivered() {
		if n != 1 {
			t.Errorf("task %s delivered %d times", id, n)
		}
	}
	calls := rcv.allCalls()
	if dups := checkOrder(t, calls[:first], keys, perKey/2); dups != 0 {
		t.Errorf("%d duplicate deliveries before the crash", dups)
	}
	if dups := checkOrder(t, calls[first:], keys, perKey); dups != 0 {
		t.Errorf("%d duplicate deliveries after the crash", dups)
	}
}
