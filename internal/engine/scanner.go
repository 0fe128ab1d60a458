package engine

import (
	"context"
	"sync"
	"time"

	"github.com/ontimehq/ontime/internal/hot"
	"github.com/ontimehq/ontime/internal/store"
)

// minScanSleep keeps a scanner from spinning when a due task stays
// unclaimable for a moment (locked by another claimer, SKIP LOCKED).
const minScanSleep = 20 * time.Millisecond

// scanners runs one goroutine per owned sharding item. Each claims what is
// due within the window, then sleeps until the earliest of: the next pending
// task entering the window, the next lease to expire, a notify from a
// submit, or ScanIdle. So a node reads a table no faster than it must.
type scanners struct {
	e     *Engine
	mu    sync.Mutex
	items map[store.Item]*itemScanner
	wg    sync.WaitGroup
}

type itemScanner struct {
	cancel context.CancelFunc
	wake   chan struct{}
	mu     sync.Mutex
	next   time.Time // when the scanner plans to look again
}

func newScanners(e *Engine) *scanners {
	return &scanners{e: e, items: map[store.Item]*itemScanner{}}
}

func (s *scanners) set(ctx context.Context, items []store.Item) {
	s.mu.Lock()
	defer s.mu.Unlock()
	want := make(map[store.Item]bool, len(items))
	for _, it := range items {
		want[it] = true
		if _, ok := s.items[it]; ok {
			continue
		}
		ictx, cancel := context.WithCancel(ctx)
		is := &itemScanner{cancel: cancel, wake: make(chan struct{}, 1)}
		s.items[it] = is
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.e.scanItem(ictx, it, is)
		}()
	}
	for it, is := range s.items {
		if !want[it] {
			is.cancel()
			delete(s.items, it)
		}
	}
}

// owned returns the items scanned now.
func (s *scanners) owned() []store.Item {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]store.Item, 0, len(s.items))
	for it := range s.items {
		out = append(out, it)
	}
	return out
}

func (s *scanners) stopAll() {
	s.mu.Lock()
	for it, is := range s.items {
		is.cancel()
		delete(s.items, it)
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// notify tells the item's scanner that a task enters the window at at; it
// wakes only if that is before the scanner's planned look.
func (s *scanners) notify(it store.Item, at time.Time) {
	s.mu.Lock()
	is := s.items[it]
	s.mu.Unlock()
	if is == nil {
		return // another node scans it; its ScanIdle bounds the delay
	}
	is.mu.Lock()
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

func (e *Engine) scanItem(ctx context.Context, it store.Item, is *itemScanner) {
	log := e.log.With("db", it.DB, "table", it.Table, "segment", it.Segment)
	retry := 100 * time.Millisecond
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for {
		next, err := e.scanOnce(ctx, it)
		if ctx.Err() != nil {
			return
		}
		e.m.Scans.Inc()
		if err != nil {
			e.m.ScanErrs.Inc()
			log.Warn("scan failed", "err", err)
			next = time.Now().Add(retry)
			retry = min(retry*2, e.cfg.ScanIdle)
		} else {
			retry = 100 * time.Millisecond
		}
		is.mu.Lock()
		is.next = next
		is.mu.Unlock()
		timer.Reset(time.Until(next))
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-is.wake:
			if !timer.Stop() {
				<-timer.C
			}
		}
	}
}

// scanOnce claims everything due within the window in it and returns when
// to look again.
func (e *Engine) scanOnce(ctx context.Context, it store.Item) (time.Time, error) {
	for {
		now := time.Now()
		horizon := now.Add(e.cfg.Window)
		lease := store.Lease{Owner: e.cfg.NodeID, Until: horizon.Add(e.cfg.LeaseTTL), Token: newToken()}
		refs, err := e.store.Claim(ctx, it, horizon, now, lease, e.cfg.ClaimBatch)
		if err != nil {
			return time.Time{}, err
		}
		if len(refs) > 0 {
			e.m.Claimed.Add(float64(len(refs)))
			entries := make([]hot.Entry, len(refs))
			now := time.Now()
			for i, r := range refs {
				entries[i] = e.entry(now, r.ID, r.Topic, r.DueAt, r.Token)
			}
			if err := e.tier.Add(ctx, entries...); err != nil {
				return time.Time{}, err // claimed rows come back when their lease ends
			}
		}
		if len(refs) < e.cfg.ClaimBatch {
			break
		}
	}
	now := time.Now()
	next := now.Add(e.cfg.ScanIdle)
	due, leaseEnd, err := e.store.NextDue(ctx, it)
	if err != nil {
		return time.Time{}, err
	}
	if !due.IsZero() {
		if at := due.Add(-e.cfg.Window); at.Before(next) {
			next = at
		}
	}
	if !leaseEnd.IsZero() && leaseEnd.Before(next) {
		next = leaseEnd.Add(time.Millisecond) // claimable once strictly past
	}
	if floor := now.Add(minScanSleep); next.Before(floor) {
		next = floor
	}
	return next, nil
}
