package hot

import (
	"math"
	"sync"
	"time"
)

// Planner chooses when each claimed task leaves the hot tier. A task
// must be marked running in the store (Store.Start) before it is delivered,
// and the store starts a bounded number of tasks per second. When many
// tasks are due at one instant, starting them all at FireLead before the
// instant makes the last of them late by count/rate: a 50,000-task burst
// on SQLite was 1.7 s late at p99. The planner instead books each task a
// start slot in a calendar of buckets with the capacity the store has shown
// (rate × bucket), filling backwards from the due time, so that a burst's
// store writes are spread over the seconds before it and the tasks are
// handed to delivery at the due time itself. No task is ever delivered
// early: dispatch still waits for the due time.
//
// The price is that a task fired ahead can no longer be cancelled (409):
// FireLead before its due time for ordinary traffic, up to MaxFireLead for
// tasks in a burst.
type Planner struct {
	base, max time.Duration
	bucket    time.Duration
	cold      time.Duration // a Start's time assumed until one is measured

	mu    sync.Mutex
	rate  float64         // estimated store starts per second
	used  map[int64]int   // bucket → slots booked
	skip  map[int64]int64 // full bucket → an earlier bucket to try (path-compressed)
	prune int64           // buckets below this are gone

	active    int           // Starts under way
	busySince time.Time     // when active last went from 0 to 1
	busy      time.Duration // busy time not yet sampled, closed periods
	rows      int           // tasks started, not yet sampled
	slow      time.Duration // slowest recent Start, decaying
	slowAt    time.Time
	popSlow   time.Duration // latest recent Pop past its entries' time, decaying (poplead.go)
	popAt     time.Time
}

const (
	leadBucket       = 10 * time.Millisecond
	leadInitialRate  = 20000 // tasks/s, until the store has shown its own
	leadMinRate      = 2000
	leadSampleRows   = 1024                   // a sample covers at least this many tasks …
	leadSampleBusy   = 100 * time.Millisecond // … and this much busy time
	leadSlowHalfLife = 10 * time.Second
)

// NewPlanner builds a planner: tasks leave the tier base before they are
// due, up to max ahead in a burst (max <= base turns the spreading off).
func NewPlanner(base, max time.Duration) *Planner {
	return &Planner{base: base, max: max, bucket: leadBucket, rate: leadInitialRate,
		used: map[int64]int{}, skip: map[int64]int64{}}
}

// ColdStart is the time of a Start a node assumes until it has measured
// one (AssumeStart). The tasks booked meanwhile are its first seconds of
// traffic: booked at base, they all met the first Starts of a node that
// came up under load (100-200 ms each on MariaDB with 16 clients
// submitting) and went out late, p99 200 ms.
const ColdStart = 100 * time.Millisecond

// AssumeStart makes the planner book, until the first Start has ended, as
// if a Start took d (the lead twice that, at most max). It returns p and
// is called before the planner is used.
func (p *Planner) AssumeStart(d time.Duration) *Planner {
	p.cold = d
	return p
}

// FireAt books a start slot for a task due at due and returns when it
// should leave the hot tier: due − lead when its bucket has room, earlier
// when the buckets before it are booked, never more than max ahead.
func (p *Planner) FireAt(now, due time.Time) time.Time {
	if p.max <= p.base {
		return due.Add(-p.base)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	latest := due.Add(-p.leadLocked())
	nowB := now.UnixNano() / int64(p.bucket)
	p.gc(nowB)
	b := latest.UnixNano() / int64(p.bucket)
	if b <= nowB {
		return latest // due within a bucket: start now, nothing to plan
	}
	floor := max(due.Add(-p.max).UnixNano()/int64(p.bucket), nowB)
	capacity := max(1, int(p.rate*p.bucket.Seconds()))
	start := b
	for b > floor && p.used[b] >= capacity {
		if s, ok := p.skip[b]; ok {
			b = s
		} else {
			b--
		}
	}
	if b < floor {
		b = floor
	}
	// Compress the path so the next task of the burst jumps straight here.
	for s := start; s > b; {
		next, ok := p.skip[s]
		p.skip[s] = b
		if !ok {
			next = s - 1
		}
		s = next
	}
	p.used[b]++
	if b == start {
		return latest
	}
	// The end of the booked bucket, so tasks of one bucket keep their order.
	return time.Unix(0, (b+1)*int64(p.bucket)-1)
}

// leadLocked is the lead of a task that needs no room: base, or twice the
// slowest recent Start and Pop when the store or the tier is slower than
// that (a database across the network, fsync on commit, a Redis round
// trip on a loaded machine), so that ordinary traffic is started before
// it is due there too.
//
// Until the first Start has ended the store's speed is unknown: the lead
// is then as if a Start took cold (AssumeStart).
func (p *Planner) leadLocked() time.Duration {
	slow := p.slow
	if p.slowAt.IsZero() {
		slow = p.cold
	}
	return min(max(p.base, 2*(slow+p.popSlow)), p.max)
}

// PopAhead is how much earlier than booked entries are taken from the
// tier now: the lead's growth over base since. An entry is booked once,
// when it enters the tier, with the lead of that moment; when the store's
// Starts (or the tier's Pops) have since become slower, the entries booked
// before would leave too late for them, so they leave this much sooner.
// An entry booked with a longer lead leaves that much sooner too: never
// later than it needs, at most twice max ahead of its due time.
func (p *Planner) PopAhead() time.Duration {
	if p.max <= p.base {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return max(p.leadLocked()-p.base, 0)
}

// gc forgets buckets in the past, about once a second.
func (p *Planner) gc(nowB int64) {
	if nowB-p.prune < int64(time.Second/p.bucket) {
		return
	}
	for b := range p.used {
		if b < nowB {
			delete(p.used, b)
		}
	}
	for b := range p.skip {
		if b < nowB {
			delete(p.skip, b)
		}
	}
	p.prune = nowB
}

// StartBegin and StartEnd bracket each Store.Start. The fire workers run
// Starts concurrently, so the store's throughput is the tasks started per
// second during which at least one Start was under way. Tasks count when
// their Start ends, so a sample spans several Starts (leadSampleRows,
// leadSampleBusy); the estimate moves a quarter of the way to each.
func (p *Planner) StartBegin(now time.Time) {
	p.mu.Lock()
	if p.active == 0 {
		p.busySince = now
	}
	p.active++
	p.mu.Unlock()
}

func (p *Planner) StartEnd(now time.Time, n int, took time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	// The slowest recent Start, halving every leadSlowHalfLife.
	if !p.slowAt.IsZero() {
		p.slow = time.Duration(float64(p.slow) * math.Exp2(-now.Sub(p.slowAt).Seconds()/leadSlowHalfLife.Seconds()))
	}
	p.slow, p.slowAt = max(p.slow, took), now
	p.active--
	p.rows += n
	busy := p.busy + now.Sub(p.busySince)
	if p.active == 0 {
		p.busy = busy
	}
	if p.rows < leadSampleRows || busy < leadSampleBusy {
		return
	}
	sample := float64(p.rows) / busy.Seconds()
	p.rate = max(leadMinRate, p.rate+(sample-p.rate)/4)
	p.rows, p.busy, p.busySince = 0, 0, now
}

// Estimate returns the current rate estimate (tasks/s).
func (p *Planner) Estimate() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rate
}

// Entry is the hot-tier entry of a claimed task due at due: it leaves the
// tier when the planner says (booking it a start slot).
func (p *Planner) Entry(now time.Time, id, topic string, due time.Time, token int64) Entry {
	return Entry{ID: id, Topic: topic, DueAt: p.FireAt(now, due), Token: token}
}
