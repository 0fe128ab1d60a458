package sqlstore

import (
	"context"
	"time"

	"golang.org/x/time/rate"
)

// pacer spaces an expansion's pages so that the live load keeps most of
// the databases' time. Two knobs, as online schema tools have them:
// Nice (gh-ost's nice-ratio) sleeps that many times each page's own
// duration after it, so the expansion yields in proportion to how hard
// the database finds it; Rate caps rows per second whatever the
// database's speed. Both may be set; the longer wait wins.
type pacer struct {
	nice float64
	lim  *rate.Limiter
}

func newPacer(o ExpandOptions, page int) *pacer {
	p := &pacer{nice: o.Nice}
	if o.Rate > 0 {
		// The burst holds a page (a reservation of more is refused)
		// and no more: the cap holds from the first page.
		p.lim = rate.NewLimiter(rate.Limit(o.Rate), page)
	}
	return p
}

// page waits after a page of rows that began at start.
func (p *pacer) page(ctx context.Context, start time.Time, rows int) error {
	if p == nil {
		return nil
	}
	wait := time.Duration(p.nice * float64(time.Since(start)))
	if p.lim != nil && rows > 0 {
		r := p.lim.ReserveN(time.Now(), rows)
		if !r.OK() {
			// Cannot happen: the burst holds a page. Waiting nothing
			// beats failing an expansion.
			return nil
		}
		wait = max(wait, r.Delay())
	}
	if wait <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
