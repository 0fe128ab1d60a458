// Package submit is the front of the pipeline: it validates tasks, routes
// each to its shard, inserts them, and puts those due within the preheat
// window straight into the hot tier once their rows have committed (the
// scan stage finds the others). It also serves the reads and state changes
// of single tasks the API offers.
package submit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/ontimehq/ontime/internal/halves"
	"github.com/ontimehq/ontime/internal/hot"
	"github.com/ontimehq/ontime/internal/metrics"
	"github.com/ontimehq/ontime/internal/router"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
	"github.com/ontimehq/ontime/internal/tracing"
)

// Store is what the submit path needs of the store.
type Store interface {
	Insert(ctx context.Context, tasks []store.NewTask) ([]store.Inserted, error)
	Get(ctx context.Context, id string) (*task.Task, error)
	Cancel(ctx context.Context, id string) (*task.Task, error)
	Requeue(ctx context.Context, id string, dueAt time.Time) (*task.Task, error)
	Purge(ctx context.Context, id string) (*task.Task, error)
	List(ctx context.Context, f store.ListFilter) ([]*task.Task, error)
	Ping(ctx context.Context) error
	// Release hands claimed tasks back (pending).
	Release(ctx context.Context, refs []store.Ref) error
	// keys.go
	GetByKey(ctx context.Context, topic, key string) (*task.Task, error)
	Update(ctx context.Context, id string, p store.Patch) (*task.Task, error)
}

// Tier is what the submit path needs of the hot tier.
type Tier interface {
	Add(ctx context.Context, entries ...hot.Entry) error
	Remove(ctx context.Context, entries ...hot.Entry) error
}

// Notifier wakes the scanner of an item when a task enters the window
// sooner than it planned to look (the scan stage).
type Notifier interface {
	Notify(it store.Item, at time.Time)
}

// Runner takes tasks due at once straight to delivery (the fire stage):
// inserted running under the lease RunNow gives, handed to Run once their
// rows have committed. Each task RunNow admits holds a place of the
// Runner's room until GiveRoom returns it: after Run, or when the insert
// failed or found the key taken.
type Runner interface {
	RunNow(topic string) (leaseUntil time.Time, ok bool)
	Run(tasks []*task.Task)
	GiveRoom(n int)
}

// Config wires a Service. Store, Tier, Planner and Notifier are required.
type Config struct {
	Store    Store
	Tier     Tier
	Planner  *hot.Planner
	Notifier Notifier
	Topology router.Topology // must match the store's
	Segments int             // must match the store's
	NodeID   string
	// Incarnation is this process's (nil: unattributed tokens): the
	// claims of tasks due soon carry its tokens (see scan.Config).
	Incarnation *store.Incarnation
	// Window is how far ahead tasks are claimed into the hot tier.
	Window time.Duration
	// LeaseTTL is how long a claim outlives the task's due time.
	LeaseTTL time.Duration
	Limits   task.Limits
	Logger   *slog.Logger
	Metrics  *metrics.Metrics // nil: series kept but not registered
	// GroupMax bounds the tasks of one group commit (groupcommit.go);
	// 0 is DefaultGroupMax, negative turns group commit off (every submit
	// commits alone).
	GroupMax int
	// GroupWriters is how many group commits per database (per table
	// with GroupByTable) may be written at once (0: 1, what SQLite's
	// single writer wants).
	GroupWriters int
	// GroupByTable gathers groups per table rather than per database: a
	// group of one table is one INSERT, which a server engine commits
	// without BEGIN and COMMIT round trips, and syncs together with the
	// other tables' concurrent commits by itself.
	GroupByTable bool
	// Runner, when set, delivers the tasks due at once that it admits
	// without the hot tier and a Start: they are inserted running. nil:
	// every task due within the window goes to the tier claimed.
	Runner Runner
	// Tracer, when set (tracing on), makes a span of each submit and
	// keeps its context with the tasks (store.NewTask.Traceparent) for
	// their deliveries to continue; nil: no span, nothing kept.
	Tracer trace.Tracer
}

// Service is the submit path. It answers ErrNotReady until SetReady(true).
type Service struct {
	cfg   Config
	log   *slog.Logger
	m     *metrics.Metrics
	ready atomic.Bool
	// groups: one committer per database (or table: GroupByTable), nil
	// when group commit is off.
	groups []*committer
	work   groupWork
}

// New checks cfg and builds the service.
func New(cfg Config) (*Service, error) {
	switch {
	case cfg.Store == nil, cfg.Tier == nil, cfg.Planner == nil, cfg.Notifier == nil:
		return nil, errors.New("submit: Store, Tier, Planner and Notifier are required")
	case cfg.NodeID == "":
		return nil, errors.New("submit: NodeID is required")
	case cfg.Segments < 1:
		return nil, errors.New("submit: Segments must be at least 1")
	case cfg.Window <= 0, cfg.LeaseTTL <= 0:
		return nil, errors.New("submit: Window and LeaseTTL must be positive")
	}
	if err := cfg.Topology.Validate(); err != nil {
		return nil, err
	}
	cfg.Limits = cfg.Limits.WithDefaults()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New(nil)
	}
	s := &Service{cfg: cfg, log: cfg.Logger, m: cfg.Metrics}
	if cfg.GroupMax == 0 {
		cfg.GroupMax = DefaultGroupMax
	}
	if cfg.GroupWriters < 1 {
		cfg.GroupWriters = 1
	}
	if cfg.GroupMax > 0 {
		lanes := cfg.Topology.Databases
		if cfg.GroupByTable {
			lanes *= cfg.Topology.Tables
		}
		for range lanes {
			s.groups = append(s.groups, &committer{max: cfg.GroupMax, writers: cfg.GroupWriters, sizes: cfg.Metrics.GroupSubmits})
		}
	}
	s.work = groupWork{insert: s.insertGroup, after: s.committed, dropped: s.giveRoom}
	return s, nil
}

// SetReady opens (true) or closes (false) the service to submits: the node
// opens it once the pipeline runs and closes it first when it stops.
func (s *Service) SetReady(ready bool) { s.ready.Store(ready) }

// Submit validates specs, stores the valid ones and answers one result per
// spec. A task due within the window is inserted already claimed by this
// node and goes to the hot tier once its row has committed.
func (s *Service) Submit(ctx context.Context, specs []task.Spec) (_ []Result, err error) {
	if !s.ready.Load() {
		return nil, ErrNotReady
	}
	var traceparent string
	if s.cfg.Tracer != nil {
		var span trace.Span
		ctx, span = s.cfg.Tracer.Start(ctx, "ontime.submit", trace.WithAttributes(attribute.Int("ontime.tasks", len(specs))))
		defer func() {
			if err != nil {
				span.RecordError(err)
				span.SetStatus(codes.Error, err.Error())
			}
			span.End()
		}()
		traceparent = tracing.Format(span.SpanContext())
	}
	now := time.Now()
	results := make([]Result, len(specs))
	news := make([]store.NewTask, 0, len(specs))
	pos := make([]int, 0, len(specs))
	valid := make([]task.Validated, len(specs))
	horizon := now.Add(s.cfg.Window)
	// One claim token for the tasks of one submit: they travel together,
	// and the store matches them in one predicate.
	token := s.token()
	// Each task checked and given its ID in its own place, a large batch
	// on two cores; the rest, which admits tasks to the Runner, in order.
	errs := make([]error, len(specs))
	ids := make([]string, len(specs))
	parsed := make([]router.ID, len(specs))
	halves.Do(len(specs), func(lo, hi int) {
		vb := task.NewBatch(s.cfg.Limits, now)
		for i := lo; i < hi; i++ {
			v, err := vb.Validate(specs[i])
			if err != nil {
				errs[i] = err
				continue
			}
			valid[i] = v
			hash := uint32(0)
			if v.Key != "" {
				hash = router.HashKey(v.Key)
			}
			ids[i], parsed[i] = router.NewID(now, hash, v.Key != "")
		}
	})
	for i, sp := range specs {
		if errs[i] != nil {
			s.m.Submitted.WithLabelValues("invalid").Inc()
			results[i].Err = errs[i]
			continue
		}
		v := valid[i]
		// A replace asked for a new task over a final one (keys.go).
		nt := store.NewTask{ID: ids[i], ShardHash: parsed[i].ShardHash, Seg: parsed[i].Segment(s.cfg.Segments), Validated: v, ReplaceFinal: sp.Replace, Traceparent: traceparent}
		switch {
		case s.runNow(v, now, &nt, token):
		case !v.DueAt.After(horizon):
			nt.Claim = &store.Lease{Owner: s.cfg.NodeID, Until: v.DueAt.Add(s.cfg.LeaseTTL), Token: token}
		}
		news = append(news, nt)
		pos = append(pos, i)
	}
	if len(news) == 0 {
		return results, nil
	}
	ins, err := s.insert(ctx, news)
	if err != nil {
		return nil, fmt.Errorf("submit: %w", err)
	}
	for j, r := range ins {
		results[pos[j]] = Result{Task: r.Task, Existing: r.Existing, HeldUntil: r.HeldUntil}
	}
	s.replace(ctx, results, specs, valid)
	return results, nil
}

// dueAtOnce is how far after the submit a task is still due at once: a
// task without a due time is due at the submit's time rounded up to the
// store's microsecond (task.CeilMicro); the Runner releases it no sooner
// than its due time all the same.
const dueAtOnce = time.Millisecond

// runNow makes nt, due at once, a task inserted running when the Runner
// admits it, and says whether it did.
func (s *Service) runNow(v task.Validated, now time.Time, nt *store.NewTask, token int64) bool {
	if s.cfg.Runner == nil || v.DueAt.After(now.Add(dueAtOnce)) {
		return false
	}
	lease, ok := s.cfg.Runner.RunNow(v.Topic)
	if !ok {
		return false
	}
	nt.Claim, nt.Running = &store.Lease{Owner: s.cfg.NodeID, Until: lease, Token: token}, true
	return true
}

// insert stores news and runs what follows the commit: through the group
// committer of their database when they are few and all bound for one
// database, else alone.
func (s *Service) insert(ctx context.Context, news []store.NewTask) ([]store.Inserted, error) {
	if c := s.committerOf(news); c != nil {
		return c.do(ctx, news, s.work)
	}
	ins, err := s.cfg.Store.Insert(ctx, news)
	if err != nil {
		s.giveRoom(news)
		return nil, err
	}
	s.committed(ctx, news, ins)
	return ins, nil
}

// giveRoom returns the Runner's room held by the tasks of news admitted to
// run (nothing was inserted, or what was is handed to Run already, which
// counts it).
func (s *Service) giveRoom(news []store.NewTask) {
	n := 0
	for i := range news {
		if news[i].Running {
			n++
		}
	}
	if n > 0 {
		s.cfg.Runner.GiveRoom(n)
	}
}

// committerOf returns the committer news may share a commit in, or nil:
// that of their database (or table), when they all go to one.
func (s *Service) committerOf(news []store.NewTask) *committer {
	if s.groups == nil || len(news) > groupMaxSubmit {
		return nil
	}
	lane := s.lane(news[0].ShardHash)
	for _, nt := range news[1:] {
		if s.lane(nt.ShardHash) != lane {
			return nil
		}
	}
	return s.groups[lane]
}

func (s *Service) lane(hash uint32) int {
	db, table := s.cfg.Topology.Locate(hash)
	if s.cfg.GroupByTable {
		return db*s.cfg.Topology.Tables + table
	}
	return db
}

// insertGroup writes the tasks of a group commit. The claimed ones share
// one claim token, as the tasks of one submit do: the store matches a
// batch's claims by token, and fewer tokens make a shorter predicate.
func (s *Service) insertGroup(ctx context.Context, tasks []store.NewTask) (_ []store.Inserted, err error) {
	defer func() {
		if err != nil {
			s.giveRoom(tasks)
		}
	}()
	if err := oneTable(tasks); err != nil {
		return nil, err
	}
	token := s.token()
	for i := range tasks {
		if c := tasks[i].Claim; c != nil {
			l := *c
			l.Token = token
			tasks[i].Claim = &l
		}
	}
	return s.cfg.Store.Insert(ctx, tasks)
}

// oneTable routes the keyless tasks of a group by the shard hash of its
// first keyless task, so they go to one table. A keyless task's hash is
// drawn at random, and one drawn per group is as random (the tables fill
// evenly over groups); their segments, from each ID's own random bits,
// stay spread. One table matters on SQLite: a group's g rows in g of the
// 16 tables wrote g tables' pages to the WAL, which, not the commit, is
// most of an insert's cost, so larger groups saved little. Keyed tasks
// keep their key's route. The IDs are rewritten before anyone has seen
// them: the submits are answered after the commit.
func oneTable(tasks []store.NewTask) error {
	first := -1
	for i := range tasks {
		if tasks[i].Key != "" {
			continue
		}
		if first < 0 {
			first = i
			continue
		}
		hash := tasks[first].ShardHash
		if tasks[i].ShardHash == hash {
			continue
		}
		id, err := router.WithShardHash(tasks[i].ID, hash)
		if err != nil {
			return fmt.Errorf("group commit: %w", err)
		}
		tasks[i].ID, tasks[i].ShardHash = id, hash
	}
	return nil
}

// committed follows the commit of news: counts the results, puts the new
// tasks due within the window in the hot tier and wakes the scanners of
// the others.
func (s *Service) committed(ctx context.Context, news []store.NewTask, ins []store.Inserted) {
	now := time.Now()
	var entries, again []hot.Entry
	var claimed []store.NewTask
	var running []*task.Task
	for j, r := range ins {
		if r.Existing {
			s.m.Submitted.WithLabelValues("existing").Inc()
			if t := r.Task; t.Status == task.StatusClaimed && t.Owner == s.cfg.NodeID && t.Token != 0 {
				// Claimed here when it was inserted, and submitted again: the
				// first submit's answer, and its tier Add, may have been lost
				// after the commit (the store's connection broke), leaving the
				// claim to wait out its lease. The entry again, under the
				// row's token: a tier that holds it already keeps one, and a
				// stale one is dropped at its start.
				en := s.cfg.Planner.Entry(now, t.ID, t.Topic, t.DueAt, t.Token)
				en.Priority = t.Priority
				again = append(again, en)
			}
			continue
		}
		s.m.Submitted.WithLabelValues("created").Inc()
		s.m.Topics.For(news[j].Topic).Submitted.Inc()
		if nt := news[j]; nt.Running {
			// A copy: the submit answers r.Task while delivery writes to
			// its own (the result, the outcome).
			c := *r.Task
			running = append(running, &c)
		} else if nt.Claim != nil {
			en := s.cfg.Planner.Entry(now, nt.ID, nt.Topic, nt.DueAt, nt.Claim.Token)
			en.Priority = nt.Priority
			entries = append(entries, en)
			claimed = append(claimed, nt)
		} else {
			s.cfg.Notifier.Notify(s.item(nt.ShardHash, nt.Seg), nt.DueAt.Add(-s.cfg.Window))
		}
	}
	if len(running) > 0 {
		// Committed running under this node's lease: delivered now. Should
		// this process end before their outcomes are written, the leases
		// lapse and the scanners take them again, the attempt counted.
		s.cfg.Runner.Run(running)
	}
	// Run counts what it was handed; a key found taken ran nothing.
	s.giveRoom(news)
	if len(entries) > 0 {
		// The rows are committed and claimed: if this Add fails (the tier is
		// away) they are handed back to the scanner, not left to wait out
		// their leases.
		if err := s.cfg.Tier.Add(ctx, entries...); err != nil {
			s.release(ctx, claimed, err)
		}
	}
	if len(again) > 0 {
		if err := s.cfg.Tier.Add(ctx, again...); err != nil {
			s.log.Debug("hot tier add of resubmitted claims failed; they wait for their leases", "count", len(again), "err", err)
		}
	}
}

// release hands back tasks inserted claimed that the tier refused, and
// tells their scanners.
func (s *Service) release(ctx context.Context, claimed []store.NewTask, cause error) {
	refs := make([]store.Ref, len(claimed))
	for i, nt := range claimed {
		refs[i] = store.Ref{ID: nt.ID, Token: nt.Claim.Token, DueAt: nt.DueAt, Topic: nt.Topic}
	}
	if err := s.cfg.Store.Release(context.WithoutCancel(ctx), refs); err != nil {
		s.log.Warn("hot tier add failed and releasing the claims failed; tasks wait for lease expiry", "count", len(refs), "add_err", cause, "err", err)
		return
	}
	s.log.Warn("hot tier add failed; tasks handed back to the scanner", "count", len(refs), "err", cause)
	for _, nt := range claimed {
		s.cfg.Notifier.Notify(s.item(nt.ShardHash, nt.Seg), nt.DueAt.Add(-s.cfg.Window))
	}
}

// Get returns a task by ID.
func (s *Service) Get(ctx context.Context, id string) (*task.Task, error) {
	return s.cfg.Store.Get(ctx, id)
}

// GetMany returns the tasks of ids that exist, by ID (a missing one is
// absent): in a query per database where the store can (sqlstore), else
// one Get after another.
func (s *Service) GetMany(ctx context.Context, ids []string) (map[string]*task.Task, error) {
	if m, ok := s.cfg.Store.(interface {
		GetMany(ctx context.Context, ids []string) (map[string]*task.Task, error)
	}); ok {
		return m.GetMany(ctx, ids)
	}
	out := make(map[string]*task.Task, len(ids))
	for _, id := range ids {
		t, err := s.cfg.Store.Get(ctx, id)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return nil, err
		default:
			out[id] = t
		}
	}
	return out, nil
}

// Cancel cancels a pending or claimed task.
func (s *Service) Cancel(ctx context.Context, id string) (*task.Task, error) {
	t, err := s.cfg.Store.Cancel(ctx, id)
	if err != nil {
		return nil, err
	}
	// The row decides; dropping the hot entry only saves a useless Start.
	if err := s.cfg.Tier.Remove(ctx, hot.Entry{ID: id, Topic: t.Topic}); err != nil && !errors.Is(err, hot.ErrClosed) {
		s.log.Debug("hot tier remove", "id", id, "err", err)
	}
	return t, nil
}

// Requeue returns a dead task to pending, due now.
func (s *Service) Requeue(ctx context.Context, id string) (*task.Task, error) {
	t, err := s.cfg.Store.Requeue(ctx, id, time.Now())
	if err != nil {
		return nil, err
	}
	s.cfg.Notifier.Notify(s.item(t.ShardHash, t.Seg), t.DueAt.Add(-s.cfg.Window))
	return t, nil
}

// Purge deletes a final task (done, dead or cancelled) and returns it as
// it was. A final task is in no hot tier: only its row goes.
func (s *Service) Purge(ctx context.Context, id string) (*task.Task, error) {
	return s.cfg.Store.Purge(ctx, id)
}

// List lists tasks.
func (s *Service) List(ctx context.Context, f store.ListFilter) ([]*task.Task, error) {
	return s.cfg.Store.List(ctx, f)
}

// Ready reports whether the node runs and its store answers.
func (s *Service) Ready(ctx context.Context) error {
	if !s.ready.Load() {
		return ErrNotReady
	}
	return s.cfg.Store.Ping(ctx)
}

// item returns the sharding item that holds a task.
func (s *Service) item(hash uint32, seg int) store.Item {
	db, table := s.cfg.Topology.Locate(hash)
	return store.Item{DB: db, Table: table, Segment: seg}
}

// token is a fresh claim token of this process.
func (s *Service) token() int64 {
	if s.cfg.Incarnation != nil {
		return s.cfg.Incarnation.Token()
	}
	return store.NewToken()
}
