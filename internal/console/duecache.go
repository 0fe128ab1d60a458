package console

import (
	"context"
	"sync"
	"time"
)

// dueCache keeps the Coming up histograms, one per bucket width (one per
// range), shared by every viewer. The day and the week are sums of the
// store's maintained counters (a few milliseconds), but the hour and six
// hours count every pending task in their range — at 10 M rows up to
// hundreds of thousands of index entries and as many row reads for their
// topics — and MariaDB counts every range, so a page view does not count: it shows the last count (the page says how old)
// and, when that is older than dueFresh, one refresh runs beside it for
// the next view. A view without a histogram (none yet, or one older than
// dueStale) waits for the count at most dueWait: past it the page says it
// is counting and its next poll shows the histogram.
type dueCache struct {
	count func(ctx context.Context, from time.Time, step time.Duration, n int) ([]DueCounts, error)

	mu sync.Mutex
	by map[time.Duration]*dueEntry
	// wg tracks the refreshes running beside a view (tests wait on it).
	wg sync.WaitGroup
}

type dueEntry struct {
	from   time.Time // the first bucket's start
	n      int
	counts []DueCounts
	at     time.Time // when counted; zero before the first count
	// dur is how long the last count took: the next waits at least as
	// long (fresh), so a range that takes seconds to count (a week of
	// millions of rows on SQLite) keeps at most half of a core busy
	// while viewed, not all of it.
	dur time.Duration
	// running is closed when the refresh in flight ends; nil when none.
	running chan struct{}
	err     error // the last refresh's, when it failed
}

const (
	// dueFresh: a histogram younger than this is shown without a
	// refresh; the page polls every 10 s, so each poll sees one at most
	// 10 s plus a count old.
	dueFresh = 5 * time.Second
	// dueStale: past this a view waits for a fresh count.
	dueStale = 5 * time.Minute
	// dueTimeout bounds one count: a week of 10 M rows on a loaded
	// 2-core machine took over 30 s.
	dueTimeout = 5 * time.Minute
	// dueWait is how long a view without a histogram waits for one.
	dueWait = 2 * time.Second
)

// get returns the histogram of n buckets of step from from, or the last
// one counted for this step (its own first bucket's start, at most
// dueStale old), and when it was counted; a zero time and no error when
// the count runs on past dueWait (the page says it is counting).
func (d *dueCache) get(ctx context.Context, from time.Time, step time.Duration, n int) (time.Time, []DueCounts, time.Time, error) {
	d.mu.Lock()
	if d.by == nil {
		d.by = map[time.Duration]*dueEntry{}
	}
	e := d.by[step]
	if e == nil {
		e = &dueEntry{}
		d.by[step] = e
	}
	now := time.Now()
	usable := !e.at.IsZero() && now.Sub(e.at) < dueStale && e.n == n
	if usable && (now.Sub(e.at) < max(dueFresh, e.dur) && e.from.Equal(from) || e.running != nil) {
		defer d.mu.Unlock()
		return e.from, e.counts, e.at, nil
	}
	if e.running == nil {
		e.running = make(chan struct{})
		d.wg.Add(1)
		// The refresh outlives this request when the view does not wait
		// for it: its own deadline, not the request's.
		go d.refresh(context.WithoutCancel(ctx), e, from, step, n)
	}
	running := e.running
	d.mu.Unlock()
	if usable {
		return e.fromLocked(d)
	}
	wait := time.NewTimer(dueWait)
	defer wait.Stop()
	select {
	case <-running:
	case <-wait.C:
		return time.Time{}, nil, time.Time{}, nil
	case <-ctx.Done():
		return time.Time{}, nil, time.Time{}, ctx.Err()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if e.at.IsZero() || e.n != n {
		return time.Time{}, nil, time.Time{}, e.err
	}
	return e.from, e.counts, e.at, nil
}

// fromLocked reads e under d's lock.
func (e *dueEntry) fromLocked(d *dueCache) (time.Time, []DueCounts, time.Time, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return e.from, e.counts, e.at, nil
}

func (d *dueCache) refresh(ctx context.Context, e *dueEntry, from time.Time, step time.Duration, n int) {
	defer d.wg.Done()
	ctx, cancel := context.WithTimeout(ctx, dueTimeout)
	defer cancel()
	t0 := time.Now()
	counts, err := d.count(ctx, from, step, n)
	d.mu.Lock()
	defer d.mu.Unlock()
	if err == nil {
		e.from, e.n, e.counts, e.at, e.dur = from, n, counts, time.Now(), time.Since(t0)
	}
	e.err = err
	close(e.running)
	e.running = nil
}
