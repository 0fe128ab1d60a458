// Package store defines the contract every task store keeps, whatever the
// engine: SQLite (the embedded default), MariaDB/MySQL and PostgreSQL. The
// engines live in sqlstore (one implementation, a dialect per engine); the
// contract's test suite lives in storetest and runs unchanged against each.
//
// A store holds M databases × N task tables (router.Topology). Every method
// that takes task IDs routes each ID by the shard hash it carries; methods
// that take an Item work on one (database, table, segment).
package store

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/ontimehq/ontime/internal/task"
)

var (
	// ErrNotFound: no task has this ID.
	ErrNotFound = errors.New("task not found")
	// ErrConflict: the task's state forbids the change (for example cancel
	// of a running, done or dead task). The error wraps the current state.
	ErrConflict = errors.New("task state conflict")
	// ErrUnavailable: the store could not be reached (connection refused
	// or reset, a network timeout, a server shutting down): the call may
	// succeed if retried later. A write that failed so may still have
	// committed (the connection broke after COMMIT was sent), which is why
	// submits carry keys.
	// Engines wrap the driver's error with it, so errors.Is matches and
	// the cause stays in the chain.
	ErrUnavailable = errors.New("store unavailable")
)

// ConflictError carries the state that refused a change. errors.Is(err,
// ErrConflict) matches it.
type ConflictError struct {
	ID     string
	Status task.Status
	Op     string
}

func (e *ConflictError) Error() string {
	return e.Op + " " + e.ID + ": task is " + e.Status.String()
}
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// Item is a sharding item: one segment of one table of one database.
type Item struct {
	DB      int
	Table   int
	Segment int
}

// Cursor is a keyset position over (due_at, id). The zero Cursor is the start.
type Cursor struct {
	DueAt time.Time
	ID    string
}

// Ref names one claim of a task: the token the claim produced travels with
// the task through the hot tier and must be presented to change it again.
type Ref struct {
	ID    string
	Token int64
	DueAt time.Time
	Topic string
	// Priority is the task's (task.Rank), where the ref's maker read it
	// (a claim does); 0 otherwise.
	Priority int
}

// NewTask is a validated task ready to insert, with its ID, shard hash and
// segment already assigned (see router.NewID).
type NewTask struct {
	ID        string
	ShardHash uint32
	Seg       int
	task.Validated
	// Claim, when non-nil, inserts the task already claimed by this lease:
	// the submit path of a task due within the preheat window.
	Claim *Lease
	// Running, with Claim: the task is inserted running, its first
	// attempt begun, Claim.Until its running lease: a task due at once
	// that the inserting node hands to delivery itself, without the
	// hot tier and a Start (one write fewer in its life).
	Running bool
	// ReplaceFinal: the submitter asked for a new task over a final one
	// (if_exists: replace), so a final task does not hold the key against
	// it, key hold or not; a live task still does (Existing). The new row
	// goes in under the live-key unique index, in the insert's own
	// statement: concurrent inserts of the key still make one live task.
	ReplaceFinal bool

	// Traceparent is the W3C trace context of the submit ('' when not
	// traced): its deliveries continue that trace.
	Traceparent string
}

// Lease is who claims and until when.
type Lease struct {
	Owner string
	Until time.Time
	Token int64
}

// Inserted is the outcome of one insert: the stored task, and whether it
// existed already (same topic and key), in which case nothing was written.
type Inserted struct {
	Task     *task.Task
	Existing bool
	// HeldUntil, when Existing and Task is final: the key hold keeps the
	// key from a new task until then (Task's end plus the key hold).
	HeldUntil time.Time
}

// Outcome is how one delivery attempt ended, for Finish.
type Outcome struct {
	Ref
	// Done: delivered. Otherwise, when Dead is false the task returns to
	// pending with due time RetryAt; when Dead is true it becomes dead.
	Done    bool
	Dead    bool
	RetryAt time.Time
	Error   string // kept as last_error when not Done
	// Result, with Done: the task's result (task.Task.Result), a JSON
	// value; nil keeps none.
	Result []byte
	// NotAttempted: the delivery never reached the target (its destination's
	// queue was full, its breaker open, the node stopping, no Go handler
	// for its topic on the node that fired it) or the handler snoozed it,
	// so the retry does not count against max_attempts.
	NotAttempted bool
	// Cancelled: the handler gave up on the task (ontime.Cancel): it
	// becomes cancelled, with Error as last_error, and is not retried.
	Cancelled bool
	// Claim, for a retry (not Done, Dead or Cancelled): the task goes back
	// claimed under this lease instead of pending, because its retry is
	// due within the preheat window and the caller puts it in the hot tier
	// itself once the outcome is written (retries on time, not after the
	// next scan), or hands it off to the lease's owner, another node.
	Claim *Lease
}

// DefaultListLimit and MaxListLimit bound a List page.
const (
	DefaultListLimit = 100
	MaxListLimit     = 1000
)

// ListFilter selects tasks for List. Zero fields do not filter.
type ListFilter struct {
	Topic  string
	Status *task.Status
	Limit  int    // 1..1000; 0 means 100
	After  string // a task ID: list IDs strictly greater (the page cursor)
	// DueAfter and DueBefore, when set, keep tasks due in [DueAfter,
	// DueBefore): filters of the page, read among the rows the other
	// filters select (no index leads with due_at alone).
	DueAfter, DueBefore time.Time
}

// Store is the task store contract.
type Store interface {
	Keys // keys.go: by key, update, retention

	// Insert writes tasks, each in its own shard, idempotently on (topic,
	// key): a task whose topic and key exist already is not written and the
	// existing task is returned with Existing set, also when several callers
	// insert the same key concurrently. Results are in input order. Tasks
	// are written in as few statements as the engine allows.
	Insert(ctx context.Context, tasks []NewTask) ([]Inserted, error)

	// Get returns the task with this ID or ErrNotFound (also for malformed IDs,
	// wrapped with router.ErrBadID).
	Get(ctx context.Context, id string) (*task.Task, error)

	// Cancel moves a pending or claimed task to cancelled and returns it.
	// Cancelling a cancelled task returns it unchanged. Running, done and
	// dead tasks give a *ConflictError. A cancel racing a claim or a start
	// is decided by the row: exactly one of them wins.
	Cancel(ctx context.Context, id string) (*task.Task, error)

	// Scan reads, without changing anything, up to limit tasks of item with
	// status pending and due_at <= horizon, ordered by (due_at, id), strictly
	// after cursor. Tasks inserted during a walk are neither skipped (when
	// they sort after the cursor) nor repeated.
	Scan(ctx context.Context, item Item, horizon time.Time, after Cursor, limit int) ([]*task.Task, error)

	// Claim leases up to limit tasks of item to lease.Owner until lease.Until
	// with token lease.Token: pending tasks with due_at <= horizon, earliest
	// first, and claimed or running tasks whose lease ended before now.
	// Concurrent claimers get disjoint sets (SKIP LOCKED where the engine has
	// it). Returned refs carry lease.Token.
	Claim(ctx context.Context, item Item, horizon, now time.Time, lease Lease, limit int) ([]Ref, error)
	// ClaimAhead is Claim without the pending tasks due by now: a node
	// that delivers those at once claims them with ClaimRunning.
	ClaimAhead(ctx context.Context, item Item, horizon, now time.Time, lease Lease, limit int) ([]Ref, error)
	// ClaimRunning claims up to limit tasks of item due by now — those
	// whose lease ended, then pending ones, none of a paused topic — as
	// running under lease, their attempt counted (a Start's write in the
	// claim's), and returns them sorted by due time. Concurrent claimers
	// get disjoint sets.
	ClaimRunning(ctx context.Context, item Item, now time.Time, lease Lease, limit int) ([]*task.Task, error)

	// NextDue returns the earliest due_at of a pending task in item, and the
	// earliest lease end of a claimed or running task in item; zero times
	// when there are none. The scanner sleeps until the sooner.
	NextDue(ctx context.Context, item Item) (due, leaseEnd time.Time, err error)

	// Start moves claimed tasks to running for a delivery attempt: only rows
	// still claimed under the ref's token; attempts is incremented and the
	// lease extended to leaseUntil. It returns the started tasks (full rows,
	// Attempts already incremented), skipping refs that lost their claim.
	Start(ctx context.Context, refs []Ref, leaseUntil time.Time) ([]*task.Task, error)

	// Finish records delivery outcomes of running tasks under their tokens:
	// done, back to pending at RetryAt (lease cleared), or dead. Refs whose
	// token no longer matches are skipped. Rows are written in batches.
	Finish(ctx context.Context, outcomes []Outcome) error

	// Release returns claimed (not running) tasks to pending without
	// counting an attempt: a node shutting down gives back what it holds.
	Release(ctx context.Context, refs []Ref) error

	// ExtendHeld moves to until the lease end of the tasks in status
	// (claimed or running) held under any of tokens whose lease ends
	// before soon, except the IDs in except (given up by their holder).
	// It costs one statement per table whatever the number of tasks: a
	// node's heartbeat for everything it holds. It returns how many
	// leases it moved.
	ExtendHeld(ctx context.Context, status task.Status, tokens []int64, except []string, soon, until time.Time) (int, error)

	// EndLeases ends at now the claim (and, unless h.ClaimedOnly, running)
	// leases in item held by the owners h selects, so the scanner claims
	// those tasks again at once instead of when their leases run out: the
	// holder is known to be gone (a dead node) or to have lost them (a hot
	// tier that lost its data). Tokens are kept: a claim made afterwards
	// gets a new one, which fences off the old holder. It returns how many
	// leases it ended.
	EndLeases(ctx context.Context, item Item, now time.Time, h Holders) (int, error)

	// Requeue moves a dead task back to pending, due at dueAt, with its
	// attempt count reset. Other states give a *ConflictError.
	Requeue(ctx context.Context, id string, dueAt time.Time) (*task.Task, error)

	// Purge deletes a final task (done, dead or cancelled) now instead of
	// when its retention ends, and returns it as it was. Its key hold
	// goes with it. Live tasks give a *ConflictError, unknown IDs (and
	// one purged meanwhile) ErrNotFound.
	Purge(ctx context.Context, id string) (*task.Task, error)

	// List returns tasks matching f in ID order (creation order), after
	// f.After, across all shards.
	List(ctx context.Context, f ListFilter) ([]*task.Task, error)

	// Count returns the number of tasks per status across all shards.
	Count(ctx context.Context) (map[task.Status]int64, error)

	// CountTopics returns the number of tasks per topic and status across
	// all shards, with each pending group's earliest due time (the
	// leader's metrics: metrics.Gauges). It reads every row.
	CountTopics(ctx context.Context) ([]TopicCount, error)

	// Items lists every sharding item of the topology.
	Items() []Item

	// Ping checks that every database answers.
	Ping(ctx context.Context) error

	Close() error
}

// Holders selects lease holders for EndLeases: those in Only (when set),
// or all but those in Except. A node restarted under the same ID does not
// hold what its previous process claimed, even when it is in Except:
//
//   - Incarnations (node → the incarnation of its current process): the
//     leases it holds under tokens of another incarnation (see Incarnation)
//     count as gone. Tokens say which process made them, so no clock is
//     compared.
//   - Restarted (node → when its current process started): for the rows it
//     holds under unattributed tokens (NewToken's), or when its
//     incarnation is unknown, the rows last written before that instant
//     count as gone.
type Holders struct {
	Only         []string
	Except       []string
	ClaimedOnly  bool
	Incarnations map[string]int64
	Restarted    map[string]time.Time
}

// MaxErrorBytes is the longest last_error a task keeps (the column's width).
const MaxErrorBytes = 1024

// ErrorText makes s fit last_error: valid UTF-8 (a receiver's reply may be
// any bytes, and PostgreSQL refuses invalid text, failing the whole batch
// of outcomes it is in) and at most MaxErrorBytes, cut on a character
// boundary.
func ErrorText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= MaxErrorBytes {
		return s
	}
	cut := MaxErrorBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// NewToken returns a fresh, non-zero claim token (Lease.Token) that says
// nothing of the process that made it (below AttributedTokens). A node
// claims under its Incarnation's tokens; NewToken is for claims made for
// another node (a handoff) and for versions.
func NewToken() int64 {
	return 1 + rand.Int64N(AttributedTokens-1)
}

// Claim tokens carry the incarnation of the process that made them: bits
// 40–62 hold the incarnation's ID, bits 0–39 a counter that starts at a
// random point. Tokens below AttributedTokens (incarnation 0) are
// unattributed (NewToken).
const (
	incarnationShift = 40
	// AttributedTokens is the least token that carries an incarnation.
	AttributedTokens = int64(1) << incarnationShift
	maxIncarnation   = int64(1)<<(63-incarnationShift) - 1
)

// Incarnation is one process of a node: a random ID drawn at its start,
// published with the node's registration (ontime_nodes, etcd's membership
// value), and carried by every claim token the process makes. A node
// killed and restarted under the same node_id within cluster.lease_ttl
// never leaves the live list; its new incarnation tells every node at
// once that the leases under the old one's tokens are held by nobody.
// Safe for concurrent use.
type Incarnation struct {
	id   int64
	next atomic.Int64
}

// NewIncarnation draws a process's incarnation.
func NewIncarnation() *Incarnation {
	i := &Incarnation{id: 1 + rand.Int64N(maxIncarnation)}
	// A random start keeps two nodes that drew the same ID (one chance in
	// 8 million) from making the same tokens.
	i.next.Store(rand.Int64N(AttributedTokens / 2))
	return i
}

// ID is the incarnation's ID, never 0.
func (i *Incarnation) ID() int64 { return i.id }

// Token returns a fresh claim token of this incarnation.
func (i *Incarnation) Token() int64 {
	return i.id<<incarnationShift | (i.next.Add(1) & (AttributedTokens - 1))
}

// IncarnationTokens is the range of the tokens incarnation id makes.
func IncarnationTokens(id int64) (lo, hi int64) {
	lo = id << incarnationShift
	return lo, lo | (AttributedTokens - 1)
}

// TokenIncarnation is the incarnation that made token (0: unattributed).
func TokenIncarnation(token int64) int64 { return token >> incarnationShift }

// TopicCount is one topic's tasks in one status (Store.CountTopics).
type TopicCount struct {
	Topic  string
	Status task.Status
	N      int64
	// MinDue is the earliest due time among them (pending only; zero
	// for the other statuses).
	MinDue time.Time
}
