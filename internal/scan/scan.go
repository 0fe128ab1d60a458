// Package scan is the stage that finds tasks in the store: one goroutine
// per owned sharding item claims, with a keyset cursor, what is due within
// the preheat window, and puts it in the hot tier.
package scan

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/ontimehq/ontime/internal/hot"
	"github.com/ontimehq/ontime/internal/metrics"
	"github.com/ontimehq/ontime/internal/startstop"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// Defaults for Config.
const (
	DefaultClaimBatch = 500
	// minSleep keeps a scanner from spinning when a due task stays
	// unclaimable for a moment (locked by another claimer, SKIP LOCKED).
	minSleep = 20 * time.Millisecond
)

// Store is what scanning needs of the store.
type Store interface {
	// Claim leases up to limit tasks of item that are due by horizon and
	// claimable at now.
	Claim(ctx context.Context, item store.Item, horizon, now time.Time, lease store.Lease, limit int) ([]store.Ref, error)
	// NextDue returns the earliest pending due time and the earliest end
	// of a claim or running lease in item (zero: none).
	NextDue(ctx context.Context, item store.Item) (due, leaseEnd time.Time, err error)
	// EndLeases ends the leases in item of holders that are gone.
	EndLeases(ctx context.Context, item store.Item, now time.Time, h store.Holders) (int, error)
	// ClaimAhead is Claim without the pending tasks due by now (with a
	// Runner they are claimed running).
	ClaimAhead(ctx context.Context, item store.Item, horizon, now time.Time, lease store.Lease, limit int) ([]store.Ref, error)
	// ClaimRunning claims up to limit tasks of item due by now straight
	// to running under lease and returns them.
	ClaimRunning(ctx context.Context, item store.Item, now time.Time, lease store.Lease, limit int) ([]*task.Task, error)
	// Release hands claimed tasks back (pending).
	Release(ctx context.Context, refs []store.Ref) error
	// ExtendHeld moves the lease end of the claimed tasks held under these
	// tokens whose lease ends before soon.
	ExtendHeld(ctx context.Context, status task.Status, tokens []int64, except []string, soon, until time.Time) (int, error)
}

// Tier is the feeding side of the hot tier.
type Tier interface {
	Add(ctx context.Context, entries ...hot.Entry) error
	// Len is the number of entries the tier holds.
	Len(ctx context.Context) (int, error)
}

// Runner takes overdue tasks straight to delivery (the fire stage): room
// for them reserved with TakeRoom, claimed running under its lease,
// handed to Run, the reservation given back.
type Runner interface {
	TakeRoom(max int) (n int, leaseUntil time.Time)
	GiveRoom(n int)
	Run(tasks []*task.Task)
}

// lenEvery bounds how often the tier's size is read: every item scanner
// asks before each claim.
const lenEvery = 50 * time.Millisecond

// Config wires a Scanner. Store, Tier and Planner are required.
type Config struct {
	Store   Store
	Tier    Tier
	Planner *hot.Planner // when each claimed task leaves the tier
	NodeID  string
	// Incarnation is this process's (nil: claims carry unattributed
	// tokens, and a restart is told by time alone): its tokens mark the
	// claims this process makes, so the node's next process, and every
	// other node, end them at once when it restarts.
	Incarnation *store.Incarnation
	// Window is how far ahead tasks are claimed into the hot tier.
	Window time.Duration
	// LeaseTTL is how long a claim outlives the latest due time it covers.
	LeaseTTL   time.Duration
	ClaimBatch int
	// Idle is the longest an item scanner sleeps when it knows of nothing
	// due: the bound on how late it notices tasks written by other nodes.
	// Default min(Window/4, 5s).
	Idle time.Duration
	// MaxEntries bounds the tier: past it, due tasks are left in the store
	// (pending, claimable by any node) until there is room. 0: no bound.
	MaxEntries int
	// Live returns the nodes alive in the cluster (this one may be left
	// out); nil means this node is alone. When an item starts being scanned
	// here, and whenever a node leaves the list or restarts (its
	// Incarnation or Started changes), the leases in this node's items held
	// by nodes not alive, or by a restarted node's previous process, are
	// ended: their tasks are
	// taken at once rather than when their leases run out (a dead node
	// fenced itself before its items moved). Every item, not only those
	// that move: a node's submit path claims tasks into any item.
	Live func(ctx context.Context) ([]Node, error)
	// Wait, when set, says how long n more tasks would wait behind the
	// node's backlog before their outcome is written (the completer's
	// Wait): a claim's lease covers it, so a burst larger than the fire
	// stage's bound keeps its claims while it waits in the tier.
	Wait    func(n int) time.Duration
	Logger  *slog.Logger
	Metrics *metrics.Metrics // nil: series kept but not registered
	// Tracer, when set (tracing on), makes a span of each claim that took
	// tasks ("ontime.claim": the item, the count); nil: none.
	Tracer trace.Tracer
	// Runner, when set, takes the overdue tasks: they are claimed running
	// while it has room and handed to it, never put in the tier (whose
	// claims, lease extensions and Starts are three more writes of each
	// row in a burst's drain, which the store's writes bound), and wait in
	// the store, pending and claimable by any node, while it has none.
	// The tier then preheats only tasks not due yet. nil: overdue tasks go
	// through the tier like the others.
	Runner Runner
}

// Node is a live node as the coordinator sees it.
type Node struct {
	ID string
	// Started is when the node's process started (zero: unknown). Rows it
	// wrote before were written by its previous process.
	Started time.Time
	// Incarnation is the ID of the node's process (store.Incarnation; 0:
	// unknown): leases it holds under tokens of another incarnation are
	// its previous processes'.
	Incarnation int64
}

// livePoll is how often the scanner asks Live whether a node left or
// restarted.
const livePoll = time.Second

// Scanner runs one goroutine per owned sharding item. Each claims what is
// due within the window, then sleeps until the earliest of: the next
// pending task entering the window, the next lease to expire, a Notify
// from a submit, or Idle. So a node reads a table no faster than it must.
//
// SetItems says which items this node owns; it may be called before Start
// (the items are scanned from Start on) and at any time after.
type Scanner struct {
	startstop.Base
	cfg Config
	log *slog.Logger
	m   *metrics.Metrics

	lenMu    sync.Mutex
	tierN    int       // the tier's size as last read, plus claims handed out since
	lenAt    time.Time // when it was read
	reserved int       // slots handed to claims under way

	startedAt time.Time // rows this node ID wrote before are a previous process's

	claimsMu sync.Mutex
	claims   map[int64]time.Time // token → claim lease end, for tokens added to the tier

	liveMu sync.Mutex
	live   []Node // cached Live answer, this node included
	liveAt time.Time

	mu    sync.Mutex
	ctx   context.Context // the running scanner's; nil when not running
	want  []store.Item
	items map[store.Item]*item
	wg    sync.WaitGroup
}

type item struct {
	cancel context.CancelFunc
	wake   chan struct{}
	mu     sync.Mutex
	next   time.Time // when the scanner plans to look again
	// scanning: a scan is under way and may have read the table already,
	// so next is stale; notified keeps the earliest time a Notify asked
	// for meanwhile (zero: none), folded into the plan when the scan ends.
	// Waking the scanner instead would rescan back to back while tasks are
	// submitted, competing with their inserts.
	scanning bool
	notified time.Time
	// lost: the tier lost its entries; end the claims in this item and
	// claim again before the next scan.
	lost bool
	// adopt: a node left or restarted; end its leases in this item.
	adopt bool
	// started is when the node was given the item: its first adopt reads
	// the live nodes afresh unless they were read since (liveNodes).
	started time.Time
	// overdue: its last scan left pending tasks due (the Runner had no
	// room). Only the item's own goroutine reads and writes it, and the
	// three below.
	overdue bool
	// due and leaseEnd are what the last scan's NextDue read: the first
	// pending task's due time and the first lease end. check: something
	// else may have made tasks overdue since (the item's first scan, a
	// Notify, a lost tier, adopted leases, a failed scan).
	due, leaseEnd time.Time
	check         bool
}

// New checks cfg and builds a Scanner; nothing runs until Start.
func New(cfg Config) (*Scanner, error) {
	switch {
	case cfg.Store == nil, cfg.Tier == nil, cfg.Planner == nil:
		return nil, errors.New("scan: Store, Tier and Planner are required")
	case cfg.NodeID == "":
		return nil, errors.New("scan: NodeID is required")
	case cfg.Window <= 0, cfg.LeaseTTL <= 0:
		return nil, errors.New("scan: Window and LeaseTTL must be positive")
	}
	if cfg.ClaimBatch <= 0 {
		cfg.ClaimBatch = DefaultClaimBatch
	}
	if cfg.Idle <= 0 {
		cfg.Idle = min(cfg.Window/4, 5*time.Second)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New(nil)
	}
	return &Scanner{cfg: cfg, log: cfg.Logger, m: cfg.Metrics, items: map[store.Item]*item{}, claims: map[int64]time.Time{}}, nil
}

// Start scans the items set so far and those set later.
func (s *Scanner) Start(ctx context.Context) error {
	ctx, ok, started, stopped := s.StartInit(ctx)
	if !ok {
		return nil
	}
	s.mu.Lock()
	s.startedAt = time.Now()
	s.ctx = ctx
	s.applyLocked()
	if tl, ok := s.cfg.Tier.(hot.TokenLister); ok {
		s.wg.Go(func() {
			startstop.Every(ctx, s.cfg.LeaseTTL/4, func(ctx context.Context) { s.heartbeat(ctx, tl) })
		})
	}
	s.mu.Unlock()
	started()
	if s.cfg.Live != nil {
		s.wg.Go(func() { s.watchLive(ctx) })
	}
	go func() {
		defer stopped()
		<-ctx.Done()
		s.mu.Lock()
		s.ctx = nil
		for it, is := range s.items {
			is.cancel()
			delete(s.items, it)
		}
		s.m.ItemsScanned.Set(0)
		s.mu.Unlock()
		s.wg.Wait()
	}()
	return nil
}

// SetItems makes the node scan exactly these items: scanners of items no
// longer listed stop, new ones start.
func (s *Scanner) SetItems(items []store.Item) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.want = append([]store.Item(nil), items...)
	if s.ctx != nil {
		s.applyLocked()
	}
}

func (s *Scanner) applyLocked() {
	want := make(map[store.Item]bool, len(s.want))
	for _, it := range s.want {
		want[it] = true
		if _, ok := s.items[it]; ok {
			continue
		}
		ictx, cancel := context.WithCancel(s.ctx)
		is := &item{cancel: cancel, wake: make(chan struct{}, 1), scanning: true, started: time.Now()}
		s.items[it] = is
		s.wg.Go(func() { s.scanItem(ictx, it, is) })
	}
	for it, is := range s.items {
		if !want[it] {
			is.cancel()
			delete(s.items, it)
		}
	}
	s.m.ItemsScanned.Set(float64(len(s.items)))
}

// Notify tells the item's scanner that a task enters the window at at; it
// wakes only if that is before the scanner's planned look.
func (s *Scanner) Notify(it store.Item, at time.Time) {
	s.mu.Lock()
	is := s.items[it]
	s.mu.Unlock()
	if is == nil {
		return // another node scans it; its Idle bounds the delay
	}
	is.mu.Lock()
	if is.scanning {
		if is.notified.IsZero() || at.Before(is.notified) {
			is.notified = at
		}
		is.mu.Unlock()
		return
	}
	early := at.Before(is.next)
	if early {
		is.next = at
	}
	is.mu.Unlock()
	if early {
		select {
		case is.wake <- struct{}{}:
		default:
		}
	}
}

// NotifyAll wakes every item scanner of this node that plans to look
// after at (a paused topic resumed: its overdue tasks are claimable).
func (s *Scanner) NotifyAll(at time.Time) {
	s.mu.Lock()
	items := make([]store.Item, 0, len(s.items))
	for it := range s.items {
		items = append(items, it)
	}
	s.mu.Unlock()
	for _, it := range items {
		s.Notify(it, at)
	}
}

func (s *Scanner) scanItem(ctx context.Context, it store.Item, is *item) {
	log := s.log.With("db", it.DB, "table", it.Table, "segment", it.Segment)
	retry := 100 * time.Millisecond
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	if !s.adopt(ctx, it, log, is.started) {
		is.mu.Lock()
		is.adopt = true // again at the next round
		is.mu.Unlock()
	}
	is.check = true
	for {
		is.mu.Lock()
		is.scanning = true
		lost, adopt := is.lost, is.adopt
		is.lost, is.adopt = false, false
		is.mu.Unlock()
		if lost || adopt {
			is.check = true
		}
		if adopt && !s.adopt(ctx, it, log, time.Time{}) {
			is.mu.Lock()
			is.adopt = true // again at the next round
			is.mu.Unlock()
		}
		if lost {
			s.reclaim(ctx, it, log)
		}
		next, err := s.scanOnce(ctx, it, is)
		if ctx.Err() != nil {
			return
		}
		s.m.Scans.Inc()
		if err != nil {
			is.check = true
			s.m.ScanErrs.Inc()
			log.Warn("scan failed", "err", err)
			next = time.Now().Add(retry)
			retry = min(retry*2, s.cfg.Idle)
		} else {
			retry = 100 * time.Millisecond
		}
		is.mu.Lock()
		if n := is.notified; !n.IsZero() && n.Before(next) {
			is.check = true
			next = n
			if floor := time.Now().Add(minSleep); next.Before(floor) {
				next = floor
			}
		}
		is.next, is.scanning, is.notified = next, false, time.Time{}
		is.mu.Unlock()
		timer.Reset(time.Until(next))
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-is.wake:
			is.check = true
			if !timer.Stop() {
				<-timer.C
			}
		}
	}
}

// adopt ends the leases in it of nodes that are not alive, and those of
// live nodes' previous processes, as the live nodes were read after
// after: an item just given to this node is adopted by the membership
// read since (liveNodes), which no longer lists the dead node whose items
// it was — a list from before its death would leave its tasks to wait for
// the next poll or their leases. false: it failed (the membership or the
// store did not answer) and must be tried again at the item's next round:
// nothing else would adopt those tasks before their leases run out.
func (s *Scanner) adopt(ctx context.Context, it store.Item, log *slog.Logger, after time.Time) bool {
	live, err := s.liveNodes(ctx, after)
	if err != nil {
		log.Warn("cannot tell which nodes are alive; trying again at the next round", "err", err)
		return false
	}
	h := store.Holders{Except: make([]string, len(live)), Restarted: make(map[string]time.Time, len(live)),
		Incarnations: make(map[string]int64, len(live))}
	for i, n := range live {
		h.Except[i] = n.ID
		h.Restarted[n.ID] = n.Started
		if n.Incarnation != 0 {
			h.Incarnations[n.ID] = n.Incarnation
		}
	}
	n, err := s.cfg.Store.EndLeases(ctx, it, time.Now(), h)
	if err != nil {
		log.Warn("ending the leases of dead nodes failed; trying again at the next round", "err", err)
		return false
	}
	if n > 0 {
		s.m.LeasesEnded.WithLabelValues("node_gone").Add(float64(n))
		log.Info("took the tasks of nodes that are gone", "tasks", n)
	}
	return true
}

// liveNodes is Live as asked after after, at most once a second: the
// last answer serves while younger than livePoll and asked after after
// (the items a node receives arrive together: one read serves them all);
// this node is in it, with the scanner's start as its Started (the
// scanner is what claims).
func (s *Scanner) liveNodes(ctx context.Context, after time.Time) ([]Node, error) {
	self := Node{ID: s.cfg.NodeID, Started: s.startedAt}
	if s.cfg.Incarnation != nil {
		self.Incarnation = s.cfg.Incarnation.ID()
	}
	if s.cfg.Live == nil {
		return []Node{self}, nil
	}
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	if s.live != nil && s.liveAt.After(after) && time.Since(s.liveAt) < livePoll {
		return s.live, nil
	}
	asked := time.Now()
	live, err := s.cfg.Live(ctx)
	if err != nil {
		return nil, err
	}
	live = slices.DeleteFunc(slices.Clone(live), func(n Node) bool { return n.ID == self.ID })
	live = append(live, self)
	s.live, s.liveAt = live, asked
	return live, nil
}

// watchLive asks Live every livePoll and, when a node left the list or
// restarted, has every item scanner adopt what that node held: its
// claims and running tasks in items that stay here, which no item start
// would ever look at.
func (s *Scanner) watchLive(ctx context.Context) {
	t := time.NewTicker(livePoll)
	defer t.Stop()
	var prev map[string]Node
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		live, err := s.liveNodes(ctx, time.Now())
		if err != nil {
			continue // adopt at the next answer: prev is kept
		}
		cur := make(map[string]Node, len(live))
		for _, n := range live {
			cur[n.ID] = n
		}
		changed := false
		for id, was := range prev {
			now, ok := cur[id]
			if !ok || restarted(was, now) {
				changed = true
				s.log.Info("a node left or restarted; taking what it held", "node", id, "incarnation", now.Incarnation)
			}
		}
		prev = cur
		if changed {
			s.markAll(func(is *item) { is.adopt = true })
		}
	}
}

// restarted says whether now is another process of the node was: its
// incarnation changed, or (either unknown) its start.
func restarted(was, now Node) bool {
	if was.Incarnation != 0 && now.Incarnation != 0 {
		return was.Incarnation != now.Incarnation
	}
	return !was.Started.IsZero() && !now.Started.IsZero() && !now.Started.Equal(was.Started)
}

// token is a fresh claim token of this process.
func (s *Scanner) token() int64 {
	if s.cfg.Incarnation != nil {
		return s.cfg.Incarnation.Token()
	}
	return store.NewToken()
}

// TierLost says the hot tier lost its entries (a Redis FLUSHALL or
// restart): every item scanner ends this node's claims and claims the
// tasks again, which puts them back in the tier with new tokens.
func (s *Scanner) TierLost() { s.markAll(func(is *item) { is.lost = true }) }

// markAll sets a flag on every item scanner (under its lock) and wakes it.
func (s *Scanner) markAll(set func(*item)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, is := range s.items {
		is.mu.Lock()
		set(is)
		is.mu.Unlock()
		select {
		case is.wake <- struct{}{}:
		default:
		}
	}
}

func (s *Scanner) reclaim(ctx context.Context, it store.Item, log *slog.Logger) {
	// Every node's claims, not only this node's: the Redis tier is shared,
	// so it lost the entries of all of them, and a claim in this item may
	// be another node's (the submit path claims tasks due soon into any
	// item). Their holders own other items and would never end it; it would
	// wait out its lease. A claim some node made again since the loss is
	// ended too: its entry's token no longer matches, so it is dropped at
	// its start, and this scan claims the task once more. Running tasks
	// are in their holders' lanes, not in the tier: they stay.
	n, err := s.cfg.Store.EndLeases(ctx, it, time.Now(), store.Holders{ClaimedOnly: true})
	if err != nil {
		log.Warn("ending the claims the hot tier lost failed; they wait for their leases", "err", err)
		return
	}
	if n > 0 {
		s.m.LeasesEnded.WithLabelValues("tier_lost").Add(float64(n))
		log.Info("claiming again the tasks the hot tier lost", "tasks", n)
	}
}

// claim claims up to limit tasks of it into the tier, then ends their
// reservation: from then on the tier's Len counts them.
func (s *Scanner) claim(ctx context.Context, it store.Item, limit int) ([]store.Ref, error) {
	now := time.Now()
	horizon := now.Add(s.cfg.Window)
	lease := store.Lease{Owner: s.cfg.NodeID, Until: horizon.Add(s.cfg.LeaseTTL + s.backlog(limit)), Token: s.token()}
	claim := s.cfg.Store.Claim
	if s.cfg.Runner != nil {
		claim = s.cfg.Store.ClaimAhead
	}
	refs, err := claim(ctx, it, horizon, now, lease, limit)
	if err != nil {
		s.unreserve(limit, 0)
		return nil, err
	}
	defer s.unreserve(limit, len(refs))
	if len(refs) == 0 {
		return nil, nil
	}
	if s.cfg.Tracer != nil {
		// Begun at the claim's start, made only once it took tasks: the
		// empty polls of a quiet item would be most of the spans.
		var span trace.Span
		ctx, span = s.cfg.Tracer.Start(ctx, "ontime.claim", trace.WithTimestamp(now), trace.WithAttributes(
			attribute.Int("ontime.db", it.DB), attribute.Int("ontime.table", it.Table), attribute.Int("ontime.segment", it.Segment),
			attribute.Int("ontime.tasks", len(refs))))
		defer span.End()
	}
	s.m.Claimed.Add(float64(len(refs)))
	entries := make([]hot.Entry, len(refs))
	now = time.Now()
	for i, r := range refs {
		entries[i] = s.cfg.Planner.Entry(now, r.ID, r.Topic, r.DueAt, r.Token)
		entries[i].Priority = r.Priority
	}
	if err := s.cfg.Tier.Add(ctx, entries...); err != nil {
		// The tier is away (Redis restarting): hand the claims back rather
		// than leave them to wait out their leases.
		if rerr := s.cfg.Store.Release(context.WithoutCancel(ctx), refs); rerr != nil {
			s.log.Warn("releasing claims the hot tier refused failed; they wait for their leases", "count", len(refs), "err", rerr)
		}
		return nil, err
	}
	if _, ok := s.cfg.Tier.(hot.TokenLister); ok {
		s.claimsMu.Lock()
		s.claims[lease.Token] = lease.Until
		s.claimsMu.Unlock()
	}
	return refs, nil
}

// backlog is how long n more claims would wait behind what the tier holds
// and the node has started (Wait), 0 without Wait.
func (s *Scanner) backlog(n int) time.Duration {
	if s.cfg.Wait == nil {
		return 0
	}
	s.lenMu.Lock()
	n += s.tierN
	s.lenMu.Unlock()
	return s.cfg.Wait(n)
}

// room reserves how many tasks a claim may take: ClaimBatch, less when
// the tier is near MaxEntries, 0 when it is full. The item scanners run at
// once, so what one is handed counts against the others until unreserve
// returns what its claim did not take.
func (s *Scanner) room(ctx context.Context) (int, error) {
	if s.cfg.MaxEntries <= 0 && s.cfg.Wait == nil {
		return s.cfg.ClaimBatch, nil
	}
	s.lenMu.Lock()
	defer s.lenMu.Unlock()
	if time.Since(s.lenAt) >= lenEvery {
		n, err := s.cfg.Tier.Len(ctx)
		if err != nil {
			return 0, fmt.Errorf("hot tier size: %w", err)
		}
		s.tierN, s.lenAt = n+s.reserved, time.Now()
	}
	r := s.cfg.ClaimBatch
	if s.cfg.MaxEntries > 0 {
		r = max(0, min(r, s.cfg.MaxEntries-s.tierN))
	}
	// Claim no more than the node can work through within a claim's
	// lease at the pace its store writes outcomes: the rest of a burst
	// stays pending (no write at all) until there is room, rather than
	// being claimed ahead, in claims that compete with the outcome writes
	// for the store (SQLite has one writer; 16 item scanners claiming
	// against one completer starved it) and then wait out their leases.
	// A claim that would not fit is made smaller, not dropped: with a
	// short window and lease a whole ClaimBatch may never fit, even on an
	// idle node.
	if s.cfg.Wait != nil {
		for r > 0 && s.cfg.Wait(s.tierN+r) > s.cfg.Window+s.cfg.LeaseTTL {
			r /= 2
		}
	}
	s.tierN += r
	s.reserved += r
	return r, nil
}

// unreserve ends a reservation of limit slots of which a claim used used:
// the rest are free again; the used ones are in the tier, counted by Len.
func (s *Scanner) unreserve(limit, used int) {
	if s.cfg.MaxEntries <= 0 && s.cfg.Wait == nil {
		return
	}
	s.lenMu.Lock()
	defer s.lenMu.Unlock()
	s.tierN -= limit - used
	s.reserved -= limit
}

// scanOnce claims everything due within the window in it and returns when
// to look again.
func (s *Scanner) scanOnce(ctx context.Context, it store.Item, is *item) (time.Time, error) {
	full := false
	// Overdue tasks are looked for only where there may be some: a
	// pending task or a lease end the last scan read is past, or the item
	// was told of a change. Each look reserves room under the fire stage's
	// bound for as long as its claim takes; 64 items looking on every scan
	// held room the fire stage needed for the tier's due tasks (MariaDB,
	// whose claim is a transaction: a 50,000 burst drained in 47 s, not 3).
	now := time.Now()
	look := is.check || !is.due.IsZero() && !is.due.After(now) || !is.leaseEnd.IsZero() && !is.leaseEnd.After(now)
	is.check = false
	if s.cfg.Runner != nil && look {
		var err error
		full, err = s.runOverdue(ctx, it)
		if err != nil {
			return time.Time{}, err
		}
		if full && is.overdue {
			// Overdue tasks wait for room: look again soon, reading
			// nothing meanwhile.
			return time.Now().Add(5 * minSleep), nil
		}
	}
	for {
		limit, err := s.room(ctx)
		if err != nil {
			return time.Time{}, err
		}
		if limit == 0 {
			// The tier is full: look again soon, when firing made room.
			return time.Now().Add(5 * minSleep), nil
		}
		refs, err := s.claim(ctx, it, limit)
		if err != nil {
			return time.Time{}, err
		}
		if len(refs) < limit {
			break
		}
	}
	now = time.Now()
	next := now.Add(s.cfg.Idle)
	due, leaseEnd, err := s.cfg.Store.NextDue(ctx, it)
	if err != nil {
		return time.Time{}, err
	}
	is.due, is.leaseEnd = due, leaseEnd
	if !due.IsZero() {
		if at := due.Add(-s.cfg.Window); at.Before(next) {
			next = at
		}
	}
	if !leaseEnd.IsZero() && leaseEnd.Before(next) {
		next = leaseEnd.Add(time.Millisecond) // claimable once strictly past
	}
	floor := now.Add(minSleep)
	// Pending tasks due already: left by a Runner without room, they wait
	// for it to make some; else they fell due since runOverdue looked.
	if is.overdue = s.cfg.Runner != nil && !due.IsZero() && !due.After(now); is.overdue && full {
		floor = now.Add(5 * minSleep)
	}
	if next.Before(floor) {
		next = floor
	}
	return next, nil
}

// runOverdue claims the item's overdue tasks running, as many as the
// Runner has room for, and hands them to it; full says it ran out of room
// (overdue tasks may be left).
func (s *Scanner) runOverdue(ctx context.Context, it store.Item) (full bool, err error) {
	for {
		n, leaseUntil := s.cfg.Runner.TakeRoom(s.cfg.ClaimBatch)
		if n == 0 {
			return true, nil
		}
		tasks, err := s.cfg.Store.ClaimRunning(ctx, it, time.Now(), store.Lease{Owner: s.cfg.NodeID, Until: leaseUntil, Token: s.token()}, n)
		if len(tasks) > 0 {
			// Committed running (also when an error follows): delivered.
			s.m.Claimed.Add(float64(len(tasks)))
			s.cfg.Runner.Run(tasks)
		}
		s.cfg.Runner.GiveRoom(n)
		if err != nil || len(tasks) < n {
			return false, err
		}
	}
}

// Owned returns the items this node owns: those of the last SetItems (the
// retention cleaner cleans what the scanner scans).
func (s *Scanner) Owned() []store.Item {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]store.Item(nil), s.want...)
}

// heartbeat extends, every LeaseTTL/4, the claims of the tasks waiting in
// the tier that would end within LeaseTTL/2. A burst larger than the fire
// stage's bound waits there, claimed, for as long as delivery and the
// store take to work through it; without this its claims ran out, the
// scanner claimed the same tasks again (the expired first, in big
// batches), and the store's one writer spent its time on claims and
// starts of stale entries instead of outcomes. One statement per table
// covers every entry, by claim token.
func (s *Scanner) heartbeat(ctx context.Context, tl hot.TokenLister) {
	if err := s.extendClaims(ctx, tl, time.Now()); err != nil && ctx.Err() == nil {
		s.log.Warn("extending the claims of tasks in the hot tier failed; they may be claimed again", "err", err)
	}
}

// extendClaims moves the claims of the tier's entries that end before
// now+LeaseTTL/2 to now+LeaseTTL, plus the backlog ahead of them. Claims
// are sized to the backlog when made, so this is rarely needed; tokens
// that left the tier are forgotten. The tier is this process's: its
// entries of claims the scanner did not make (the submit path's, of tasks
// due within the window; the completer's, of retries) are extended too,
// their lease ends learnt by the first extension. Those claims end a lease
// after their due time, whatever the backlog ahead of them: a burst
// submitted within its window was claimed again when they ran out, its
// entries stale (a tenth more claims than tasks at 2,000,000).
func (s *Scanner) extendClaims(ctx context.Context, tl hot.TokenLister, now time.Time) error {
	inTier, err := tl.Tokens(ctx)
	if err != nil {
		return err
	}
	held := make(map[int64]bool, len(inTier))
	for _, tok := range inTier {
		held[tok] = true
	}
	soon := now.Add(s.cfg.LeaseTTL / 2)
	var tokens []int64
	s.claimsMu.Lock()
	for tok, until := range s.claims {
		switch {
		case !held[tok]:
			delete(s.claims, tok)
		case until.Before(soon):
			tokens = append(tokens, tok)
		}
	}
	for _, tok := range inTier {
		if _, ok := s.claims[tok]; !ok {
			// Lease end unknown: the store writes only the rows whose
			// lease ends before soon.
			tokens = append(tokens, tok)
			s.claims[tok] = time.Time{}
		}
	}
	s.claimsMu.Unlock()
	if len(tokens) == 0 {
		return nil
	}
	until := now.Add(s.cfg.LeaseTTL + s.backlog(0))
	wctx, cancel := context.WithTimeout(ctx, s.cfg.LeaseTTL)
	defer cancel()
	// Every claim of these tokens that ends before until moves to until.
	n, err := s.cfg.Store.ExtendHeld(wctx, task.StatusClaimed, tokens, nil, until, until)
	s.m.ClaimsExtended.Add(float64(n))
	if err != nil {
		return err
	}
	s.claimsMu.Lock()
	for _, tok := range tokens {
		if _, ok := s.claims[tok]; ok {
			s.claims[tok] = until
		}
	}
	s.claimsMu.Unlock()
	return nil
}
