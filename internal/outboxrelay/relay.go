// Package outboxrelay turns the committed messages of users' outbox tables
// (written by the public package outbox) into ontime tasks.
//
// One relay per entry of `outboxes:`. Its items are the (database, table,
// segment) triples of the outbox; the node registers them as a scan job's
// items, so the cluster's coordinator spreads them over live nodes, fences
// them and moves a dead node's items (internal/scanjob). An item's run loops
// until the item leaves the node:
//
//  1. in-flight rows (status 1) whose task has ended are finished (deleted,
//     or marked relayed), by a loop of the item's own: at once for a task
//     this node's completer ended (TasksEnded), else when a periodic read
//     of the tasks finds it ended;
//  2. the waiting rows (status 0, next_select_time passed) with no
//     unfinished earlier row of their key, in id order, are submitted as
//     tasks, keyed by "KEY#OUTBOX/DB.TABLE/ID": a re-relay after a crash
//     finds the task it made (the store's topic+key uniqueness) instead of
//     making a second one;
//  3. a keyed row becomes in flight (its key waits for its task to end), a
//     keyless one is finished at once; a row that can never be a task is
//     set aside (status 3, last_error); one that cannot be one yet waits
//     with backoff (retry_count, next_select_time) and holds back only its
//     own key.
//
// Polling adapts: at once again while a pass found work, doubling up to
// idle_poll while it finds none.
package outboxrelay

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ontimehq/ontime/internal/metrics"
	"github.com/ontimehq/ontime/internal/sqldb"
	"github.com/ontimehq/ontime/internal/submit"
	"github.com/ontimehq/ontime/internal/task"
	"github.com/ontimehq/ontime/outbox"
)

// Defaults and bounds of an outbox's settings.
const (
	DefaultIdlePoll   = time.Second
	MinIdlePoll       = 10 * time.Millisecond
	MaxIdlePoll       = time.Minute
	DefaultBatch      = 500
	MaxBatch          = 5000
	DefaultBackoff    = time.Second
	DefaultBackoffMax = 5 * time.Minute
	MaxTables         = 1024
	MaxSegments       = 64
	// busyPoll is the pause after a pass that found work: short enough
	// for a busy outbox, long enough not to spin on one that has only
	// in-flight rows.
	busyPoll = 5 * time.Millisecond
	// reportGap is the least time between two reports of a busy run. A
	// report is a fenced write (a commit) on the store: made after every
	// pass, it was a quarter of a busy pass's time, and a message written
	// meanwhile waited for it. An item lost to another node is noticed up
	// to this late; a message relayed twice meanwhile makes one task (its
	// key).
	reportGap = 250 * time.Millisecond
	// reportEvery bounds how long an idle run goes without proving it
	// still holds its item.
	reportEvery = 5 * time.Second
	// inflightChunk bounds the rows of one UPDATE that puts rows in
	// flight (its parameters).
	inflightChunk = 500
	// readTasksEvery bounds how often a finish loop reads the tasks of its
	// in-flight rows. It finishes the rows of tasks this node's completer
	// ended without reading them (TasksEnded); those ended elsewhere (a
	// retry another node claimed, a task of a failed-over item) and
	// failed attempts (the row's last_error) are seen this late. Read on
	// every round, under load, the tasks were the store's costliest
	// statement of the outbox's path (a read of ~20 tasks per finished
	// message, planned anew each time).
	readTasksEvery = 250 * time.Millisecond
	// oldestEvery bounds how often a run reads its oldest row's age (two
	// queries): every pass, they were two of a busy pass's round trips,
	// every 5 ms, for a gauge.
	oldestEvery = time.Second
)

// Config is one outbox.
type Config struct {
	Name      string
	Driver    string   // mysql | postgres | sqlite
	Databases []string // DSNs
	Table     string   // "outbox", or "outbox_{table}" with Tables > 1
	Tables    int
	Segments  int
	IdlePoll  time.Duration
	OnRelay   string // delete | mark
	Batch     int
}

// Normalize fills defaults and checks every field; errors name the field.
func (c *Config) Normalize() error {
	if err := validName(c.Name); err != nil {
		return fmt.Errorf("name: %w", err)
	}
	switch c.Driver {
	case sqldb.MySQL, sqldb.Postgres, sqldb.SQLite:
	default:
		return fmt.Errorf("driver: %q is not one of mysql, postgres, sqlite", c.Driver)
	}
	if len(c.Databases) == 0 {
		return errors.New("databases: at least one DSN is required")
	}
	for i, d := range c.Databases {
		if strings.TrimSpace(d) == "" {
			return fmt.Errorf("databases[%d]: is empty", i)
		}
	}
	if c.Tables == 0 {
		c.Tables = 1
	}
	if c.Tables < 1 || c.Tables > MaxTables {
		return fmt.Errorf("tables: %d is out of range 1..%d", c.Tables, MaxTables)
	}
	if n := strings.Count(c.Table, "{table}"); n > 1 || (n == 0 && c.Tables > 1) {
		return fmt.Errorf("table: %q must hold {table} once when tables > 1", c.Table)
	}
	if c.Table == "" {
		return errors.New("table: is required")
	}
	if err := outbox.ValidateTableName(strings.ReplaceAll(c.Table, "{table}", "0"), outbox.Dialect(c.Driver)); err != nil {
		var fe *outbox.FieldError
		if errors.As(err, &fe) {
			return fmt.Errorf("table: %s", fe.Message)
		}
		return err
	}
	if c.Segments == 0 {
		c.Segments = 1
	}
	if c.Segments < 1 || c.Segments > MaxSegments {
		return fmt.Errorf("segments: %d is out of range 1..%d", c.Segments, MaxSegments)
	}
	if c.IdlePoll == 0 {
		c.IdlePoll = DefaultIdlePoll
	}
	if c.IdlePoll < MinIdlePoll || c.IdlePoll > MaxIdlePoll {
		return fmt.Errorf("idle_poll: %s is out of range %s..%s", c.IdlePoll, MinIdlePoll, MaxIdlePoll)
	}
	switch c.OnRelay {
	case "":
		c.OnRelay = "delete"
	case "delete", "mark":
	default:
		return fmt.Errorf("on_relay: %q is not one of delete, mark", c.OnRelay)
	}
	if c.Batch == 0 {
		c.Batch = DefaultBatch
	}
	if c.Batch < 1 || c.Batch > MaxBatch {
		return fmt.Errorf("batch: %d is out of range 1..%d", c.Batch, MaxBatch)
	}
	return nil
}

// validName: 1–32 of A-Z a-z 0-9 _ - (it goes into task keys and job names).
func validName(n string) error {
	if n == "" || len(n) > 32 {
		return fmt.Errorf("%q must be 1–32 characters", n)
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("%q has %q at position %d; allowed are A-Z a-z 0-9 _ -", n, c, i)
		}
	}
	return nil
}

// JobName is the scan job that carries the outbox's items.
func JobName(outboxName string) string { return "outbox." + outboxName }

// Tasks is what the relay needs of the node: its submit path.
type Tasks interface {
	Submit(ctx context.Context, specs []task.Spec) ([]submit.Result, error)
	// GetMany returns the tasks of ids that exist, by ID.
	GetMany(ctx context.Context, ids []string) (map[string]*task.Task, error)
}

// Relay relays one outbox.
type Relay struct {
	cfg   Config
	d     outbox.Dialect
	dbs   []*sql.DB
	tasks Tasks
	log   *slog.Logger
	m     *metrics.Outbox

	mu     sync.Mutex
	oldest map[int]time.Duration // item → age of its oldest unfinished row
	counts map[int]itemCounts    // item → its rows by status, held keys (refreshed every reportEvery)
	tables []tableCounters       // db*Tables+table → what this node relayed of it
	wake   chan struct{}         // Wake: a message was written
	ended  chan struct{}         // TasksEnded: a watched task ended
	// watch: item → the tasks its in-flight rows wait on (TasksEnded).
	watch map[int]map[string]struct{}
	// listeners: database → its LISTEN connection (PostgreSQL).
	listeners map[int]*listener
	// ends, endsPrev: the tasks this node's completer ended lately
	// (TasksEnded), two generations of at most endsMax.
	ends, endsPrev map[string]localEnd
}

// New opens the outbox's databases (lazily: nothing connects yet).
func New(cfg Config, tasks Tasks, log *slog.Logger, m *metrics.Outbox) (*Relay, error) {
	if err := cfg.Normalize(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if m == nil {
		m = metrics.NewOutbox(nil)
	}
	r := &Relay{cfg: cfg, d: outbox.Dialect(cfg.Driver), tasks: tasks, log: log, m: m, oldest: map[int]time.Duration{},
		counts: map[int]itemCounts{}, watch: map[int]map[string]struct{}{}, listeners: map[int]*listener{}, ends: map[string]localEnd{}, tables: make([]tableCounters, len(cfg.Databases)*cfg.Tables), wake: make(chan struct{}), ended: make(chan struct{})}
	for i, dsn := range cfg.Databases {
		// The relay's writes to an outbox table (a row in flight,
		// finished, set aside, waiting to retry) are safe to lose: the
		// task store's commit of a message's task is what makes it
		// relayed, and a row the server forgot it had moved is relayed
		// again and finds that task (its key). So on PostgreSQL they
		// commit without waiting for the disk: a pass had two commits to
		// wait for (the task's and the row's), and commit → delivery
		// was mostly the wait for the pass under way.
		db, err := sqldb.Open(cfg.Driver, dsn, sqldb.Options{SQLite: "_pragma=busy_timeout(10000)&_txlock=immediate", AsyncCommit: true})
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("databases[%d]: %w", i, err)
		}
		if cfg.Driver == sqldb.SQLite {
			db.SetMaxOpenConns(1)
		} else {
			// Every item of the database runs at once, each with its
			// finisher: as many idle connections as open ones, or each
			// pass past the second would open a connection (a PostgreSQL
			// backend's fork) and close it again.
			n := 2*cfg.Tables*cfg.Segments + 2
			db.SetMaxOpenConns(n)
			db.SetMaxIdleConns(n)
			db.SetConnMaxIdleTime(time.Minute)
			db.SetConnMaxLifetime(time.Hour)
		}
		r.dbs = append(r.dbs, db)
	}
	r.m.Oldest.WithLabelValues(cfg.Name).Set(0)
	r.publishCounts()
	return r, nil
}

// Close closes the databases.
func (r *Relay) Close() {
	for _, db := range r.dbs {
		db.Close()
	}
}

// Name is the outbox's name.
func (r *Relay) Name() string { return r.cfg.Name }

// Items is the number of items: databases × tables × segments.
func (r *Relay) Items() int { return len(r.cfg.Databases) * r.cfg.Tables * r.cfg.Segments }

// item is one (database, table, segment).
type item struct {
	n, db, table, seg int
	name              string // the table's name
}

func (r *Relay) item(i int) item {
	seg := i % r.cfg.Segments
	t := (i / r.cfg.Segments) % r.cfg.Tables
	db := i / (r.cfg.Segments * r.cfg.Tables)
	return item{n: i, db: db, table: t, seg: seg, name: strings.ReplaceAll(r.cfg.Table, "{table}", strconv.Itoa(t))}
}

// Run relays item i until stopping reports true or ctx ends. report
// records a page and says whether the item is still this node's
// (scanjob.ErrLost when not: the run ends).
func (r *Relay) Run(ctx context.Context, i int, stopping func() bool, report func(ctx context.Context, fetched, processed, failed int) error) error {
	it := r.item(i)
	defer r.setOldest(i, 0)
	defer r.setCounts(i, nil)
	defer r.setWatch(i, nil)
	defer r.listen(it.db)()
	// The item's in-flight rows are finished by a loop of their own
	// (finish), beside the passes that relay heads: a message's latency is
	// the wait for the pass under way, and reading every in-flight row's
	// task made each pass longer. They signal each other: a pass that put
	// keyed rows in flight (relayed), a finish that freed keys (freed).
	f := &finisher{relayed: make(chan struct{}, 1), freed: make(chan struct{}, 1), errc: make(chan error, 1)}
	fctx, stopFinish := context.WithCancel(ctx)
	go func() { f.errc <- r.finish(fctx, it, f) }()
	defer func() {
		stopFinish()
		<-f.errc
	}()
	wait := busyPoll
	cause := "poll"
	lastReport := time.Now()
	var unreported pageCounts
	defer func() {
		// What the last passes did, unless the item is gone or the node
		// is stopping (ctx ended: nothing more can be written).
		unreported.addFinished(f.finished.Swap(0))
		if ctx.Err() == nil && unreported.worked() {
			_ = unreported.report(ctx, report)
		}
	}()
	var lastCount, lastOldest time.Time
	for !stopping() {
		if time.Since(lastCount) >= reportEvery {
			c, err := r.countItem(ctx, it)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("outbox %s item %d (%s): %w", r.cfg.Name, i, it.name, err)
			}
			r.setCounts(i, &c)
			lastCount = time.Now()
		}
		// Taken before the pass: a message written during it wakes the
		// wait that follows.
		woken := r.wakeCh()
		withOldest := time.Since(lastOldest) >= oldestEvery
		st, err := r.pass(ctx, it, withOldest)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("outbox %s item %d (%s): %w", r.cfg.Name, i, it.name, err)
		}
		if st.inFlight > 0 {
			signal(f.relayed)
		}
		if withOldest {
			lastOldest = time.Now()
		}
		r.m.Passes.WithLabelValues(r.cfg.Name, cause, strconv.FormatBool(st.fetched > 0)).Inc()
		cause = "poll"
		unreported.add(st)
		unreported.addFinished(f.finished.Swap(0))
		if since := time.Since(lastReport); unreported.worked() && since >= reportGap || since > reportEvery {
			if err := unreported.report(ctx, report); err != nil {
				return err
			}
			lastReport = time.Now()
		}
		// Listening, a new row wakes the item (NOTIFY), a freed key the
		// finisher: polls would find nothing.
		wait = r.nextWait(wait, st.relayed+st.setAside > 0, r.listening(it.db))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case err := <-f.errc:
			t.Stop()
			f.errc <- nil // for the deferred wait
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("outbox %s item %d (%s): %w", r.cfg.Name, i, it.name, err)
		case <-woken:
			t.Stop()
			wait, cause = busyPoll, "wake"
		case <-f.freed:
			// Keys freed: their next rows are heads now.
			t.Stop()
			wait, cause = busyPoll, "freed"
		case <-t.C:
		}
	}
	return nil
}

// nextWait is a loop's pause before its next round: busyPoll after one
// that worked; IdlePoll when quiet (something else wakes the loop);
// else the last pause doubled, up to IdlePoll.
func (r *Relay) nextWait(last time.Duration, worked, quiet bool) time.Duration {
	switch {
	case worked:
		return busyPoll
	case quiet:
		return r.cfg.IdlePoll
	default:
		return min(max(last*2, busyPoll), r.cfg.IdlePoll)
	}
}

// finisher is what an item's relay passes and its finish loop share.
type finisher struct {
	relayed, freed chan struct{} // cap 1: signal
	errc           chan error    // the finish loop's end
	finished       atomic.Int64  // rows finished, not reported yet
}

// signal wakes the waiter of c, at most one signal pending.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// finish finishes item it's in-flight rows whose tasks ended, until ctx
// ends: at once when a task this node delivered ends (TasksEnded) or a
// pass put rows in flight, else polling (tasks delivered by other nodes
// tell nobody here), backing off to IdlePoll while nothing ends, and
// waiting for a pass while nothing is in flight.
func (r *Relay) finish(ctx context.Context, it item, f *finisher) error {
	db := r.dbs[it.db]
	q := outbox.Quote(it.name, r.d)
	wait := busyPoll
	var lastRead time.Time
	for {
		ended := r.endedCh()
		read := time.Since(lastRead) >= readTasksEvery
		n, watch, err := r.finishEnded(ctx, db, q, it, read)
		if read {
			lastRead = time.Now()
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		inFlight := len(watch)
		r.setWatch(it.n, watch) // the relay's now: passes add to it
		if n > 0 {
			f.finished.Add(int64(n))
			signal(f.freed)
		}
		// Nothing in flight: a pass that relays keyed rows says so.
		wait = r.nextWait(wait, n > 0, inFlight == 0)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-ended:
			t.Stop()
			wait = busyPoll
		case <-f.relayed:
			// Rows put in flight since the watch was read: read it again,
			// or their tasks' ends would not wake this loop.
			t.Stop()
			wait = busyPoll
		case <-t.C:
		}
	}
}

// pageCounts are the counts of passes not reported yet.
type pageCounts struct{ fetched, processed, failed int }

func (c *pageCounts) add(st passStats) {
	c.fetched += st.fetched
	c.processed += st.relayed
	c.failed += st.setAside + st.retried
}

// addFinished adds the rows the finish loop finished.
func (c *pageCounts) addFinished(n int64) { c.processed += int(n) }

func (c *pageCounts) worked() bool { return c.processed+c.failed > 0 }

func (c *pageCounts) report(ctx context.Context, report func(ctx context.Context, fetched, processed, failed int) error) error {
	err := report(ctx, c.fetched, c.processed, c.failed)
	*c = pageCounts{}
	return err
}

type passStats struct {
	fetched, relayed, setAside, retried int
	inFlight                            int // rows the pass put in flight
}

func (r *Relay) setOldest(i int, age time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if age == 0 {
		delete(r.oldest, i)
	} else {
		r.oldest[i] = age
	}
	var worst time.Duration
	for _, a := range r.oldest {
		worst = max(worst, a)
	}
	r.m.Oldest.WithLabelValues(r.cfg.Name).Set(worst.Seconds())
}

// prepared is the arguments of a statement a run sends on every pass,
// with the same text each time: on PostgreSQL it is prepared once per
// connection (pgx's statement cache) rather than parsed and planned anew,
// which cost more than running it (the heads' NOT EXISTS, 1.8× its run).
// The statements name their columns: a change of the table (re-applied
// DDL) makes the server plan them again, not fail.
func (r *Relay) prepared(args ...any) []any {
	if r.d != outbox.Postgres {
		return args
	}
	return append([]any{pgx.QueryExecModeCacheStatement}, args...)
}

func (r *Relay) ph(n int) string {
	if r.d == outbox.Postgres {
		return "$" + strconv.Itoa(n)
	}
	return "?"
}

// segWhere restricts a query to the item's segment (alias a).
func (r *Relay) segWhere(it item, a string) string {
	if r.cfg.Segments == 1 {
		return ""
	}
	return fmt.Sprintf(" AND %skey_shard %% %d = %d", a, r.cfg.Segments, it.seg)
}

// pass does one round of an item: relay the heads of keys; withOldest:
// and publish the age of its oldest row. The rows it puts in flight are
// added to the item's watch (their tasks' ends wake the finisher).
func (r *Relay) pass(ctx context.Context, it item, withOldest bool) (st passStats, err error) {
	db := r.dbs[it.db]
	q := outbox.Quote(it.name, r.d)
	watch := map[string]struct{}{}
	defer func() {
		st.inFlight = len(watch)
		r.addWatch(it.n, watch)
	}()
	now := time.Now()
	// The heads: waiting rows with no unfinished earlier row of their key
	// and no row of their key in flight. A row in backoff is still
	// waiting, so it holds back its key's later rows; set-aside and
	// relayed rows hold back nothing.
	query := fmt.Sprintf(`SELECT o.id, o.topic, o.msg_key, o.payload, o.target, o.due_at, o.max_attempts, o.retry_count
FROM %[1]s o WHERE o.status = 0 AND o.next_select_time <= %[2]s%[3]s
AND (o.msg_key = '' OR NOT EXISTS (SELECT 1 FROM %[1]s p WHERE p.msg_key = o.msg_key AND (p.status = 1 OR (p.status = 0 AND p.id < o.id))))
ORDER BY o.id LIMIT %[4]d`, q, r.ph(1), r.segWhere(it, "o."), r.cfg.Batch)
	rows, err := db.QueryContext(ctx, query, r.prepared(now.UnixMicro())...)
	if err != nil {
		return st, fmt.Errorf("select waiting messages: %w", err)
	}
	var msgs []msgRow
	for rows.Next() {
		var m msgRow
		if err := rows.Scan(&m.id, &m.topic, &m.key, &m.payload, &m.target, &m.dueAt, &m.maxAttempts, &m.retries); err != nil {
			rows.Close()
			return st, fmt.Errorf("read waiting messages: %w", err)
		}
		msgs = append(msgs, m)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return st, fmt.Errorf("read waiting messages: %w", err)
	}
	st.fetched = len(msgs)
	if withOldest {
		if err := r.oldestAge(ctx, db, q, it, now); err != nil {
			return st, err
		}
	}
	if len(msgs) == 0 {
		return st, nil
	}
	specs := make([]task.Spec, 0, len(msgs))
	var sent []msgRow
	var aside []outcome
	for _, m := range msgs {
		sp, err := r.spec(it, m)
		if err != nil {
			aside = append(aside, outcome{id: m.id, err: err.Error()})
			continue
		}
		specs = append(specs, sp)
		sent = append(sent, m)
	}
	var res []submit.Result
	if len(specs) > 0 {
		res, err = r.tasks.Submit(ctx, specs)
		if err != nil {
			return st, fmt.Errorf("submit: %w", err)
		}
	}
	var finish []int64
	var inflight, retry []outcome
	for i, m := range sent {
		rs := res[i]
		switch {
		case rs.Err == nil:
			st.relayed++
			if m.key.String == "" {
				finish = append(finish, m.id)
			} else {
				inflight = append(inflight, outcome{id: m.id, taskID: rs.Task.ID})
				watch[rs.Task.ID] = struct{}{}
			}
		case errors.Is(rs.Err, task.ErrNoHandler):
			// A handler's node may be restarting: try again later.
			retry = append(retry, outcome{id: m.id, err: rs.Err.Error(), retries: m.retries})
		case errors.Is(rs.Err, task.ErrInvalid):
			aside = append(aside, outcome{id: m.id, err: rs.Err.Error()})
		default:
			retry = append(retry, outcome{id: m.id, err: rs.Err.Error(), retries: m.retries})
		}
	}
	st.setAside, st.retried = len(aside), len(retry)
	if err := r.write(ctx, db, q, finish, inflight, aside, retry, now); err != nil {
		return st, err
	}
	r.record(it.db*r.cfg.Tables+it.table, now, st.relayed, st.setAside+st.retried)
	r.m.Messages.WithLabelValues(r.cfg.Name, "relayed").Add(float64(st.relayed))
	r.m.Messages.WithLabelValues(r.cfg.Name, "set_aside").Add(float64(st.setAside))
	r.m.Messages.WithLabelValues(r.cfg.Name, "retried").Add(float64(st.retried))
	for _, a := range aside {
		r.log.Warn("outbox message set aside", "outbox", r.cfg.Name, "table", it.name, "id", a.id, "err", a.err)
	}
	return st, nil
}

type msgRow struct {
	id                 int64
	topic, key, target sql.NullString
	payload            []byte
	dueAt, maxAttempts sql.NullInt64
	retries            int64
}

type outcome struct {
	id      int64
	taskID  string
	err     string
	retries int64
}

// TaskKey is the key of the task a message becomes: its own key, then
// where it is, so that the same row always makes the same key.
func (r *Relay) TaskKey(it item, key string, id int64) string {
	return fmt.Sprintf("%s#%s/%d.%d/%d", key, r.cfg.Name, it.db, it.table, id)
}

// spec makes a row's task spec; an error sets the row aside.
func (r *Relay) spec(it item, m msgRow) (task.Spec, error) {
	switch {
	case !m.topic.Valid:
		return task.Spec{}, errors.New("topic: is NULL")
	case !m.key.Valid:
		return task.Spec{}, errors.New("msg_key: is NULL")
	case !m.target.Valid:
		return task.Spec{}, errors.New("target: is NULL")
	case m.payload == nil:
		return task.Spec{}, errors.New("payload: is NULL")
	}
	if err := outbox.ValidateKey(m.key.String); err != nil {
		return task.Spec{}, err
	}
	sp := task.Spec{Topic: m.topic.String, Key: r.TaskKey(it, m.key.String, m.id), Payload: m.payload,
		Target: m.target.String, MaxAttempts: int(m.maxAttempts.Int64)}
	if m.dueAt.Int64 > 0 {
		due := time.UnixMicro(m.dueAt.Int64)
		sp.DueAt = &due
	}
	return sp, nil
}

// write records a pass's outcomes, atomically: one statement alone (the
// usual case: all keyless, or all keyed) commits by itself, without the
// round trips of BEGIN and COMMIT; several run in one transaction.
func (r *Relay) write(ctx context.Context, db *sql.DB, q string, finish []int64, inflight, aside, retry []outcome, now time.Time) error {
	type stmt struct {
		what, query string
		args        []any
	}
	var stmts []stmt
	if len(finish) > 0 {
		stmts = append(stmts, stmt{"relayed", r.finishStmt(q, finish), nil})
	}
	// The in-flight rows in one statement per inflightChunk rows, each
	// row's task ID by a CASE on its id: a statement per row cost a round
	// trip each, hundreds per pass at 1,000 keyed messages/s.
	for start := 0; start < len(inflight); start += inflightChunk {
		chunk := inflight[start:min(start+inflightChunk, len(inflight))]
		var cases, ids strings.Builder
		args := make([]any, 0, len(chunk))
		for i, o := range chunk {
			fmt.Fprintf(&cases, " WHEN %d THEN %s", o.id, r.ph(i+1))
			args = append(args, o.taskID)
			if i > 0 {
				ids.WriteString(", ")
			}
			ids.WriteString(strconv.FormatInt(o.id, 10))
		}
		stmts = append(stmts, stmt{"relayed", fmt.Sprintf(`UPDATE %s SET status = %d, task_id = CASE id%s END, last_error = '' WHERE id IN (%s)`,
			q, outbox.StatusInFlight, cases.String(), ids.String()), args})
	}
	for _, o := range aside {
		stmts = append(stmts, stmt{"set-aside", fmt.Sprintf(`UPDATE %s SET status = %d, last_error = %s WHERE id = %s`, q, outbox.StatusSetAside, r.ph(1), r.ph(2)),
			[]any{clip(o.err), o.id}})
	}
	for _, o := range retry {
		next := now.Add(backoff(o.retries)).UnixMicro()
		stmts = append(stmts, stmt{"retried", fmt.Sprintf(`UPDATE %s SET retry_count = retry_count + 1, next_select_time = %s, last_error = %s WHERE id = %s`, q, r.ph(1), r.ph(2), r.ph(3)),
			[]any{next, clip(o.err), o.id}})
	}
	switch len(stmts) {
	case 0:
		return nil
	case 1:
		if _, err := db.ExecContext(ctx, stmts[0].query, stmts[0].args...); err != nil {
			return fmt.Errorf("record %s messages: %w", stmts[0].what, err)
		}
		return nil
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("record relayed messages: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	for _, st := range stmts {
		if _, err := tx.ExecContext(ctx, st.query, st.args...); err != nil {
			return fmt.Errorf("record %s messages: %w", st.what, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("record relayed messages: %w", err)
	}
	return nil
}

// backoff is the wait before a message's next try: 1s·2^retries, at most
// DefaultBackoffMax.
func backoff(retries int64) time.Duration {
	d := DefaultBackoff
	for range min(retries, 20) {
		d *= 2
		if d >= DefaultBackoffMax {
			return DefaultBackoffMax
		}
	}
	return d
}

func clip(s string) string {
	if len(s) <= 1000 {
		return s
	}
	// At a rune's boundary: MySQL refuses a cut character.
	return strings.ToValidUTF8(s[:1000], "")
}

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// finishRows deletes the rows, or marks them relayed (on_relay: mark).
func (r *Relay) finishRows(ctx context.Context, ex execer, q string, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	if _, err := ex.ExecContext(ctx, r.finishStmt(q, ids)); err != nil {
		return fmt.Errorf("finish relayed messages: %w", err)
	}
	return nil
}

// finishStmt deletes the rows of ids, or marks them relayed.
func (r *Relay) finishStmt(q string, ids []int64) string {
	var sb strings.Builder
	for i, id := range ids {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(strconv.FormatInt(id, 10))
	}
	if r.cfg.OnRelay == "mark" {
		return fmt.Sprintf(`UPDATE %s SET status = %d WHERE id IN (%s)`, q, outbox.StatusRelayed, sb.String())
	}
	return fmt.Sprintf(`DELETE FROM %s WHERE id IN (%s)`, q, sb.String())
}

// finishEnded finishes the in-flight rows whose task has ended (or is
// gone: deleted by retention), which lets their keys' next rows go. Those
// whose task this node's completer ended go at once; with readTasks, the
// tasks of the others are read.
func (r *Relay) finishEnded(ctx context.Context, db *sql.DB, q string, it item, readTasks bool) (int, map[string]struct{}, error) {
	rows, err := db.QueryContext(ctx, fmt.Sprintf(`SELECT id, task_id, last_error FROM %s WHERE status = %d%s ORDER BY id LIMIT %d`,
		q, outbox.StatusInFlight, r.segWhere(it, ""), r.cfg.Batch), r.prepared()...)
	if err != nil {
		return 0, nil, fmt.Errorf("select in-flight messages: %w", err)
	}
	type fl struct {
		id          int64
		task, lastE string
	}
	var all []fl
	for rows.Next() {
		var f fl
		if err := rows.Scan(&f.id, &f.task, &f.lastE); err != nil {
			rows.Close()
			return 0, nil, fmt.Errorf("read in-flight messages: %w", err)
		}
		all = append(all, f)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, nil, fmt.Errorf("read in-flight messages: %w", err)
	}
	if len(all) == 0 {
		return 0, nil, nil
	}
	// The rest: one read of their tasks (a query per store database),
	// not a Get per row: at 1,000 messages/s hundreds are in flight.
	tasks := make(map[string]*task.Task, len(all))
	var ids []string
	for _, f := range all {
		if e, ok := r.endedHere(f.task); ok {
			tasks[f.task] = &task.Task{ID: f.task, Status: e.status, LastError: e.err}
		} else if readTasks {
			ids = append(ids, f.task)
		}
	}
	if len(ids) > 0 {
		read, err := r.tasks.GetMany(ctx, ids)
		if err != nil {
			return 0, nil, fmt.Errorf("tasks of %d in-flight messages: %w", len(ids), err)
		}
		for _, id := range ids {
			if t, ok := read[id]; ok {
				tasks[id] = t
			} else {
				tasks[id] = nil // gone
			}
		}
	}
	var done []int64
	var failing []outcome
	watch := make(map[string]struct{}, len(all))
	delivered, dead := 0, 0
	for _, f := range all {
		t, known := tasks[f.task]
		if !known {
			// Not ended here, not read this round.
			watch[f.task] = struct{}{}
			continue
		}
		ok := t != nil
		ended := !ok || t.Status == task.StatusDone || t.Status == task.StatusDead || t.Status == task.StatusCancelled
		if !ended {
			watch[f.task] = struct{}{}
		}
		switch {
		case !ok:
			// Gone: deleted by retention (or never stored, which a
			// submit that answered its ID rules out).
			done = append(done, f.id)
		case t.Status == task.StatusDone:
			done = append(done, f.id)
			delivered++
		case t.Status == task.StatusDead || t.Status == task.StatusCancelled:
			// Dead or cancelled: the key goes on; the task stays in the
			// dead list (GET /v1/dead) to requeue.
			done = append(done, f.id)
			dead++
			r.log.Warn("outbox message's task ended "+t.Status.String()+"; its key goes on", "outbox", r.cfg.Name, "id", f.id, "task", f.task, "err", t.LastError)
		case t.Attempts > 0 && t.LastError != "" && clip(t.LastError) != f.lastE:
			// The task failed an attempt and waits to retry: its key's
			// later messages are held back. The row says so (last_error,
			// retry_count: attempts), for GET /v1/outboxes on any node.
			failing = append(failing, outcome{id: f.id, err: t.LastError, retries: int64(t.Attempts)})
		}
	}
	if err := r.finishRows(ctx, db, q, done); err != nil {
		return 0, nil, err
	}
	for _, o := range failing {
		if _, err := db.ExecContext(ctx, fmt.Sprintf(`UPDATE %s SET last_error = %s, retry_count = %s WHERE id = %s AND status = %d`,
			q, r.ph(1), r.ph(2), r.ph(3), outbox.StatusInFlight), clip(o.err), o.retries, o.id); err != nil {
			return 0, nil, fmt.Errorf("record a failing message: %w", err)
		}
	}
	r.m.Messages.WithLabelValues(r.cfg.Name, "delivered").Add(float64(delivered))
	r.m.Messages.WithLabelValues(r.cfg.Name, "dead").Add(float64(dead))
	return len(done), watch, nil
}

// oldestAge publishes the age of the item's oldest unfinished row (by
// created_at; (status, id) finds the lowest id of each status at once).
func (r *Relay) oldestAge(ctx context.Context, db *sql.DB, q string, it item, now time.Time) error {
	var oldest int64
	for _, s := range []int{outbox.StatusWaiting, outbox.StatusInFlight} {
		var c sql.NullInt64
		err := db.QueryRowContext(ctx, fmt.Sprintf(`SELECT created_at FROM %s WHERE status = %d%s ORDER BY id LIMIT 1`,
			q, s, r.segWhere(it, "")), r.prepared()...).Scan(&c)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("oldest message: %w", err)
		}
		if c.Valid && c.Int64 > 0 && (oldest == 0 || c.Int64 < oldest) {
			oldest = c.Int64
		}
	}
	age := time.Duration(0)
	if oldest > 0 {
		age = max(now.Sub(time.UnixMicro(oldest)), time.Nanosecond)
	}
	r.setOldest(it.n, age)
	return nil
}
