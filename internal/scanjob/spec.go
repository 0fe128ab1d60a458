// Package scanjob runs scan jobs over the users' own tables (seeds 000 and
// 003): cron-triggered, sharded into items that the cluster's coordinator
// hands to live nodes, each item walked page by page with a keyset cursor
// that is persisted after every page, so a killed node's items resume on
// their new owner where it stopped.
//
// Two kinds of job share the machinery (Service): declarative SQL jobs
// (SQLSpec: fetch a page with `key > cursor ORDER BY key LIMIT page`, hand
// its rows to a target in batches, then write on_success.set for exactly
// the rows processed, guarded by the where filters) and Go jobs (a Run
// function per item, which ontime.Dataflow builds from Fetch/Process).
//
// One item's run:
//
//	trigger (cron, :trigger, misfire, resume after a handover)
//	  └─ take the item's state row under a fresh token (the fence)
//	     └─ loop: fetch page after cursor ─► send batches ─► set done rows
//	              ─► failed rows: retry+1, next time pushed back
//	              ─► save cursor and counts (fenced by the token)
//	     └─ end: the run's row records rows, cursor, error
package scanjob

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/ontimehq/ontime/internal/cronspec"
)

// ErrInvalid wraps every validation failure of a job's definition.
var ErrInvalid = errors.New("invalid job")

// Bounds and defaults of a job's definition.
const (
	MaxDatabases       = 1024
	MaxTables          = 100000
	MaxSegments        = 1024
	DefaultPage        = 200
	MaxPage            = 10000
	DefaultBatch       = 50
	DefaultConcurrency = 8
	MaxConcurrency     = 256
	DefaultMaxAttempts = 10
	DefaultBackoff     = time.Second
	DefaultBackoffMax  = time.Hour
)

var (
	nameRe  = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)
	identRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)
)

// ValidateName checks a job name: 1–64 of A-Z a-z 0-9 _ . -
func ValidateName(name string) error {
	if !nameRe.MatchString(name) {
		return fmt.Errorf("%w: name: %q must be 1-64 of A-Z a-z 0-9 _ . -", ErrInvalid, name)
	}
	return nil
}

// validIdent checks an SQL identifier from the config: it is quoted per
// dialect as well, so this is belt and braces against injection and typos.
func validIdent(field, s string) error {
	if !identRe.MatchString(s) {
		return fmt.Errorf("%w: %s: %q is not an identifier (^[A-Za-z_][A-Za-z0-9_]*$, at most 64)", ErrInvalid, field, s)
	}
	return nil
}

// SQLSpec is a declarative SQL job, as `jobs:` in the config declares it.
type SQLSpec struct {
	Name     string
	Cron     string
	TimeZone string
	Misfire  string // skip | fire_once (default)
	Overlap  string // skip (the only policy)

	Driver      string   // mysql | postgres | sqlite
	Databases   []string // DSNs
	Table       string   // pattern with {table}, or a plain name when Tables is 1
	Tables      int
	Segments    int // per table: rows with key mod Segments = segment
	Key         string
	Columns     []string
	Where       map[string]any // equality filters, values bound
	Page        int
	MaxRows     int // per item per run; 0: until nothing is left
	RetryColumn string
	NextColumn  string
	MaxAttempts int           // with RetryColumn: attempts before a row is left
	Backoff     time.Duration // first push-back of a failed row, doubled per retry
	BackoffMax  time.Duration

	Target      string // http(s):// or mq://
	Batch       int
	Concurrency int // items run at once on one node
	Set         map[string]any
}

// Normalize fills defaults and validates; errors name the config key
// below jobs[i] (the caller prefixes it).
func (s *SQLSpec) Normalize() (cronspec.Spec, error) {
	if err := ValidateName(s.Name); err != nil {
		return cronspec.Spec{}, err
	}
	cs, err := cronspec.Parse(s.Cron, s.TimeZone)
	if err != nil {
		return cronspec.Spec{}, fmt.Errorf("%w: cron: %w", ErrInvalid, err)
	}
	if s.Misfire, err = misfirePolicy(s.Misfire); err != nil {
		return cs, err
	}
	if s.Overlap, err = overlapPolicy(s.Overlap); err != nil {
		return cs, err
	}
	switch s.Driver {
	case "mysql", "postgres", "sqlite":
	default:
		return cs, fmt.Errorf("%w: source.driver: %q is not one of mysql, postgres, sqlite", ErrInvalid, s.Driver)
	}
	if len(s.Databases) == 0 || len(s.Databases) > MaxDatabases {
		return cs, fmt.Errorf("%w: source.databases: 1 to %d DSNs are needed", ErrInvalid, MaxDatabases)
	}
	for i, d := range s.Databases {
		if strings.TrimSpace(d) == "" {
			return cs, fmt.Errorf("%w: source.databases[%d]: empty DSN", ErrInvalid, i)
		}
	}
	if s.Tables == 0 {
		s.Tables = 1
	}
	if s.Tables < 1 || s.Tables > MaxTables {
		return cs, fmt.Errorf("%w: source.tables: %d is out of range 1..%d", ErrInvalid, s.Tables, MaxTables)
	}
	if s.Segments == 0 {
		s.Segments = 1
	}
	if s.Segments < 1 || s.Segments > MaxSegments {
		return cs, fmt.Errorf("%w: source.segments: %d is out of range 1..%d", ErrInvalid, s.Segments, MaxSegments)
	}
	if n := strings.Count(s.Table, "{table}"); n > 1 || (n == 0 && s.Tables > 1) {
		return cs, fmt.Errorf("%w: source.table: %q must hold {table} once when source.tables > 1", ErrInvalid, s.Table)
	}
	if err := validIdent("source.table", strings.ReplaceAll(s.Table, "{table}", "0")); err != nil {
		return cs, err
	}
	if err := validIdent("source.key", s.Key); err != nil {
		return cs, err
	}
	if len(s.Columns) == 0 {
		return cs, fmt.Errorf("%w: source.columns: at least the key column is needed", ErrInvalid)
	}
	hasKey := false
	for i, c := range s.Columns {
		if err := validIdent(fmt.Sprintf("source.columns[%d]", i), c); err != nil {
			return cs, err
		}
		hasKey = hasKey || c == s.Key
	}
	if !hasKey {
		s.Columns = append([]string{s.Key}, s.Columns...)
	}
	if len(s.Where) == 0 {
		return cs, fmt.Errorf("%w: source.where: at least one filter is needed, or every run would take every row again", ErrInvalid)
	}
	for c, v := range s.Where {
		if err := validIdent("source.where", c); err != nil {
			return cs, err
		}
		if err := scalar("source.where."+c, v); err != nil {
			return cs, err
		}
	}
	if s.Page == 0 {
		s.Page = DefaultPage
	}
	if s.Page < 1 || s.Page > MaxPage {
		return cs, fmt.Errorf("%w: source.page: %d is out of range 1..%d", ErrInvalid, s.Page, MaxPage)
	}
	if s.MaxRows < 0 {
		return cs, fmt.Errorf("%w: source.max_rows: %d is negative", ErrInvalid, s.MaxRows)
	}
	if (s.RetryColumn == "") != (s.NextColumn == "") {
		return cs, fmt.Errorf("%w: source.retry_column and source.next_column go together", ErrInvalid)
	}
	if s.RetryColumn != "" {
		if err := validIdent("source.retry_column", s.RetryColumn); err != nil {
			return cs, err
		}
		if err := validIdent("source.next_column", s.NextColumn); err != nil {
			return cs, err
		}
	}
	if s.MaxAttempts == 0 {
		s.MaxAttempts = DefaultMaxAttempts
	}
	if s.MaxAttempts < 1 || s.MaxAttempts > 1000 {
		return cs, fmt.Errorf("%w: source.max_attempts: %d is out of range 1..1000", ErrInvalid, s.MaxAttempts)
	}
	if s.Backoff == 0 {
		s.Backoff = DefaultBackoff
	}
	if s.BackoffMax == 0 {
		s.BackoffMax = DefaultBackoffMax
	}
	if s.Backoff < time.Millisecond || s.BackoffMax < s.Backoff || s.BackoffMax > 30*24*time.Hour {
		return cs, fmt.Errorf("%w: source.backoff: %s..%s must be 1ms <= backoff <= backoff_max <= 720h", ErrInvalid, s.Backoff, s.BackoffMax)
	}
	if !strings.HasPrefix(s.Target, "http://") && !strings.HasPrefix(s.Target, "https://") && !strings.HasPrefix(s.Target, "mq://") {
		return cs, fmt.Errorf("%w: process.target: %q is not an http(s):// or mq:// target", ErrInvalid, s.Target)
	}
	if s.Batch == 0 {
		s.Batch = DefaultBatch
	}
	if s.Batch < 1 || s.Batch > s.Page {
		return cs, fmt.Errorf("%w: process.batch: %d is out of range 1..%d (source.page)", ErrInvalid, s.Batch, s.Page)
	}
	if s.Concurrency == 0 {
		s.Concurrency = DefaultConcurrency
	}
	if s.Concurrency < 1 || s.Concurrency > MaxConcurrency {
		return cs, fmt.Errorf("%w: process.concurrency: %d is out of range 1..%d", ErrInvalid, s.Concurrency, MaxConcurrency)
	}
	if len(s.Set) == 0 {
		return cs, fmt.Errorf("%w: on_success.set: at least one column is needed, or processed rows would be fetched again", ErrInvalid)
	}
	for c, v := range s.Set {
		if err := validIdent("on_success.set", c); err != nil {
			return cs, err
		}
		if err := scalar("on_success.set."+c, v); err != nil {
			return cs, err
		}
		if c == s.Key {
			return cs, fmt.Errorf("%w: on_success.set.%s: the key column cannot be set", ErrInvalid, c)
		}
	}
	return cs, nil
}

func misfirePolicy(p string) (string, error) {
	switch p {
	case "":
		return "fire_once", nil
	case "skip", "fire_once":
		return p, nil
	}
	return "", fmt.Errorf("%w: misfire: %q is not one of skip, fire_once", ErrInvalid, p)
}

func overlapPolicy(p string) (string, error) {
	switch p {
	case "", "skip":
		return "skip", nil
	}
	return "", fmt.Errorf("%w: overlap: %q is not skip (a trigger while an item runs is skipped)", ErrInvalid, p)
}

// scalar accepts the values YAML gives for a filter: strings, numbers,
// booleans. Anything else (lists, maps, null) has no one SQL meaning.
func scalar(field string, v any) error {
	switch v.(type) {
	case string, int, int64, uint64, float64, bool:
		return nil
	}
	return fmt.Errorf("%w: %s: want a string, number or boolean, got %T", ErrInvalid, field, v)
}

// TableName is table t's name.
func (s *SQLSpec) TableName(t int) string {
	return strings.ReplaceAll(s.Table, "{table}", fmt.Sprint(t))
}

// ItemKeys lists the job's sharding items, "db.table.segment".
func (s *SQLSpec) ItemKeys() []string {
	out := make([]string, 0, len(s.Databases)*s.Tables*s.Segments)
	for db := range s.Databases {
		for t := range s.Tables {
			for seg := range s.Segments {
				out = append(out, fmt.Sprintf("%d.%d.%d", db, t, seg))
			}
		}
	}
	return out
}
