package scanjob

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// sendParallel bounds the batches of one page in flight at once.
const sendParallel = 4

// runSQL walks one item of a SQL job from cursor: fetch a page after the
// cursor, hand it to the target in batches, set the processed rows, push
// the failed ones back, save the cursor; until a page comes back short
// (nothing left: caughtUp), max_rows is reached, or the run is stopped.
func (r *ItemRun) runSQL(ctx context.Context, cursor string) (caughtUp bool, err error) {
	j := r.job
	spec := j.sql
	tg, err := j.src.parseItem(r.item)
	if err != nil {
		return false, err
	}
	after, err := decodeCursor(cursor)
	if err != nil {
		return false, err
	}
	var taken int
	// The next page is fetched while this one is sent and written: the
	// fetch leaves the critical path (its rows are only read, so a page
	// fetched and then dropped because the run stops changes nothing).
	type fetched struct {
		p     *page
		after any
		at    time.Time
		lim   int
		err   error
	}
	fetch := func(after any) <-chan fetched {
		ch := make(chan fetched, 1)
		limit := spec.Page
		if spec.MaxRows > 0 {
			limit = min(limit, spec.MaxRows-taken)
		}
		go func() {
			now := r.svc.cfg.Clock.Now()
			p, err := j.src.fetch(ctx, tg, after, now, limit)
			ch <- fetched{p: p, after: after, at: now, lim: limit, err: err}
		}()
		return ch
	}
	next := fetch(after)
	for {
		f := <-next
		if r.Stopping() {
			return false, nil
		}
		if f.err != nil {
			return false, r.statementFailed(ctx, j.src.fetchStmt(tg, f.after, f.at, f.lim), f.err)
		}
		p, now, limit := f.p, f.at, f.lim
		if len(p.rows) == 0 {
			return true, nil
		}
		taken += len(p.rows)
		after = p.keys[len(p.keys)-1]
		short := len(p.rows) < limit
		more := !short && (spec.MaxRows == 0 || taken < spec.MaxRows)
		if more {
			next = fetch(after)
		}
		// A job that broke meanwhile (another item's write was refused)
		// delivers nothing more: this page could not be completed.
		if j.health.broken() {
			return false, j.health.brokenErr()
		}
		failedAt := r.sendPage(ctx, p)
		var okKeys, badKeys []any
		var badRetries []int64
		left := 0
		for i, k := range p.keys {
			if !failedAt[i] {
				okKeys = append(okKeys, k)
				continue
			}
			badKeys = append(badKeys, k)
			if len(p.retries) > 0 {
				badRetries = append(badRetries, p.retries[i])
				if p.retries[i]+1 >= int64(spec.MaxAttempts) {
					left++
				}
			}
		}
		// Writes outlive a cancelled run: what was delivered is marked.
		wctx := context.WithoutCancel(ctx)
		var writes []stmt
		if len(okKeys) > 0 {
			writes = append(writes, j.src.doneStmt(tg, okKeys))
		}
		for _, w := range append(writes, j.src.failedStmts(tg, badKeys, badRetries, now)...) {
			if _, err := j.src.exec(wctx, w); err != nil {
				if err := r.statementFailed(wctx, w, err); err != nil {
					return false, err
				}
			}
		}
		if left > 0 {
			r.svc.log.Warn("job rows left after max_attempts", "job", j.name, "item", r.item, "rows", left, "max_attempts", spec.MaxAttempts)
		}
		enc, err := encodeCursor(after)
		if err != nil {
			return false, err
		}
		if err := r.Page(ctx, enc, len(p.rows), len(okKeys), len(badKeys), left); err != nil {
			return false, err
		}
		if short {
			return true, nil
		}
		if !more {
			return false, nil // max_rows reached
		}
	}
}

// sendPage hands a page to the target in process.batch rows per call, a
// few calls at once; it returns which rows failed (a failed call fails
// its rows, an answer's {"failed": […]} the rows it lists).
func (r *ItemRun) sendPage(ctx context.Context, p *page) []bool {
	j := r.job
	n := len(p.rows)
	failed := make([]bool, n)
	size := j.sql.Batch
	var wg sync.WaitGroup
	sem := make(chan struct{}, sendParallel)
	for lo := 0; lo < n; lo += size {
		hi := min(lo+size, n)
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			b := &Batch{Job: j.name, Item: r.item, Rows: p.rows[lo:hi], Keys: p.keys[lo:hi]}
			bad, err := j.sender.Send(ctx, j.sql.Target, b)
			if err != nil {
				r.svc.log.Debug("job batch failed", "job", j.name, "item", r.item, "rows", hi-lo, "err", err)
				for i := lo; i < hi; i++ {
					failed[i] = true
				}
				return
			}
			if len(bad) == 0 {
				return
			}
			set := make(map[string]bool, len(bad))
			for _, k := range bad {
				set[keyString(k)] = true
			}
			for i := lo; i < hi; i++ {
				if set[keyString(p.keys[i])] {
					failed[i] = true
				}
			}
		}()
	}
	wg.Wait()
	return failed
}

// String names the item for logs.
func (t target) String() string { return fmt.Sprintf("%d/%s/%d", t.db, t.table, t.segment) }
