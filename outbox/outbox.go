// Package outbox writes messages into an outbox table inside the caller's
// own database transaction (the "local message table" of the transactional
// outbox): the business row and the message commit together or not at all.
// An ontime node whose config lists the table under `outboxes:` relays each
// committed message into an ontime task — due at its DueAt, delivered to its
// Target with retries — and messages with the same Key are delivered one at
// a time, in the order they were written.
//
//	tx, _ := db.BeginTx(ctx, nil)
//	tx.ExecContext(ctx, "INSERT INTO user (account_no) VALUES (?)", acct)
//	outbox.Put(ctx, tx, outbox.Table{Name: "outbox", Dialect: outbox.MySQL}, outbox.Message{
//		Topic: "user.registered", Key: acct, Payload: body,
//		Target: "https://coupons.internal/grant"})
//	tx.Commit()
//
// The package is small on purpose: it needs database/sql (or a pgx
// transaction), the task limits and nothing of the node. DDL returns the
// table's CREATE statements; `ontime outbox ddl` prints them.
package outbox

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ontimehq/ontime/internal/task"
)

// Dialect is the SQL spoken by the outbox table's database.
type Dialect string

// The dialects, spelt as ontime's config spells drivers.
const (
	MySQL    Dialect = "mysql" // MySQL and MariaDB
	Postgres Dialect = "postgres"
	SQLite   Dialect = "sqlite"
)

// Limits of a message. Key is shorter than a task's key because the relay
// makes the task's key from it and the message's place ("KEY#outbox/…"),
// which must stay within the task's 255 bytes; 128 bytes also keeps the
// (msg_key, status, id) index within InnoDB's 3072-byte key limit.
const (
	MaxKeyLen       = 128
	MaxPayloadBytes = task.DefaultMaxPayloadBytes // the node's default max_payload_bytes
	MaxAttempts     = task.MaxAttemptsLimit
	MaxHorizon      = task.MaxHorizon
	// MaxBatch bounds PutMany: one statement of 9 parameters a row stays
	// below every engine's parameter limit (SQLite's 32766).
	MaxBatch = 1000
	// KeyShards is the range of the key_shard column: the relay splits a
	// table into segments by key_shard, so all messages of one key fall in
	// one segment (and keep their order).
	KeyShards = 1024
)

// Message is one message to relay.
type Message struct {
	Topic string // 1–64 of A-Z a-z 0-9 _ . -
	// Key orders messages: those with the same non-empty key are
	// delivered one at a time in the order they were written. At most
	// MaxKeyLen bytes of UTF-8 without control characters.
	Key     string
	Payload json.RawMessage // any JSON value; nil means null
	// Target: https://…, http://…, mq://BROKER/ADDRESS, or "" for the
	// topic's default target (else its Go handler) on the relaying node.
	Target string
	// DueAt or Delay (not both): when the task is due; neither means now.
	DueAt       time.Time
	Delay       time.Duration
	MaxAttempts int // 0: the node's default; else 1–1000
}

// ErrInvalid matches every *FieldError with errors.Is.
var ErrInvalid = errors.New("outbox: invalid message")

// FieldError is a message refused before anything was written; Field
// names the field ("payload", "messages[3].topic").
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string        { return "outbox: " + e.Field + ": " + e.Message }
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// Table is an outbox table: its name ("outbox", or "schema.outbox" on
// PostgreSQL) and its database's dialect.
//
// The dialect is given, not guessed from the transaction: a *sql.Tx does
// not say which driver it runs on, and asking the server would cost a
// round trip inside the caller's transaction. NewTable reads it once from
// the *sql.DB's driver.
type Table struct {
	Name    string
	Dialect Dialect
}

// NewTable returns the table name on db, its dialect detected from db's
// driver (go-sql-driver/mysql; pgx's stdlib or lib/pq; modernc.org/sqlite
// or mattn/go-sqlite3).
func NewTable(db *sql.DB, name string) (Table, error) {
	d, err := DetectDialect(db.Driver())
	if err != nil {
		return Table{}, err
	}
	t := Table{Name: name, Dialect: d}
	return t, t.validate()
}

// DetectDialect names the dialect of a database/sql driver by its package.
func DetectDialect(drv driver.Driver) (Dialect, error) {
	ty := reflect.TypeOf(drv)
	for ty != nil && ty.Kind() == reflect.Pointer {
		ty = ty.Elem()
	}
	pkg := ""
	if ty != nil {
		pkg = ty.PkgPath()
	}
	switch {
	case strings.Contains(pkg, "mysql"):
		return MySQL, nil
	case strings.Contains(pkg, "pgx"), strings.Contains(pkg, "lib/pq"), strings.Contains(pkg, "postgres"):
		return Postgres, nil
	case strings.Contains(pkg, "sqlite"):
		return SQLite, nil
	}
	return "", fmt.Errorf("outbox: cannot tell the dialect of driver %T: give Table.Dialect", drv)
}

func (t Table) validate() error {
	switch t.Dialect {
	case MySQL, Postgres, SQLite:
	default:
		return fieldErr("table.dialect", "%q is not one of mysql, postgres, sqlite", t.Dialect)
	}
	return ValidateTableName(t.Name, t.Dialect)
}

// ValidateTableName checks an outbox table's name: an identifier of
// A-Z a-z 0-9 _ not starting with a digit, at most 64 characters;
// PostgreSQL also takes schema.table.
func ValidateTableName(name string, d Dialect) error {
	parts := strings.Split(name, ".")
	if len(parts) > 2 || (len(parts) == 2 && d != Postgres) {
		return fieldErr("table", "%q: a schema prefix is taken on PostgreSQL only", name)
	}
	for _, p := range parts {
		if p == "" || len(p) > 64 {
			return fieldErr("table", "%q: each name part is 1–64 characters", name)
		}
		for i := 0; i < len(p); i++ {
			c := p[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || i > 0 && c >= '0' && c <= '9') {
				return fieldErr("table", "%q has %q at position %d; allowed are A-Z a-z 0-9 _, not first a digit", name, c, i)
			}
		}
	}
	return nil
}

// Quote quotes the table name for d.
func Quote(name string, d Dialect) string {
	q := `"`
	if d == MySQL {
		q = "`"
	}
	parts := strings.Split(name, ".")
	for i, p := range parts {
		parts[i] = q + p + q
	}
	return strings.Join(parts, ".")
}

// row is a validated message as the table stores it.
type row struct {
	topic, key, target string
	shard              int
	payload            []byte
	dueAt              int64 // unix µs; 0: as soon as relayed
	maxAttempts        int
	createdAt          int64
}

// Validate checks every field of m (field names prefixed by prefix).
func Validate(m Message) error { _, err := check(m, "", time.Now()); return err }

func check(m Message, prefix string, now time.Time) (row, error) {
	wrap := func(err error) error {
		var fe *task.FieldError
		if errors.As(err, &fe) {
			return &FieldError{Field: prefix + fe.Field, Message: fe.Message}
		}
		var oe *FieldError
		if errors.As(err, &oe) {
			return &FieldError{Field: prefix + oe.Field, Message: oe.Message}
		}
		return err
	}
	if err := task.ValidateTopic(m.Topic); err != nil {
		return row{}, wrap(err)
	}
	if err := ValidateKey(m.Key); err != nil {
		return row{}, wrap(err)
	}
	if err := task.ValidateTarget(m.Target); err != nil {
		return row{}, wrap(err)
	}
	r := row{topic: m.Topic, key: m.Key, target: m.Target, shard: KeyShard(m.Key), createdAt: now.UnixMicro()}
	switch {
	case len(m.Payload) == 0:
		r.payload = []byte("null")
	case len(m.Payload) > MaxPayloadBytes:
		return row{}, wrap(fieldErr("payload", "is %d bytes; at most %d", len(m.Payload), MaxPayloadBytes))
	case !json.Valid(m.Payload):
		return row{}, wrap(fieldErr("payload", "is not valid JSON"))
	default:
		r.payload = m.Payload
	}
	switch {
	case !m.DueAt.IsZero() && m.Delay != 0:
		return row{}, wrap(fieldErr("due_at", "give due_at or delay, not both"))
	case !m.DueAt.IsZero():
		if m.DueAt.After(now.Add(MaxHorizon)) {
			return row{}, wrap(fieldErr("due_at", "is more than 10 years ahead"))
		}
		r.dueAt = m.DueAt.UnixMicro()
	case m.Delay < 0:
		return row{}, wrap(fieldErr("delay", "is negative (%s)", m.Delay))
	case m.Delay > MaxHorizon:
		return row{}, wrap(fieldErr("delay", "is more than 10 years"))
	case m.Delay > 0:
		r.dueAt = now.Add(m.Delay).UnixMicro()
	}
	if m.MaxAttempts < 0 || m.MaxAttempts > MaxAttempts {
		return row{}, wrap(fieldErr("max_attempts", "is %d; want 0 (the node's default) or 1 to %d", m.MaxAttempts, MaxAttempts))
	}
	r.maxAttempts = m.MaxAttempts
	return r, nil
}

// ValidateKey checks a message key: at most MaxKeyLen bytes of UTF-8
// without control characters ("" is no key: no order with others).
func ValidateKey(k string) error {
	if len(k) > MaxKeyLen {
		return fieldErr("key", "is %d bytes; at most %d", len(k), MaxKeyLen)
	}
	if !utf8.ValidString(k) {
		return fieldErr("key", "is not valid UTF-8")
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] == 0x7f {
			return fieldErr("key", "contains a control character at byte %d", i)
		}
	}
	return nil
}

// KeyShard is a key's key_shard, 0 … KeyShards-1 (FNV-1a). Messages
// without a key are spread by their own time instead.
func KeyShard(key string) int {
	h := fnv.New32a()
	if key == "" {
		_, _ = h.Write(strconv.AppendInt(nil, time.Now().UnixNano(), 10))
	} else {
		_, _ = h.Write([]byte(key))
	}
	return int(h.Sum32() % KeyShards)
}

const insertCols = "(topic, msg_key, key_shard, payload, target, due_at, max_attempts, created_at)"

// statement builds one INSERT of rows.
func statement(t Table, rows []row) (string, []any) {
	var sb strings.Builder
	sb.WriteString("INSERT INTO ")
	sb.WriteString(Quote(t.Name, t.Dialect))
	sb.WriteString(" ")
	sb.WriteString(insertCols)
	sb.WriteString(" VALUES ")
	args := make([]any, 0, 8*len(rows))
	n := 0
	for i, r := range rows {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString("(")
		for c := range 8 {
			if c > 0 {
				sb.WriteString(", ")
			}
			n++
			if t.Dialect == Postgres {
				sb.WriteString("$" + strconv.Itoa(n))
			} else {
				sb.WriteString("?")
			}
		}
		sb.WriteString(")")
		args = append(args, r.topic, r.key, r.shard, r.payload, r.target, r.dueAt, r.maxAttempts, r.createdAt)
	}
	return sb.String(), args
}

func prepare(t Table, msgs []Message, many bool) (string, []any, error) {
	if err := t.validate(); err != nil {
		return "", nil, err
	}
	if len(msgs) == 0 {
		return "", nil, nil
	}
	if len(msgs) > MaxBatch {
		return "", nil, fieldErr("messages", "%d messages; at most %d in one PutMany", len(msgs), MaxBatch)
	}
	now := time.Now()
	rows := make([]row, len(msgs))
	for i, m := range msgs {
		prefix := ""
		if many {
			prefix = "messages[" + strconv.Itoa(i) + "]."
		}
		r, err := check(m, prefix, now)
		if err != nil {
			return "", nil, err
		}
		rows[i] = r
	}
	q, args := statement(t, rows)
	return q, args, nil
}

// Execer is what Put needs of a transaction: *sql.Tx (also *sql.DB or
// *sql.Conn, for a message written outside a transaction).
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Put writes m into table within tx. Every field is checked first (a
// *FieldError, errors.Is ErrInvalid); nothing is written then.
func Put(ctx context.Context, tx Execer, table Table, m Message) error {
	return PutMany(ctx, tx, table, m)
}

// PutMany writes msgs (at most MaxBatch) in one INSERT within tx, in their
// order: messages of one key are delivered in the order given.
func PutMany(ctx context.Context, tx Execer, table Table, msgs ...Message) error {
	q, args, err := prepare(table, msgs, len(msgs) > 1)
	if err != nil || q == "" {
		return err
	}
	if _, err := tx.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("outbox: insert into %s: %w", table.Name, err)
	}
	return nil
}

// PgxExecer is what PutPgx needs of a pgx transaction (pgx.Tx,
// pgxpool.Tx).
type PgxExecer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// PutPgx writes m into the PostgreSQL table within a pgx transaction.
func PutPgx(ctx context.Context, tx PgxExecer, table string, m Message) error {
	return PutManyPgx(ctx, tx, table, m)
}

// PutManyPgx writes msgs in one INSERT within a pgx transaction.
func PutManyPgx(ctx context.Context, tx PgxExecer, table string, msgs ...Message) error {
	q, args, err := prepare(Table{Name: table, Dialect: Postgres}, msgs, len(msgs) > 1)
	if err != nil || q == "" {
		return err
	}
	if _, err := tx.Exec(ctx, q, args...); err != nil {
		return fmt.Errorf("outbox: insert into %s: %w", table, err)
	}
	return nil
}

// QueuePgx queues the INSERT of msgs into the PostgreSQL table on b, a
// pgx.Batch that the caller sends within its transaction together with
// its own statements (the business row): the messages then cost no round
// trip of their own, which on a loopback server is most of a Put's cost
// (docs/outbox.md). Every field is checked first; on error nothing is
// queued. The batch's results come back in queue order: the INSERT's is
// read (or skipped) with the others by BatchResults.
func QueuePgx(b *pgx.Batch, table string, msgs ...Message) error {
	q, args, err := prepare(Table{Name: table, Dialect: Postgres}, msgs, len(msgs) > 1)
	if err != nil || q == "" {
		return err
	}
	b.Queue(q, args...)
	return nil
}
