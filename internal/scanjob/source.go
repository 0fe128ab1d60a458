package scanjob

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ontimehq/ontime/internal/sqldb"
)

// source is a SQL job's view of the users' databases: the statements of
// one job, built once from validated identifiers, quoted per dialect,
// with every value bound as a parameter.
type source struct {
	spec *SQLSpec
	dbs  []*sql.DB
	d    srcDialect
	// where columns in a fixed order, and their values.
	whereCols []string
	whereArgs []any
	setCols   []string
	setArgs   []any
}

type srcDialect struct {
	name     string
	numbered bool // $1 … placeholders
}

// quote quotes an identifier: `x` on MySQL, and on SQLite too, where a
// double-quoted name that matches no column is taken for a string literal
// (its "double-quoted string literal" leniency): a typo in columns or
// where would select that text or match no row, silently, instead of
// failing as a missing column and breaking the job.
func (d srcDialect) quote(id string) string {
	if d.name == "postgres" {
		return `"` + id + `"`
	}
	return "`" + id + "`"
}

// ph returns the placeholder of argument n (1-based).
func (d srcDialect) ph(n int) string {
	if d.numbered {
		return "$" + strconv.Itoa(n)
	}
	return "?"
}

// timeArg is how a time is bound against next_column: SQLite has no time
// type, so a fixed-width UTC text that sorts as it compares.
func (d srcDialect) timeArg(t time.Time) any {
	if d.name == "sqlite" {
		return t.UTC().Format("2006-01-02 15:04:05.000")
	}
	return t.UTC()
}

func openSource(spec *SQLSpec) (*source, error) {
	s := &source{spec: spec, d: srcDialect{name: spec.Driver, numbered: spec.Driver == "postgres"}}
	s.whereCols = slices.Sorted(maps.Keys(spec.Where))
	for _, c := range s.whereCols {
		s.whereArgs = append(s.whereArgs, spec.Where[c])
	}
	s.setCols = slices.Sorted(maps.Keys(spec.Set))
	for _, c := range s.setCols {
		s.setArgs = append(s.setArgs, spec.Set[c])
	}
	for i, dsn := range spec.Databases {
		db, err := openDB(spec.Driver, dsn, spec.Concurrency)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("%w: source.databases[%d]: %w", ErrInvalid, i, err)
		}
		s.dbs = append(s.dbs, db)
	}
	return s, nil
}

func openDB(driver, dsn string, conns int) (*sql.DB, error) {
	db, err := sqldb.Open(driver, dsn, sqldb.Options{
		SQLite:    "_pragma=busy_timeout(10000)&_txlock=immediate",
		ParseTime: true,
	})
	if err != nil {
		return nil, err
	}
	if driver == sqldb.SQLite {
		db.SetMaxOpenConns(1) // one writer: queue here rather than on SQLITE_BUSY
		return db, nil
	}
	db.SetMaxOpenConns(conns + 2)
	db.SetMaxIdleConns(conns + 2)
	db.SetConnMaxLifetime(time.Hour)
	return db, nil
}

// Close closes the pools.
func (s *source) Close() {
	for _, db := range s.dbs {
		if db != nil {
			db.Close()
		}
	}
}

// target is one item of a SQL job.
type target struct {
	db      int
	table   string
	segment int
}

func (s *source) parseItem(key string) (target, error) {
	p := strings.Split(key, ".")
	if len(p) != 3 {
		return target{}, fmt.Errorf("bad item %q", key)
	}
	var v [3]int
	for i := range p {
		n, err := strconv.Atoi(p[i])
		if err != nil {
			return target{}, fmt.Errorf("bad item %q", key)
		}
		v[i] = n
	}
	if v[0] < 0 || v[0] >= len(s.dbs) || v[1] < 0 || v[1] >= s.spec.Tables || v[2] < 0 || v[2] >= s.spec.Segments {
		return target{}, fmt.Errorf("item %q is out of the job's range", key)
	}
	return target{db: v[0], table: s.spec.TableName(v[1]), segment: v[2]}, nil
}

// sqlText is a statement being built and its arguments, each placeholder
// in the source's dialect.
type sqlText struct {
	strings.Builder
	args []any
	ph   func(n int) string
}

// arg adds v to the arguments and returns its placeholder.
func (t *sqlText) arg(v any) string {
	t.args = append(t.args, v)
	return t.ph(len(t.args))
}

// fetchQuery builds the page query of one table:
//
//	SELECT cols FROM t WHERE w = ? … [AND key > ?] [AND key % S = s]
//	  [AND retry < ? AND (next IS NULL OR next <= ?)] ORDER BY key LIMIT n
func (s *source) fetchQuery(tg target, after any, now time.Time, limit int) (string, []any) {
	q := s.d.quote
	b := &sqlText{ph: s.d.ph}
	arg := b.arg
	cols := make([]string, 0, len(s.spec.Columns)+1)
	for _, c := range s.spec.Columns {
		cols = append(cols, q(c))
	}
	if s.spec.RetryColumn != "" && !slices.Contains(s.spec.Columns, s.spec.RetryColumn) {
		cols = append(cols, q(s.spec.RetryColumn))
	}
	b.WriteString("SELECT " + strings.Join(cols, ", ") + " FROM " + q(tg.table) + " WHERE ")
	for i, c := range s.whereCols {
		if i > 0 {
			b.WriteString(" AND ")
		}
		b.WriteString(q(c) + " = " + arg(s.whereArgs[i]))
	}
	if after != nil {
		b.WriteString(" AND " + q(s.spec.Key) + " > " + arg(after))
	}
	if s.spec.Segments > 1 {
		b.WriteString(" AND " + q(s.spec.Key) + " % " + arg(s.spec.Segments) + " = " + arg(tg.segment))
	}
	if s.spec.RetryColumn != "" {
		b.WriteString(" AND " + q(s.spec.RetryColumn) + " < " + arg(s.spec.MaxAttempts))
		b.WriteString(" AND (" + q(s.spec.NextColumn) + " IS NULL OR " + q(s.spec.NextColumn) + " <= " + arg(s.d.timeArg(now)) + ")")
	}
	b.WriteString(" ORDER BY " + q(s.spec.Key) + " LIMIT " + arg(limit))
	return b.String(), b.args
}

// fetchStmt is fetchQuery as a statement.
func (s *source) fetchStmt(tg target, after any, now time.Time, limit int) stmt {
	q, args := s.fetchQuery(tg, after, now, limit)
	return stmt{what: "fetch", tg: tg, query: q, args: args}
}

// page is one fetch: rows as JSON objects, their keys as bound values and
// their retry counts.
type page struct {
	rows    []map[string]any
	keys    []any
	retries []int64
}

func (s *source) fetch(ctx context.Context, tg target, after any, now time.Time, limit int) (*page, error) {
	qs, args := s.fetchQuery(tg, after, now, limit)
	rows, err := s.dbs[tg.db].QueryContext(ctx, qs, args...)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", tg.table, err)
	}
	defer rows.Close()
	cts, err := rows.ColumnTypes()
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", tg.table, err)
	}
	names := make([]string, len(cts))
	for i, ct := range cts {
		names[i] = ct.Name()
	}
	keyAt := slices.Index(s.spec.Columns, s.spec.Key)
	retryAt := -1
	if s.spec.RetryColumn != "" {
		retryAt = slices.Index(names, s.spec.RetryColumn)
	}
	p := &page{}
	vals := make([]any, len(cts))
	ptrs := make([]any, len(cts))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, fmt.Errorf("fetch %s: %w", tg.table, err)
		}
		row := make(map[string]any, len(s.spec.Columns))
		for i := range s.spec.Columns {
			row[names[i]] = jsonValue(vals[i], cts[i].DatabaseTypeName())
		}
		p.rows = append(p.rows, row)
		p.keys = append(p.keys, keyValue(vals[keyAt], cts[keyAt].DatabaseTypeName()))
		if retryAt >= 0 {
			n, _ := toInt(jsonValue(vals[retryAt], cts[retryAt].DatabaseTypeName()))
			p.retries = append(p.retries, n)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("fetch %s: %w", tg.table, err)
	}
	return p, nil
}

func toInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case json.Number:
		n, err := x.Int64()
		return n, err == nil
	case float64:
		return int64(x), true
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		return n, err == nil
	case nil:
		return 0, true
	}
	return 0, false
}

// jsonValue turns what a driver scanned into a value that encodes as the
// column means: MySQL's text protocol gives bytes for every type.
func jsonValue(v any, dbType string) any {
	b, ok := v.([]byte)
	if !ok {
		return v
	}
	t := strings.ToUpper(dbType)
	switch {
	case strings.Contains(t, "INT") || t == "YEAR":
		if strings.HasPrefix(t, "UNSIGNED") {
			if n, err := strconv.ParseUint(string(b), 10, 64); err == nil {
				return n
			}
		}
		if n, err := strconv.ParseInt(string(b), 10, 64); err == nil {
			return n
		}
	case t == "DECIMAL" || t == "NUMERIC" || t == "FLOAT" || t == "DOUBLE" || t == "REAL":
		return json.Number(string(b))
	case t == "BLOB" || t == "BYTEA" || strings.Contains(t, "BINARY"):
		return b // base64 in JSON
	}
	return string(b)
}

// keyValue is a key as it is bound again (IN lists, the cursor).
func keyValue(v any, dbType string) any {
	switch x := jsonValue(v, dbType).(type) {
	case []byte:
		return string(x)
	case json.Number:
		return string(x)
	case int32:
		return int64(x)
	case int:
		return int64(x)
	default:
		return x
	}
}

// encodeCursor and decodeCursor persist a key: integers stay integers.
func encodeCursor(v any) (string, error) {
	if v == nil {
		return "", nil
	}
	b, err := json.Marshal(v)
	return string(b), err
}

func decodeCursor(s string) (any, error) {
	if s == "" {
		return nil, nil
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("cursor %q: %w", s, err)
	}
	if n, ok := v.(json.Number); ok {
		if i, err := n.Int64(); err == nil {
			return i, nil
		}
		if f, err := n.Float64(); err == nil {
			return f, nil
		}
	}
	return v, nil
}

// keyString is a key's identity for matching a receiver's {"failed": […]}.
func keyString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return string(x)
	case float64:
		if x == float64(int64(x)) {
			return strconv.FormatInt(int64(x), 10)
		}
		return strconv.FormatFloat(x, 'g', -1, 64)
	default:
		return fmt.Sprint(x)
	}
}

// stmt is one statement of a job on one of its tables, with its values.
type stmt struct {
	what  string // fetch | on_success | retry_column (the config key it comes from)
	tg    target
	query string
	args  []any
}

func (st stmt) String() string { return st.what + " on " + st.tg.table }

// doneStmt writes on_success.set for exactly keys, guarded by the where
// filters, so a row changed meanwhile is not overwritten:
//
//	UPDATE t SET s = ? … WHERE key IN (…) AND w = ? …
func (s *source) doneStmt(tg target, keys []any) stmt {
	q := s.d.quote
	b := &sqlText{ph: s.d.ph}
	arg := b.arg
	b.WriteString("UPDATE " + q(tg.table) + " SET ")
	for i, c := range s.setCols {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(q(c) + " = " + arg(s.setArgs[i]))
	}
	b.WriteString(" WHERE " + q(s.spec.Key) + " IN (")
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(arg(k))
	}
	b.WriteString(")")
	for i, c := range s.whereCols {
		b.WriteString(" AND " + q(c) + " = " + arg(s.whereArgs[i]))
	}
	return stmt{what: "on_success", tg: tg, query: b.String(), args: b.args}
}

// failedStmt pushes failed rows that were tried retry times back (seed
// 003's head-of-line isolation): retry + 1, next time = now +
// backoff·2^retry, so the next fetch takes other rows.
//
//	UPDATE t SET retry = retry + 1, next = ? WHERE key IN (…) AND retry = ? AND w = ? …
func (s *source) failedStmt(tg target, keys []any, retry int64, now time.Time) stmt {
	delay := s.spec.Backoff
	for i := int64(0); i < retry && delay < s.spec.BackoffMax; i++ {
		delay *= 2
	}
	delay = min(delay, s.spec.BackoffMax)
	q := s.d.quote
	b := &sqlText{ph: s.d.ph}
	arg := b.arg
	rc, nc := q(s.spec.RetryColumn), q(s.spec.NextColumn)
	b.WriteString("UPDATE " + q(tg.table) + " SET " + rc + " = " + rc + " + 1, " + nc + " = " + arg(s.d.timeArg(now.Add(delay))))
	b.WriteString(" WHERE " + q(s.spec.Key) + " IN (")
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(arg(k))
	}
	b.WriteString(") AND " + rc + " = " + arg(retry))
	for i, c := range s.whereCols {
		b.WriteString(" AND " + q(c) + " = " + arg(s.whereArgs[i]))
	}
	return stmt{what: "retry_column", tg: tg, query: b.String(), args: b.args}
}

// failedStmts are the push-backs of failed rows: one statement per
// distinct retry count; none without a retry column.
func (s *source) failedStmts(tg target, keys []any, retries []int64, now time.Time) []stmt {
	if s.spec.RetryColumn == "" || len(keys) == 0 {
		return nil
	}
	byRetry := map[int64][]any{}
	for i, k := range keys {
		byRetry[retries[i]] = append(byRetry[retries[i]], k)
	}
	var out []stmt
	for _, r := range slices.Sorted(maps.Keys(byRetry)) {
		out = append(out, s.failedStmt(tg, byRetry[r], r, now))
	}
	return out
}

// exec runs a write statement.
func (s *source) exec(ctx context.Context, st stmt) (int64, error) {
	res, err := s.dbs[st.tg.db].ExecContext(ctx, st.query, st.args...)
	if err != nil {
		return 0, err
	}
	n, _ := res.RowsAffected()
	return n, nil
}
