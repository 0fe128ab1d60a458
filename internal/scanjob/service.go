package scanjob

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ontimehq/ontime/internal/cronspec"
	"github.com/ontimehq/ontime/internal/metrics"
	"github.com/ontimehq/ontime/internal/startstop"
	"github.com/ontimehq/ontime/internal/store"
)

// ItemPrefix starts the coordinator's key of a job item:
// "job:<name>:<item>"; task items have no prefix.
const ItemPrefix = "job:"

// ItemKey is the coordinator's key of a job's item.
func ItemKey(job, item string) string { return ItemPrefix + job + ":" + item }

// ParseItemKey splits a coordinator key; ok is false for task items.
func ParseItemKey(k string) (job, item string, ok bool) {
	rest, ok := strings.CutPrefix(k, ItemPrefix)
	if !ok {
		return "", "", false
	}
	job, item, ok = strings.Cut(rest, ":")
	return job, item, ok
}

// Config wires a Service.
type Config struct {
	State   State
	NodeID  string
	Logger  *slog.Logger
	Metrics *metrics.Jobs
	// Senders by target scheme ("http", "https", "mq").
	Senders map[string]Sender
	// Retention: runs that ended longer ago are deleted.
	Retention time.Duration
	// Handover is how long a run whose item went to another node may take
	// to finish its page before it is cancelled (below the coordinator's
	// handover delay, so two nodes never run an item at once).
	Handover time.Duration
	// Poll is how often paused flags and :trigger requests are read.
	Poll time.Duration
	// Clock is the service's time (nil: the real clock); tests move
	// their own.
	Clock Clock
}

// GoJob is a job written in Go: Run is called once per trigger per item.
type GoJob struct {
	Name        string
	Cron        string
	TimeZone    string
	Misfire     string
	Overlap     string
	Items       int
	ItemParams  []string // Param of item i, "" beyond the list
	Concurrency int
	// LongRunning: a run of an item lasts as long as the node holds the
	// item (an outbox relay); the cron only restarts one that ended. A
	// trigger while it runs is expected, not a skip: it is not counted in
	// ontime_job_triggers_skipped_total.
	LongRunning bool
	Run         func(ctx context.Context, r *ItemRun) error
}

// job is a registered job.
type job struct {
	name, kind string
	cron       cronspec.Spec
	tz         string
	misfire    string
	overlap    string
	items      []string
	params     []string
	sql        *SQLSpec
	src        *source
	sender     Sender
	health     *health // SQL jobs
	goRun      func(ctx context.Context, r *ItemRun) error
	sem        chan struct{}
	// longRunning: a trigger while an item runs is not a skip (GoJob).
	longRunning bool
}

// Service runs the jobs' items this node owns. It has the node's one
// lifecycle: Start launches the trigger loop, Stop stops triggering,
// lets running items finish their page (up to Handover), and waits.
type Service struct {
	startstop.Base

	cfg  Config
	log  *slog.Logger
	m    *metrics.Jobs
	jobs map[string]*job

	mu        sync.Mutex
	owned     map[string]map[string]bool // job → items
	running   map[string]*ItemRun        // job:item → its run
	flags     map[string]store.JobFlags
	caughtUp  map[string]time.Time // job:item → when a run last found nothing left
	wg        sync.WaitGroup
	ctx       context.Context // the service's, set by Start
	polled    bool            // flags were read once
	closeOnce sync.Once
	kick      chan struct{}
	// looked, when set (tests), is called once a look at a newly owned
	// item has decided whether to run it.
	looked func(item string)
}

// New builds a service with no jobs.
func New(cfg Config) (*Service, error) {
	if cfg.State == nil {
		return nil, errors.New("scanjob: a State is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.NewJobs(nil)
	}
	if cfg.Retention <= 0 {
		cfg.Retention = 24 * time.Hour
	}
	if cfg.Handover <= 0 {
		cfg.Handover = 5 * time.Second
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = realClock{}
	}
	return &Service{cfg: cfg, log: cfg.Logger, m: cfg.Metrics, jobs: map[string]*job{},
		owned: map[string]map[string]bool{}, running: map[string]*ItemRun{}, flags: map[string]store.JobFlags{},
		caughtUp: map[string]time.Time{}, kick: make(chan struct{}, 1)}, nil
}

// AddSQL registers a declarative SQL job: it opens the job's source
// databases and EXPLAINs its statements on its first table (a missing
// index is a WARN, and shows in the job's view; a statement the database
// refuses makes the job broken: it stays registered, visible, and runs
// nothing until the statement passes). Register before Start.
func (s *Service) AddSQL(ctx context.Context, spec SQLSpec) error {
	cs, err := spec.Normalize()
	if err != nil {
		return err
	}
	if _, dup := s.jobs[spec.Name]; dup {
		return fmt.Errorf("%w: name: job %q is declared twice", ErrInvalid, spec.Name)
	}
	scheme, _, _ := strings.Cut(spec.Target, "://")
	snd := s.cfg.Senders[scheme]
	if snd == nil {
		return fmt.Errorf("%w: process.target: %q: %w (mq:// needs a broker under brokers:)", ErrInvalid, spec.Target, ErrNoSender)
	}
	if c, ok := snd.(interface{ Check(target string) error }); ok {
		if err := c.Check(spec.Target); err != nil {
			return fmt.Errorf("%w: process.target: %w", ErrInvalid, err)
		}
	}
	src, err := openSource(&spec)
	if err != nil {
		return err
	}
	j := &job{name: spec.Name, kind: "sql", cron: cs, tz: spec.TimeZone, misfire: spec.Misfire, overlap: spec.Overlap,
		items: spec.ItemKeys(), sql: &spec, src: src, sender: snd, sem: make(chan struct{}, spec.Concurrency),
		health: &health{state: StateUnchecked}}
	// The statements are checked before the job may deliver anything: a
	// table, column or on_success.set the database refuses breaks the
	// job (issue 25 items 6 and 7) instead of repeating its rows forever.
	ictx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	s.m.Add(spec.Name)
	now := s.cfg.Clock.Now()
	res := src.check(ictx, []target{src.firstTable()}, nil, now)
	if res.down != nil {
		res.down = fmt.Errorf("at registration: %w", res.down)
	}
	j.health.mu.Lock()
	s.applyCheck(j, res, now)
	j.health.mu.Unlock()
	s.jobs[spec.Name] = j
	return nil
}

// AddGo registers a Go job. Register before Start, on every node.
func (s *Service) AddGo(g GoJob) error {
	if err := ValidateName(g.Name); err != nil {
		return err
	}
	if _, dup := s.jobs[g.Name]; dup {
		return fmt.Errorf("%w: name: job %q is registered twice", ErrInvalid, g.Name)
	}
	cs, err := cronspec.Parse(g.Cron, g.TimeZone)
	if err != nil {
		return fmt.Errorf("%w: cron: %w", ErrInvalid, err)
	}
	mis, err := misfirePolicy(g.Misfire)
	if err != nil {
		return err
	}
	ov, err := overlapPolicy(g.Overlap)
	if err != nil {
		return err
	}
	if g.Items == 0 {
		g.Items = 1
	}
	if g.Items < 1 || g.Items > MaxTables {
		return fmt.Errorf("%w: items: %d is out of range 1..%d", ErrInvalid, g.Items, MaxTables)
	}
	if len(g.ItemParams) > g.Items {
		return fmt.Errorf("%w: item_params: %d parameters for %d items", ErrInvalid, len(g.ItemParams), g.Items)
	}
	if g.Run == nil {
		return fmt.Errorf("%w: run: a Run function is required", ErrInvalid)
	}
	if g.Concurrency == 0 {
		g.Concurrency = DefaultConcurrency
	}
	if g.Concurrency < 1 || g.Concurrency > MaxConcurrency {
		return fmt.Errorf("%w: concurrency: %d is out of range 1..%d", ErrInvalid, g.Concurrency, MaxConcurrency)
	}
	j := &job{name: g.Name, kind: "go", cron: cs, tz: g.TimeZone, misfire: mis, overlap: ov, params: g.ItemParams,
		goRun: g.Run, sem: make(chan struct{}, g.Concurrency), longRunning: g.LongRunning}
	for i := range g.Items {
		j.items = append(j.items, fmt.Sprint(i))
	}
	s.m.Add(g.Name)
	s.jobs[g.Name] = j
	return nil
}

// ItemKeys lists every job item's coordinator key.
func (s *Service) ItemKeys() []string {
	var out []string
	for _, j := range s.jobs {
		for _, it := range j.items {
			out = append(out, ItemKey(j.name, it))
		}
	}
	slices.Sort(out)
	return out
}

// Len is the number of registered jobs.
func (s *Service) Len() int { return len(s.jobs) }

// OwnAll makes this node run every item (no coordinator).
func (s *Service) OwnAll() {
	s.SetOwned(s.ItemKeys())
}

// SetOwned says which job items this node owns (coordinator keys; other
// keys are ignored). Newly owned items are looked at at once — an
// unfinished run resumes from its cursor, a missed fire time fires per the
// misfire policy; items no longer owned stop after their current page.
func (s *Service) SetOwned(keys []string) {
	next := map[string]map[string]bool{}
	for _, k := range keys {
		jn, it, ok := ParseItemKey(k)
		if !ok || s.jobs[jn] == nil {
			continue
		}
		if next[jn] == nil {
			next[jn] = map[string]bool{}
		}
		next[jn][it] = true
	}
	s.mu.Lock()
	prev := s.owned
	s.owned = next
	var gained [][2]string
	for jn, items := range next {
		for it := range items {
			if !prev[jn][it] {
				gained = append(gained, [2]string{jn, it})
				s.caughtUp[jn+":"+it] = s.cfg.Clock.Now()
			}
		}
	}
	for jn, items := range prev {
		for it := range items {
			if !next[jn][it] {
				delete(s.caughtUp, jn+":"+it)
				if r := s.running[jn+":"+it]; r != nil {
					r.stop(store.RunMoved, s.cfg.Handover)
				}
			}
		}
	}
	ctx := s.ctx
	s.mu.Unlock()
	if ctx == nil {
		return // Start looks at every owned item
	}
	for _, g := range gained {
		s.trigger(ctx, s.jobs[g[0]], g[1], "acquire", time.Time{})
	}
}

// Start launches the trigger loop and looks at every owned item.
func (s *Service) Start(ctx context.Context) error {
	ctx, ok, started, stopped := s.StartInit(ctx)
	if !ok {
		return nil
	}
	s.mu.Lock()
	s.ctx = ctx
	var owned [][2]string
	for jn, items := range s.owned {
		for it := range items {
			owned = append(owned, [2]string{jn, it})
		}
	}
	s.mu.Unlock()
	if err := s.pollFlags(ctx); err != nil {
		s.log.Warn("jobs: reading job flags failed", "err", err)
	}
	for _, o := range owned {
		s.trigger(ctx, s.jobs[o[0]], o[1], "acquire", time.Time{})
	}
	go func() {
		started()
		defer stopped()
		s.loop(ctx)
		s.wg.Wait()
	}()
	return nil
}

// Stop stops triggering; running items stop after their page (runs end
// "moved": the next holder resumes them) and Stop waits for them.
func (s *Service) Stop() {
	s.mu.Lock()
	for _, r := range s.running {
		r.stop(store.RunMoved, s.cfg.Handover)
	}
	s.mu.Unlock()
	s.Base.Stop()
}

// Close closes the jobs' source databases; call it after Stop (or
// instead, when the service never started). Idempotent.
func (s *Service) Close() {
	s.closeOnce.Do(func() {
		for _, j := range s.jobs {
			if j.src != nil {
				j.src.Close()
			}
		}
	})
}

// loop fires cron triggers, polls flags and trigger requests, deletes
// old runs and publishes item lag.
func (s *Service) loop(ctx context.Context) {
	next := map[string]time.Time{}
	now := s.cfg.Clock.Now()
	for name, j := range s.jobs {
		next[name] = j.cron.Next(now)
	}
	poll := s.cfg.Clock.NewTicker(s.cfg.Poll)
	defer poll.Stop()
	lastClean := time.Time{}
	timer := s.cfg.Clock.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		earliest := time.Time{}
		for _, t := range next {
			if !t.IsZero() && (earliest.IsZero() || t.Before(earliest)) {
				earliest = t
			}
		}
		wait := time.Hour
		if !earliest.IsZero() {
			wait = max(earliest.Sub(s.cfg.Clock.Now()), 0)
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-timer.C():
			now := s.cfg.Clock.Now()
			for name, t := range next {
				if t.IsZero() || t.After(now) {
					continue
				}
				j := s.jobs[name]
				for _, it := range s.ownedItems(name) {
					s.trigger(ctx, j, it, "cron", t)
				}
				next[name] = j.cron.Next(now)
			}
		case <-poll.C():
			if err := s.pollFlags(ctx); err != nil {
				s.log.Warn("jobs: reading job flags failed", "err", err)
			}
			s.publishLag()
			if now := s.cfg.Clock.Now(); now.Sub(lastClean) > time.Minute {
				lastClean = now
				if n, err := s.cfg.State.DeleteRuns(ctx, lastClean.Add(-s.cfg.Retention)); err != nil {
					s.log.Warn("jobs: deleting old runs failed", "err", err)
				} else if n > 0 {
					s.log.Debug("jobs: old runs deleted", "runs", n)
				}
			}
		case <-s.kick:
			if err := s.pollFlags(ctx); err != nil {
				s.log.Warn("jobs: reading job flags failed", "err", err)
			}
		}
	}
}

func (s *Service) ownedItems(name string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(func(yield func(string) bool) {
		for it := range s.owned[name] {
			if !yield(it) {
				return
			}
		}
	})
}

// pollFlags reads paused flags and trigger requests: a raised trigger
// sequence runs the owned items of its job; a pause stops their runs after
// the current page.
func (s *Service) pollFlags(ctx context.Context) error {
	fl, err := s.cfg.State.JobFlags(ctx)
	if err != nil {
		return err
	}
	s.mu.Lock()
	prev := s.flags
	s.flags = fl
	ctxS := s.ctx
	// A sequence raised before this node first read it is an old request.
	polled := s.polled
	s.polled = true
	s.mu.Unlock()
	for name, f := range fl {
		j := s.jobs[name]
		if j == nil {
			continue
		}
		p := prev[name]
		if f.Paused && !p.Paused {
			s.mu.Lock()
			for key, r := range s.running {
				if strings.HasPrefix(key, name+":") {
					r.stop(store.RunPaused, s.cfg.Handover)
				}
			}
			s.mu.Unlock()
		}
		if f.TriggerSeq > p.TriggerSeq && ctxS != nil && polled {
			for _, it := range s.ownedItems(name) {
				s.trigger(ctxS, j, it, "manual", s.cfg.Clock.Now())
			}
		}
	}
	return nil
}

func (s *Service) paused(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.flags[name].Paused
}

// Kick makes the loop read flags now (after a :trigger or :pause on this
// node).
func (s *Service) Kick() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func newRunID(now time.Time) string {
	var b [10]byte
	_, _ = crand.Read(b[:])
	return fmt.Sprintf("%011x", now.UnixMilli()) + hex.EncodeToString(b[:])
}

// trigger starts a run of one item unless one is running (overlap: skip).
// trig "acquire" only looks: it resumes an unfinished run or fires a
// missed trigger per the misfire policy.
func (s *Service) trigger(ctx context.Context, j *job, item, trig string, fireAt time.Time) {
	key := j.name + ":" + item
	s.mu.Lock()
	if s.flags[j.name].Paused && trig != "acquire" {
		s.mu.Unlock()
		return
	}
	if cur := s.running[key]; cur != nil {
		// A look at a newly owned item that has not decided yet to run
		// takes this trigger over: otherwise it would swallow it.
		if cur.looking && trig != "acquire" {
			cur.upgrade, cur.upgradeAt = trig, fireAt
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		if trig != "acquire" && !j.longRunning {
			s.m.Skipped.WithLabelValues(j.name).Inc()
			s.log.Debug("job trigger skipped: item still running", "job", j.name, "item", item)
		}
		return
	}
	ir := &ItemRun{svc: s, job: j, item: item, stopCh: make(chan struct{}), looking: trig == "acquire"}
	s.running[key] = ir
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		defer func() {
			s.mu.Lock()
			if s.running[key] == ir { // a look that ran nothing left already
				delete(s.running, key)
			}
			s.mu.Unlock()
		}()
		ir.execute(ctx, trig, fireAt)
	}()
}

// publishLag sets, per job, how long ago the owned item furthest behind
// last found nothing left to do.
func (s *Service) publishLag() {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.Clock.Now()
	lag := map[string]float64{}
	for jn := range s.jobs {
		lag[jn] = 0
	}
	for key, t := range s.caughtUp {
		jn, _, _ := strings.Cut(key, ":")
		lag[jn] = max(lag[jn], now.Sub(t).Seconds())
	}
	for jn, v := range lag {
		s.m.ItemLag.WithLabelValues(jn).Set(v)
	}
}

// ItemRun is one run of one item, handed to a Go job's Run.
type ItemRun struct {
	svc   *Service
	job   *job
	item  string
	token int64
	run   store.JobRun

	// looking: an "acquire" look that has not decided yet; a trigger
	// arriving meanwhile is kept in upgrade (under the service's mu).
	looking   bool
	upgrade   string
	upgradeAt time.Time

	mu         sync.Mutex
	stopStatus string
	stopCh     chan struct{}
	cancel     context.CancelFunc
}

// Item is the item's index within its job (Go jobs) or "db.table.segment".
func (r *ItemRun) Item() string { return r.item }

// Param is the item's parameter (Go jobs' ItemParams).
func (r *ItemRun) Param() string {
	var i int
	if _, err := fmt.Sscan(r.item, &i); err == nil && i >= 0 && i < len(r.job.params) {
		return r.job.params[i]
	}
	return ""
}

// Total is the job's number of items.
func (r *ItemRun) Total() int { return len(r.job.items) }

// Stopping reports that the run should end after the page at hand: the
// item went to another node, the job was paused or the node stops.
func (r *ItemRun) Stopping() bool {
	select {
	case <-r.stopCh:
		return true
	default:
		return false
	}
}

func (r *ItemRun) stop(status string, grace time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopStatus != "" {
		return
	}
	r.stopStatus = status
	close(r.stopCh)
	if cancel := r.cancel; cancel != nil {
		r.svc.cfg.Clock.AfterFunc(grace, cancel)
	}
}

func (r *ItemRun) stoppedAs() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopStatus
}

// Page records a page's counts and the cursor after it (fenced): ErrLost
// when another node took the item, and the run must stop.
func (r *ItemRun) Page(ctx context.Context, cursor string, fetched, processed, failed, left int) error {
	r.run.Fetched += int64(fetched)
	r.run.Processed += int64(processed)
	r.run.Failed += int64(failed)
	r.run.Left += int64(left)
	r.run.Cursor = cursor
	m := r.svc.m
	m.Rows.WithLabelValues(r.job.name, "fetched").Add(float64(fetched))
	m.Rows.WithLabelValues(r.job.name, "processed").Add(float64(processed))
	m.Rows.WithLabelValues(r.job.name, "failed").Add(float64(failed))
	m.Rows.WithLabelValues(r.job.name, "left").Add(float64(left))
	held, err := r.svc.cfg.State.SaveRun(context.WithoutCancel(ctx), &r.run, r.token, false)
	if err != nil {
		return fmt.Errorf("save cursor: %w", err)
	}
	if !held {
		return ErrLost
	}
	return nil
}

// execute takes the item, decides what to run, runs it and records the end.
func (r *ItemRun) execute(parent context.Context, trig string, fireAt time.Time) {
	s, j := r.svc, r.job
	// Wait for a slot among the job's concurrent items on this node.
	select {
	case j.sem <- struct{}{}:
	case <-parent.Done():
		return
	case <-r.stopCh:
		return
	}
	defer func() { <-j.sem }()
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	defer cancel()
	r.mu.Lock()
	r.cancel = cancel
	if r.stopStatus != "" {
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	now := s.cfg.Clock.Now()
	r.token = rand.Int64N(1<<62) + 1
	st, err := s.cfg.State.TakeItem(ctx, j.name, r.item, s.cfg.NodeID, r.token, now)
	if err != nil {
		s.log.Warn("job item take failed", "job", j.name, "item", r.item, "err", err)
		return
	}
	// From the item's last fire time, or, for an item that never fired,
	// from its first take: a fire time that went by while it moved between
	// nodes before its first run is missed too, and a brand-new job misses
	// none from before it had the item.
	var missed time.Time
	if st.RunID == "" && trig == "acquire" {
		missed = j.lastMissed(later(st.LastFire, st.Created), now)
	}
	s.mu.Lock()
	r.looking = false
	up, upAt := r.upgrade, r.upgradeAt
	if st.RunID == "" && trig == "acquire" && up == "" && (missed.IsZero() || j.misfire == "skip") {
		// A look that runs nothing leaves the item free in the same step
		// it stops looking: a trigger in between would find the item
		// "running" and be skipped, and this look would not run it either
		// (measured: a :trigger right after start lost items under CI's
		// load, TestJobTriggerRightAfterStart).
		delete(s.running, j.name+":"+r.item)
	}
	s.mu.Unlock()
	if s.looked != nil && trig == "acquire" {
		s.looked(r.item)
	}
	cursor := ""
	switch {
	case st.RunID != "":
		// An unfinished run (its node died, or the item moved, or the job
		// was paused): carry on from its cursor.
		cursor, trig = st.Cursor, "resume"
		if fireAt.IsZero() {
			fireAt = st.LastFire
		}
	case trig == "acquire":
		switch {
		case up != "":
			trig, fireAt = up, upAt // a trigger came while looking
		case missed.IsZero():
			return
		case j.misfire == "skip":
			s.log.Info("job fire time missed; skipped per misfire: skip", "job", j.name, "item", r.item, "fire_at", missed)
			return
		default:
			trig, fireAt = "misfire", missed
		}
	}
	if s.paused(j.name) {
		return
	}
	// A broken job runs nothing; no run is recorded either: the job's
	// state says why, once, rather than a failed run per item and trigger.
	if j.kind == "sql" && !s.usable(ctx, j) {
		s.log.Debug("job broken: trigger ignored", "job", j.name, "item", r.item, "trigger", trig)
		return
	}
	r.run = store.JobRun{ID: newRunID(now), Job: j.name, Item: r.item, Node: s.cfg.NodeID, Trigger: trig, FireAt: fireAt,
		StartedAt: now, Cursor: cursor, Status: store.RunRunning}
	held, err := s.cfg.State.StartRun(ctx, &r.run, r.token)
	if err != nil || !held {
		if err != nil {
			s.log.Warn("job run start failed", "job", j.name, "item", r.item, "err", err)
		}
		return
	}
	s.log.Debug("job item run started", "job", j.name, "item", r.item, "trigger", trig, "run", r.run.ID, "cursor", cursor)
	var runErr error
	caughtUp := false
	if j.kind == "sql" {
		caughtUp, runErr = r.runSQL(ctx, cursor)
	} else {
		runErr = j.goRun(ctx, r)
		caughtUp = runErr == nil && !r.Stopping()
	}
	r.finish(runErr, caughtUp)
}

func (r *ItemRun) finish(runErr error, caughtUp bool) {
	s, j := r.svc, r.job
	end := s.cfg.Clock.Now()
	r.run.EndedAt = end
	finished := true
	switch {
	case errors.Is(runErr, ErrLost):
		r.run.Status = store.RunMoved
		r.run.Error = runErr.Error()
		s.log.Warn("job item taken by another node mid-run", "job", j.name, "item", r.item, "run", r.run.ID)
		// Not ours to write: the new holder owns the item's row.
		r.run.EndedAt = end
		s.m.Duration.WithLabelValues(j.name).Observe(end.Sub(r.run.StartedAt).Seconds())
		return
	case runErr != nil && r.stoppedAs() == "":
		r.run.Status, r.run.Error = store.RunFailed, runErr.Error()
		s.log.Warn("job item run failed", "job", j.name, "item", r.item, "run", r.run.ID, "err", runErr)
	case r.stoppedAs() != "" && !caughtUp:
		r.run.Status, finished = r.stoppedAs(), false
		if runErr != nil {
			r.run.Error = runErr.Error()
		}
	default:
		r.run.Status = store.RunDone
	}
	if caughtUp {
		s.mu.Lock()
		if _, owned := s.caughtUp[j.name+":"+r.item]; owned {
			s.caughtUp[j.name+":"+r.item] = end
		}
		s.mu.Unlock()
	}
	if finished {
		r.run.Cursor = ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.cfg.State.SaveRun(ctx, &r.run, r.token, finished); err != nil {
		s.log.Warn("job run end not recorded", "job", j.name, "item", r.item, "run", r.run.ID, "err", err)
	}
	s.m.Duration.WithLabelValues(j.name).Observe(end.Sub(r.run.StartedAt).Seconds())
	s.log.Debug("job item run ended", "job", j.name, "item", r.item, "run", r.run.ID, "status", r.run.Status,
		"fetched", r.run.Fetched, "processed", r.run.Processed, "failed", r.run.Failed)
}

// lastMissed is the latest fire time after last that is already past
// (zero: none, or nothing is known of the item: last is zero).
func (j *job) lastMissed(last, now time.Time) time.Time {
	if last.IsZero() {
		return time.Time{}
	}
	var missed time.Time
	for t, n := j.cron.Next(last), 0; !t.IsZero() && !t.After(now) && n < 100000; t, n = j.cron.Next(t), n+1 {
		missed = t
	}
	return missed
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
