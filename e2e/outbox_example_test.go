package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/internal/testdb"
	"github.com/ontimehq/ontime/outbox"
)

// registerUser is README's seed-003 example ("Transactional outbox, end to
// end"): the user row and its two messages — to the coupon service's
// webhook and to a RabbitMQ queue — commit together or not at all. Both
// have the account as key: the webhook's is delivered first, then the
// queue's.
func registerUser(ctx context.Context, db *sql.DB, table outbox.Table, acct, couponURL, couponQueue string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // a no-op once committed
	if _, err := tx.ExecContext(ctx, "INSERT INTO users (account_no) VALUES ($1)", acct); err != nil {
		return err
	}
	body, err := json.Marshal(map[string]string{"account_no": acct, "coupon": "WELCOME10"})
	if err != nil {
		return err
	}
	if err := outbox.PutMany(ctx, tx, table,
		outbox.Message{Topic: "user.registered", Key: acct, Payload: body, Target: couponURL},
		outbox.Message{Topic: "user.registered", Key: acct, Payload: body, Target: "mq://rabbit//" + couponQueue},
	); err != nil {
		return err
	}
	return tx.Commit()
}

// TestOutboxSeed003Example runs README's example on PostgreSQL with a node
// whose config has the outbox and the broker "rabbit": a registered user's
// coupon reaches the webhook and the queue; a registration that fails
// (its user row refused) sends nothing.
func TestOutboxSeed003Example(t *testing.T) {
	t.Parallel()
	app := newOutboxApp(t, "postgres")
	if _, err := app.db.Exec(`ALTER TABLE users ADD CONSTRAINT users_acct_unique UNIQUE (account_no)`); err != nil {
		t.Fatal(err)
	}
	coupons := newReceiver(t)
	queue := testdb.Unique("coupons_")
	conn := amqpDial(t, testdb.AMQPURL())
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(queue, false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	msgs, err := ch.Consume(queue, "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}

	cfg := ontime.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Brokers = map[string]string{"rabbit": testdb.AMQPURL()}
	cfg.Outboxes = []ontime.OutboxConfig{{Name: "main", Driver: "postgres", Databases: []string{app.dsn}, Table: "outbox"}}
	outboxNode(t, cfg)

	ctx := context.Background()
	if err := registerUser(ctx, app.db, app.tb, "acct-1001", coupons.srv.URL, queue); err != nil {
		t.Fatal(err)
	}
	// The same account again: the user row is refused, the transaction
	// rolls back, and its messages with it.
	if err := registerUser(ctx, app.db, app.tb, "acct-1001", coupons.srv.URL, queue); err == nil {
		t.Fatal("a second registration of one account committed")
	}
	select {
	case m := <-msgs:
		if !strings.Contains(string(m.Body), `acct-1001`) || !strings.Contains(string(m.Body), "WELCOME10") {
			t.Fatalf("queue message %q", m.Body)
		}
	case <-time.After(5 * time.Minute):
		t.Fatal("no message on the queue")
	}
	waitFor(t, 2*time.Minute, "the coupon webhook called", func() bool { return len(coupons.delivered()) == 1 })
	if c := coupons.allCalls(); len(c) != 1 || !strings.Contains(mustJSON(t, c[0].Body["payload"]), "WELCOME10") {
		t.Fatalf("webhook calls %+v", c)
	}
	waitFor(t, 30*time.Second, "the outbox emptied", func() bool { return countRows(t, app.db, "1 = 1") == 0 })
	select {
	case m := <-msgs:
		t.Fatalf("a second queue message %q: the rolled-back registration was sent", m.Body)
	default:
	}
	if len(coupons.allCalls()) != 1 {
		t.Fatalf("webhook calls %+v", coupons.allCalls())
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
