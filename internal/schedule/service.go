// Package schedule turns cron schedules into ordinary tasks.
//
// A schedule is a row in the store's first database (store.Schedule): its
// definition (cron expression, time zone, the task to make, misfire policy,
// paused) and its progress — the cursor up to which fire times have been
// made into tasks.
// Each fire time becomes one task with key NAME@<RFC 3339 fire time>, made
// ahead of time (Lookahead: at least one preheat window) so that the
// pipeline delivers it with its own precision, never early.
//
// One task per fire time, whatever the number of nodes, rests on three
// things, each enough in the common case and together enough in the others:
//
//  1. one owner: a schedule belongs to the node that owns the sharding item
//     its name hashes to (the coordinator hands items to live nodes, fenced,
//     so two live nodes do not own one item at once);
//  2. the cursor moves by compare-and-set only (same version, same cursor):
//     a node whose view is stale makes nothing new of it;
//  3. the task key: a fire time made twice (a node killed between its
//     insert and its compare-and-set, an owner changing hands mid-round) is
//     found by its key and not inserted again.
//
// The order is insert, then compare-and-set: a node killed in between
// leaves the cursor behind tasks that exist, which the next owner finds by
// key; the reverse order would lose those fire times. Keys become free
// again retention.key_hold after a task ends, so this holds as long as the
// next owner comes within that time — it comes within cluster.lease_ttl
// unless every node is down.
//
// Changes (PUT, pause, resume) write a new Version; the owner then
// withdraws the tasks it made for fire times still ahead and not yet
// started, and makes them again under the new definition; a delete
// withdraws them at once. A withdrawn task ends cancelled with the reason
// as its last error (never deleted: whoever holds its id still finds it)
// and gives up its key, so an unchanged fire time keeps its key. A trigger
// is keyed outside the schedule's key range (TriggerKey) and is never
// withdrawn.
//
// Misfire: a fire time older than MisfireAfter (the misfire threshold, 2 ×
// cluster.lease_ttl on a node) when the owner gets to it was missed (no
// node made it in time: every node was down). Younger ones are made late
// and delivered at once. Skip drops the missed ones; fire_once makes one
// task, due now, keyed by the last of them. A task made ahead can be
// missed too: every node down after it was made, or delivery that far
// behind. Screen judges those where they are about to be delivered (see
// there).
package schedule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ontimehq/ontime/internal/cronspec"
	"github.com/ontimehq/ontime/internal/router"
	"github.com/ontimehq/ontime/internal/startstop"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/submit"
	"github.com/ontimehq/ontime/internal/task"
)

// Store keeps schedules (*sqlstore.Store implements it). Compare-and-set
// methods answer false, and change nothing, when the row is not as given.
type Store interface {
	// Schedules lists every schedule by name.
	Schedules(ctx context.Context) ([]store.Schedule, error)
	// Schedule returns one schedule or store.ErrScheduleNotFound.
	Schedule(ctx context.Context, name string) (store.Schedule, error)
	// CreateSchedule inserts r, or answers store.ErrScheduleExists.
	CreateSchedule(ctx context.Context, r store.Schedule) error
	// UpdateSchedule writes r's definition, Version and UpdatedAt where
	// the row's version is version, and raises its cursor to r.Cursor
	// when that is later.
	UpdateSchedule(ctx context.Context, r store.Schedule, version int64) (bool, error)
	// DeleteSchedule deletes the schedule; false when there was none.
	DeleteSchedule(ctx context.Context, name string) (bool, error)
	// AdvanceSchedule sets the progress to to where the row has this
	// version and progress from.
	AdvanceSchedule(ctx context.Context, name string, version int64, from, to store.ScheduleProgress) (bool, error)
	// WithdrawFires cancels the pending and claimed tasks of topic whose
	// keys are in [lo, hi) (one schedule's fire times: KeyRange), due after
	// after, with reason as their last error, and frees their keys; it
	// answers how many.
	WithdrawFires(ctx context.Context, topic, lo, hi string, after time.Time, reason string) (int64, error)
}

// Submitter makes tasks: the node's submit path.
type Submitter interface {
	Submit(ctx context.Context, specs []task.Spec) ([]submit.Result, error)
}

// Config configures a Service. Store and Submitter are required.
type Config struct {
	Store     Store
	Submitter Submitter
	// Limits judge a definition's task as a submitted task is judged.
	Limits task.Limits
	// Items are every sharding item's key, in one order on every node. A
	// schedule belongs to the owner of Items[hash(name) mod len(Items)]
	// (SetOwned). Empty: this node owns every schedule.
	Items []string
	// Lookahead is how far ahead fire times are made into tasks: at least
	// the preheat window, so they enter the hot tier early, and longer
	// than a takeover, so that a killed owner's successor starts before
	// the tasks it made run out. Default 30s.
	Lookahead time.Duration
	// MisfireAfter (the misfire threshold) is how late a fire time may be
	// made, and how late its task made ahead may start; older, it was
	// missed and the misfire policy applies. Default 20s.
	MisfireAfter time.Duration
	// Poll is how often the owner rereads schedules changed on other
	// nodes. Default 1s.
	Poll   time.Duration
	Logger *slog.Logger
	// Registerer takes the service's metrics (nil: kept, not registered).
	Registerer prometheus.Registerer
	// Now is the clock (default time.Now); tests move it.
	Now func() time.Time
}

// Defaults of Config.
const (
	DefaultLookahead    = 30 * time.Second
	DefaultMisfireAfter = 20 * time.Second
	DefaultPoll         = time.Second
)

// Service serves the schedule operations and, on the node that owns a
// schedule, makes its tasks (the loop runs between Start and Stop).
type Service struct {
	startstop.Base

	cfg  Config
	st   Store
	sub  Submitter
	log  *slog.Logger
	m    *metrics
	now  func() time.Time
	wake chan struct{}

	mu    sync.Mutex
	owned map[string]bool // item keys this node owns; nil with no Items
	specs map[string]cronspec.Spec
}

// New checks cfg and builds the service.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil || cfg.Submitter == nil {
		return nil, errors.New("schedule: Store and Submitter are required")
	}
	if cfg.Lookahead <= 0 {
		cfg.Lookahead = DefaultLookahead
	}
	if cfg.MisfireAfter <= 0 {
		cfg.MisfireAfter = DefaultMisfireAfter
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.Limits = cfg.Limits.WithDefaults()
	s := &Service{cfg: cfg, st: cfg.Store, sub: cfg.Submitter, log: cfg.Logger, now: cfg.Now, m: newMetrics(cfg.Registerer),
		wake: make(chan struct{}, 1), specs: map[string]cronspec.Spec{}}
	if len(cfg.Items) > 0 {
		s.owned = map[string]bool{}
	}
	return s, nil
}

// SetOwned tells the service which sharding items this node owns now (the
// coordinator's assignment); it makes the tasks of the schedules that hash
// to them.
func (s *Service) SetOwned(items []string) {
	s.mu.Lock()
	if s.owned != nil {
		s.owned = make(map[string]bool, len(items))
		for _, it := range items {
			s.owned[it] = true
		}
	}
	s.mu.Unlock()
	s.Wake()
}

// Owns reports whether this node makes the tasks of the schedule name.
func (s *Service) Owns(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.owned == nil {
		return true
	}
	return s.owned[s.cfg.Items[int(uint64(router.HashKey(name))%uint64(len(s.cfg.Items)))]]
}

// Wake makes the loop look at the schedules now rather than at its next
// planned time.
func (s *Service) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Create stores a new schedule; store.ErrScheduleExists when the name is
// taken.
func (s *Service) Create(ctx context.Context, d store.ScheduleDef) (store.Schedule, error) {
	now := s.now()
	if _, err := Validate(&d, s.cfg.Limits, now); err != nil {
		return store.Schedule{}, err
	}
	r := newRecord(d, now)
	if err := s.st.CreateSchedule(ctx, r); err != nil {
		return store.Schedule{}, fmt.Errorf("create schedule %s: %w", d.Name, err)
	}
	s.Wake()
	return r, nil
}

// newRecord is a schedule created at now: its first fire time is the
// first after now.
func newRecord(d store.ScheduleDef, now time.Time) store.Schedule {
	now = now.Truncate(time.Microsecond) // what the store keeps
	v := store.NewToken()
	return store.Schedule{ScheduleDef: d, Version: v, ScheduleProgress: store.ScheduleProgress{Cursor: now, Applied: v, MadeTopic: d.Task.Topic},
		CreatedAt: now, UpdatedAt: now}
}

// Put creates the schedule or replaces its definition; created says which.
// Replacing with an identical definition writes nothing. A replaced
// schedule keeps its cursor: fire times already passed are not made again.
func (s *Service) Put(ctx context.Context, d store.ScheduleDef) (r store.Schedule, created bool, err error) {
	now := s.now()
	if _, err := Validate(&d, s.cfg.Limits, now); err != nil {
		return store.Schedule{}, false, err
	}
	for range 10 {
		cur, err := s.st.Schedule(ctx, d.Name)
		switch {
		case errors.Is(err, store.ErrScheduleNotFound):
			r := newRecord(d, now)
			err := s.st.CreateSchedule(ctx, r)
			if errors.Is(err, store.ErrScheduleExists) {
				continue // created meanwhile: replace it
			}
			if err != nil {
				return store.Schedule{}, false, fmt.Errorf("put schedule %s: %w", d.Name, err)
			}
			s.Wake()
			return r, true, nil
		case err != nil:
			return store.Schedule{}, false, fmt.Errorf("put schedule %s: %w", d.Name, err)
		}
		if cur.ScheduleDef.Equal(d) {
			return cur, false, nil
		}
		next := cur
		next.ScheduleDef, next.Version, next.UpdatedAt = d, store.NewToken(), now.Truncate(time.Microsecond)
		if cur.Paused && !d.Paused {
			next.Cursor = laterOf(cur.Cursor, now) // resumed: the paused time is not owed
		}
		ok, err := s.st.UpdateSchedule(ctx, next, cur.Version)
		if err != nil {
			return store.Schedule{}, false, fmt.Errorf("put schedule %s: %w", d.Name, err)
		}
		if ok {
			s.Wake()
			return s.reread(ctx, next)
		}
	}
	return store.Schedule{}, false, fmt.Errorf("put schedule %s: %w", d.Name, errBusy)
}

// errBusy: the row kept changing under a read-modify-write.
var errBusy = errors.New("schedule changed concurrently; retry")

// reread returns the stored row after a write (its cursor may have been
// raised), or want when it cannot be read.
func (s *Service) reread(ctx context.Context, want store.Schedule) (store.Schedule, bool, error) {
	r, err := s.st.Schedule(ctx, want.Name)
	if err != nil || r.Version != want.Version {
		return want, false, nil
	}
	return r, false, nil
}

// Get returns a schedule.
func (s *Service) Get(ctx context.Context, name string) (store.Schedule, error) {
	if err := ValidateName(name); err != nil {
		return store.Schedule{}, err
	}
	return s.st.Schedule(ctx, name)
}

// List returns every schedule by name.
func (s *Service) List(ctx context.Context) ([]store.Schedule, error) { return s.st.Schedules(ctx) }

// Delete removes a schedule and withdraws its tasks not yet started; it
// returns the schedule as it was.
func (s *Service) Delete(ctx context.Context, name string) (store.Schedule, error) {
	r, err := s.Get(ctx, name)
	if err != nil {
		return store.Schedule{}, err
	}
	ok, err := s.st.DeleteSchedule(ctx, name)
	if err != nil {
		return store.Schedule{}, fmt.Errorf("delete schedule %s: %w", name, err)
	}
	if !ok {
		return store.Schedule{}, store.ErrScheduleNotFound
	}
	// An owner making tasks at this moment finds the row gone when it
	// moves the cursor, and withdraws what it made itself (lost).
	s.withdrawAll(ctx, r, s.now())
	return r, nil
}

// withdrawAll withdraws the tasks of the deleted schedule r under its made
// and current topics.
func (s *Service) withdrawAll(ctx context.Context, r store.Schedule, now time.Time) {
	topics := []string{r.MadeTopic}
	if r.Task.Topic != r.MadeTopic {
		topics = append(topics, r.Task.Topic)
	}
	lo, hi := KeyRange(r.Name)
	for _, tp := range topics {
		if n, err := s.st.WithdrawFires(ctx, tp, lo, hi, now, "withdrawn: schedule "+r.Name+" deleted"); err != nil {
			s.log.Warn("schedule: withdrawing tasks of a deleted schedule failed; they will fire", "schedule", r.Name, "err", err)
		} else if n > 0 {
			s.m.withdrawn.Add(float64(n))
			s.log.Info("schedule: tasks withdrawn", "schedule", r.Name, "tasks", n)
		}
	}
}

// Pause stops making tasks for the schedule; the tasks already made and
// not yet started are withdrawn by the owner. Pausing a paused schedule
// changes nothing.
func (s *Service) Pause(ctx context.Context, name string) (store.Schedule, error) {
	return s.setPaused(ctx, name, true)
}

// Resume makes tasks again from the next fire time after now: the fire
// times of the paused period are not owed. Resuming a running schedule
// changes nothing.
func (s *Service) Resume(ctx context.Context, name string) (store.Schedule, error) {
	return s.setPaused(ctx, name, false)
}

func (s *Service) setPaused(ctx context.Context, name string, paused bool) (store.Schedule, error) {
	if err := ValidateName(name); err != nil {
		return store.Schedule{}, err
	}
	d := store.ScheduleDef{}
	for range 10 {
		cur, err := s.st.Schedule(ctx, name)
		if err != nil {
			return store.Schedule{}, err
		}
		if cur.Paused == paused {
			return cur, nil
		}
		d = cur.ScheduleDef
		d.Paused = paused
		r, _, err := s.Put(ctx, d)
		if errors.Is(err, errBusy) {
			continue
		}
		return r, err
	}
	return store.Schedule{}, fmt.Errorf("schedule %s: %w", name, errBusy)
}

// Trigger makes one task of the schedule now, outside its cron, keyed
// TriggerKey(name, now); paused schedules may be triggered. A change or
// delete of the schedule does not withdraw it. created is false in the
// unlikely case the key existed.
func (s *Service) Trigger(ctx context.Context, name string) (t *task.Task, created bool, err error) {
	r, err := s.Get(ctx, name)
	if err != nil {
		return nil, false, err
	}
	now := s.now().Truncate(time.Microsecond)
	sp := taskSpec(r, now, false)
	sp.Key = TriggerKey(r.Name, now)
	res, err := s.sub.Submit(ctx, []task.Spec{sp})
	if err != nil {
		return nil, false, fmt.Errorf("trigger schedule %s: %w", name, err)
	}
	if res[0].Err != nil {
		return nil, false, res[0].Err
	}
	if !res[0].Existing {
		s.m.made.Inc()
	}
	return res[0].Task, !res[0].Existing, nil
}

// NextFire is the schedule's first fire time after now; zero when it is
// paused or never fires again.
func (s *Service) NextFire(r store.Schedule) time.Time {
	if r.Paused {
		return time.Time{}
	}
	spec, err := s.spec(r)
	if err != nil {
		return time.Time{}
	}
	return spec.Next(s.now())
}

// spec parses r's expression, once per expression and zone.
func (s *Service) spec(r store.Schedule) (cronspec.Spec, error) {
	k := r.Cron + "\x00" + r.TimeZone
	s.mu.Lock()
	sp, ok := s.specs[k]
	s.mu.Unlock()
	if ok {
		return sp, nil
	}
	sp, err := cronspec.Parse(r.Cron, r.TimeZone)
	if err != nil {
		return cronspec.Spec{}, err
	}
	s.mu.Lock()
	if len(s.specs) > 10000 { // a bound, not a cache policy: schedules are few
		clear(s.specs)
	}
	s.specs[k] = sp
	s.mu.Unlock()
	return sp, nil
}

// taskSpec is the task of fire time at; due at at, or now when dueNow.
//
// A task without a target waits for a Go handler (AwaitHandler) when no
// live node has one: the schedule was accepted, and a fire time refused
// while its handler's only node restarts would be lost.
func taskSpec(r store.Schedule, at time.Time, dueNow bool) task.Spec {
	sp := task.Spec{Topic: r.Task.Topic, Key: Key(r.Name, at), Payload: r.Task.Payload, Target: r.Task.Target,
		MaxAttempts: r.Task.MaxAttempts, AwaitHandler: true}
	if !dueNow {
		due := at
		sp.DueAt = &due
	}
	return sp
}

func laterOf(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
