package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ontimehq/ontime/internal/sqldb"
	"github.com/ontimehq/ontime/internal/testdb"
	"github.com/ontimehq/ontime/outbox"
)

func TestValidateNamesTheField(t *testing.T) {
	t.Parallel()
	ok := outbox.Message{Topic: "user.registered", Key: "acct-1", Payload: json.RawMessage(`{"a":1}`), Target: "https://x.example/h"}
	cases := []struct {
		field string
		edit  func(m *outbox.Message)
	}{
		{"topic", func(m *outbox.Message) { m.Topic = "" }},
		{"topic", func(m *outbox.Message) { m.Topic = "a b" }},
		{"key", func(m *outbox.Message) { m.Key = strings.Repeat("k", outbox.MaxKeyLen+1) }},
		{"key", func(m *outbox.Message) { m.Key = "a\nb" }},
		{"key", func(m *outbox.Message) { m.Key = "\xff" }},
		{"payload", func(m *outbox.Message) { m.Payload = json.RawMessage(`{"a":`) }},
		{"payload", func(m *outbox.Message) {
			m.Payload = json.RawMessage(`"` + strings.Repeat("x", outbox.MaxPayloadBytes) + `"`)
		}},
		{"target", func(m *outbox.Message) { m.Target = "ftp://x" }},
		{"target", func(m *outbox.Message) { m.Target = "mq://" }},
		{"due_at", func(m *outbox.Message) { m.DueAt, m.Delay = time.Now(), time.Second }},
		{"due_at", func(m *outbox.Message) { m.DueAt = time.Now().Add(11 * 365 * 24 * time.Hour) }},
		{"delay", func(m *outbox.Message) { m.Delay = -time.Second }},
		{"max_attempts", func(m *outbox.Message) { m.MaxAttempts = -1 }},
		{"max_attempts", func(m *outbox.Message) { m.MaxAttempts = outbox.MaxAttempts + 1 }},
	}
	if err := outbox.Validate(ok); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		m := ok
		c.edit(&m)
		err := outbox.Validate(m)
		var fe *outbox.FieldError
		if !errors.As(err, &fe) || fe.Field != c.field || !errors.Is(err, outbox.ErrInvalid) {
			t.Errorf("%s: got %v", c.field, err)
		}
	}
}

// TestPutEveryEngine: Put and PutMany write in the caller's transaction on
// each engine; a rolled-back transaction leaves nothing; an invalid
// message in PutMany writes nothing and names its index.
func TestPutEveryEngine(t *testing.T) {
	t.Parallel()
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dsn := testdb.DSNs(t, engine, 1)[0]
			db, err := sqldb.Open(engine, dsn, sqldb.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			tb, err := outbox.NewTable(db, "outbox")
			if err != nil || tb.Dialect != outbox.Dialect(engine) {
				t.Fatalf("detected %v %v", tb, err)
			}
			ddl, err := outbox.DDL(tb.Dialect, tb.Name)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range ddl {
				if _, err := db.ExecContext(ctx, s); err != nil {
					t.Fatalf("%s: %v", s, err)
				}
			}
			due := time.Now().Add(time.Hour).Truncate(time.Microsecond)
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := outbox.Put(ctx, tx, tb, outbox.Message{Topic: "t.one", Key: "k", Payload: json.RawMessage(`{"n":1}`), DueAt: due, MaxAttempts: 3}); err != nil {
				t.Fatal(err)
			}
			if err := outbox.PutMany(ctx, tx, tb, outbox.Message{Topic: "t.many", Key: "k"}, outbox.Message{Topic: "t.many", Delay: time.Minute}); err != nil {
				t.Fatal(err)
			}
			err = outbox.PutMany(ctx, tx, tb, outbox.Message{Topic: "t.bad"}, outbox.Message{Topic: "t bad"})
			var fe *outbox.FieldError
			if !errors.As(err, &fe) || fe.Field != "messages[1].topic" {
				t.Fatalf("invalid PutMany: %v", err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			tx, err = db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := outbox.Put(ctx, tx, tb, outbox.Message{Topic: "t.rolledback"}); err != nil {
				t.Fatal(err)
			}
			if err := tx.Rollback(); err != nil {
				t.Fatal(err)
			}
			if engine == "postgres" {
				conn, err := pgx.Connect(ctx, dsn)
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close(ctx)
				ptx, err := conn.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if err := outbox.PutManyPgx(ctx, ptx, "outbox", outbox.Message{Topic: "t.pgx", Key: "k"}); err != nil {
					t.Fatal(err)
				}
				if err := outbox.PutPgx(ctx, ptx, "outbox", outbox.Message{Topic: "t bad"}); !errors.Is(err, outbox.ErrInvalid) {
					t.Fatalf("invalid pgx put: %v", err)
				}
				// Queued beside the caller's own statement, one round trip.
				var b pgx.Batch
				b.Queue("SELECT 1")
				if err := outbox.QueuePgx(&b, "outbox", outbox.Message{Topic: "t.batch", Key: "k", Payload: json.RawMessage(`{"b":1}`)}); err != nil {
					t.Fatal(err)
				}
				if err := outbox.QueuePgx(&b, "outbox", outbox.Message{Topic: "t.batch", Key: strings.Repeat("k", outbox.MaxKeyLen+1)}); !errors.Is(err, outbox.ErrInvalid) || b.Len() != 2 {
					t.Fatalf("invalid queued message: %v, %d queued", err, b.Len())
				}
				if err := ptx.SendBatch(ctx, &b).Close(); err != nil {
					t.Fatal(err)
				}
				if err := ptx.Commit(ctx); err != nil {
					t.Fatal(err)
				}
			}
			rows, err := db.QueryContext(ctx, `SELECT topic, msg_key, key_shard, due_at, max_attempts, status, payload FROM outbox ORDER BY id`)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var got []string
			for rows.Next() {
				var topic, key string
				var shard, status, attempts int
				var dueAt int64
				var payload []byte
				if err := rows.Scan(&topic, &key, &shard, &dueAt, &attempts, &status, &payload); err != nil {
					t.Fatal(err)
				}
				got = append(got, topic)
				if key == "k" && shard != outbox.KeyShard("k") {
					t.Errorf("%s: key_shard %d, want %d", topic, shard, outbox.KeyShard("k"))
				}
				if topic == "t.one" && (dueAt != due.UnixMicro() || attempts != 3 || string(payload) != `{"n":1}`) {
					t.Errorf("t.one: due %d attempts %d payload %s", dueAt, attempts, payload)
				}
				if topic == "t.many" && key == "" && (dueAt == 0 || string(payload) != "null") {
					t.Errorf("t.many: due %d payload %s", dueAt, payload)
				}
				if status != outbox.StatusWaiting {
					t.Errorf("%s: status %d", topic, status)
				}
			}
			want := "t.one t.many t.many"
			if engine == "postgres" {
				want += " t.pgx t.batch"
			}
			if strings.Join(got, " ") != want {
				t.Fatalf("rows %v, want %s", got, want)
			}
		})
	}
}

func TestTableNames(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		d    outbox.Dialect
		ok   bool
	}{{"outbox", outbox.MySQL, true}, {"app.outbox", outbox.Postgres, true}, {"app.outbox", outbox.MySQL, false},
		{"1outbox", outbox.SQLite, false}, {"out-box", outbox.Postgres, false}, {"", outbox.SQLite, false}} {
		if _, err := outbox.DDL(c.d, c.name); (err == nil) != c.ok {
			t.Errorf("%q on %s: %v", c.name, c.d, err)
		}
	}
	if _, err := outbox.DetectDialect(nil); err == nil {
		t.Error("a nil driver was given a dialect")
	}
}
