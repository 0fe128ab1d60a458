package scanjob

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func goodSpec() SQLSpec {
	return SQLSpec{Name: "bill-settle", Cron: "*/10 * * * * *", Driver: "mysql", Databases: []string{"root@tcp(127.0.0.1:3306)/a"},
		Table: "bill_{table}", Tables: 4, Key: "id", Columns: []string{"x", "y"}, Where: map[string]any{"status": 1, "kind": "a"},
		Target: "http://127.0.0.1:1/hook", Set: map[string]any{"status": 2}}
}

func TestNormalizeDefaults(t *testing.T) {
	s := goodSpec()
	if _, err := s.Normalize(); err != nil {
		t.Fatal(err)
	}
	if s.Columns[0] != "id" || s.Page != DefaultPage || s.Batch != DefaultBatch || s.Segments != 1 || s.Misfire != "fire_once" || s.Overlap != "skip" {
		t.Fatalf("defaults: %+v", s)
	}
	if got := s.ItemKeys(); len(got) != 4 || got[3] != "0.3.0" {
		t.Fatalf("items %v", got)
	}
}

// TestNormalizeRejects: every bad value is refused with the key named,
// identifiers above all (they go into SQL, quoted, but only once valid).
func TestNormalizeRejects(t *testing.T) {
	for want, mod := range map[string]func(*SQLSpec){
		"name":                   func(s *SQLSpec) { s.Name = "bad name" },
		"cron":                   func(s *SQLSpec) { s.Cron = "every minute" },
		"misfire":                func(s *SQLSpec) { s.Misfire = "twice" },
		"overlap":                func(s *SQLSpec) { s.Overlap = "allow" },
		"source.driver":          func(s *SQLSpec) { s.Driver = "oracle" },
		"source.databases":       func(s *SQLSpec) { s.Databases = nil },
		"source.databases[0]":    func(s *SQLSpec) { s.Databases = []string{" "} },
		"source.table":           func(s *SQLSpec) { s.Table = "bill; DROP TABLE x; --{table}" },
		"source.table:":          func(s *SQLSpec) { s.Table = "bill" }, // several tables, no {table}
		"source.key":             func(s *SQLSpec) { s.Key = "id`" },
		"source.columns[1]":      func(s *SQLSpec) { s.Columns = []string{"x", "y z"} },
		"source.where":           func(s *SQLSpec) { s.Where = nil },
		"source.where.status":    func(s *SQLSpec) { s.Where = map[string]any{"status": []any{1, 2}} },
		"source.where:":          func(s *SQLSpec) { s.Where = map[string]any{"st\"atus": 1} },
		"source.page":            func(s *SQLSpec) { s.Page = MaxPage + 1 },
		"source.max_rows":        func(s *SQLSpec) { s.MaxRows = -1 },
		"source.retry_column":    func(s *SQLSpec) { s.RetryColumn = "retry_count" },
		"source.next_column":     func(s *SQLSpec) { s.RetryColumn, s.NextColumn = "retry_count", "next time" },
		"source.max_attempts":    func(s *SQLSpec) { s.MaxAttempts = 1001 },
		"source.backoff":         func(s *SQLSpec) { s.Backoff, s.BackoffMax = time.Hour, time.Second },
		"process.target":         func(s *SQLSpec) { s.Target = "ftp://x" },
		"process.batch":          func(s *SQLSpec) { s.Page, s.Batch = 100, 101 },
		"process.concurrency":    func(s *SQLSpec) { s.Concurrency = MaxConcurrency + 1 },
		"on_success.set":         func(s *SQLSpec) { s.Set = nil },
		"on_success.set.id":      func(s *SQLSpec) { s.Set = map[string]any{"id": 3} },
		"on_success.set.status":  func(s *SQLSpec) { s.Set = map[string]any{"status": nil} },
		"source.segments":        func(s *SQLSpec) { s.Segments = MaxSegments + 1 },
		"source.tables":          func(s *SQLSpec) { s.Tables = -1 },
		"source.columns: at lea": func(s *SQLSpec) { s.Columns = nil },
	} {
		s := goodSpec()
		mod(&s)
		_, err := s.Normalize()
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), strings.TrimSuffix(want, ":")) {
			t.Errorf("%s: got %v", want, err)
		}
	}
}

func TestFetchQueryPerDialect(t *testing.T) {
	s := goodSpec()
	s.Segments = 4
	s.RetryColumn, s.NextColumn = "retry_count", "next_select_time"
	if _, err := s.Normalize(); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 23, 18, 0, 0, 0, time.UTC)
	for driver, want := range map[string]string{
		"mysql": "SELECT `id`, `x`, `y`, `retry_count` FROM `bill_3` WHERE `kind` = ? AND `status` = ? AND `id` > ? AND `id` % ? = ? " +
			"AND `retry_count` < ? AND (`next_select_time` IS NULL OR `next_select_time` <= ?) ORDER BY `id` LIMIT ?",
		"postgres": `SELECT "id", "x", "y", "retry_count" FROM "bill_3" WHERE "kind" = $1 AND "status" = $2 AND "id" > $3 AND "id" % $4 = $5 ` +
			`AND "retry_count" < $6 AND ("next_select_time" IS NULL OR "next_select_time" <= $7) ORDER BY "id" LIMIT $8`,
	} {
		sp := s
		sp.Driver = driver
		src := &source{spec: &sp, d: srcDialect{name: driver, numbered: driver == "postgres"}, whereCols: []string{"kind", "status"}, whereArgs: []any{"a", 1}}
		q, args := src.fetchQuery(target{table: "bill_3", segment: 2}, int64(41), now, 200)
		if q != want {
			t.Errorf("%s:\n got %s\nwant %s", driver, q, want)
		}
		if len(args) != 8 || args[2] != int64(41) || args[3] != 4 || args[4] != 2 || args[7] != 200 {
			t.Errorf("%s: args %v", driver, args)
		}
	}
}

func TestCursorRoundTrip(t *testing.T) {
	for _, v := range []any{int64(9007199254740993), "order-42", nil} {
		enc, err := encodeCursor(v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeCursor(enc)
		if err != nil || got != v {
			t.Errorf("%v: round trip gave %v (%v)", v, got, err)
		}
	}
	if _, err := decodeCursor("{"); err == nil {
		t.Error("a malformed cursor decoded")
	}
}

func TestItemKeys(t *testing.T) {
	k := ItemKey("bill-settle", "1.49.0")
	j, it, ok := ParseItemKey(k)
	if !ok || j != "bill-settle" || it != "1.49.0" {
		t.Fatalf("%q → %q %q %v", k, j, it, ok)
	}
	if _, _, ok := ParseItemKey("0.3.1"); ok {
		t.Fatal("a task item parsed as a job item")
	}
}
