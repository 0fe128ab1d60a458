package schedule

import (
	"context"
	"errors"
	"time"

	"github.com/ontimehq/ontime/internal/cronspec"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/submit"
	"github.com/ontimehq/ontime/internal/task"
)

// maxPerRound bounds the tasks one schedule makes in one round; a round
// that reaches it runs again at once.
const maxPerRound = 500

// retryDelay is the wait after a failed store call or a node not yet ready.
const retryDelay = 200 * time.Millisecond

// minGap keeps the loop from spinning when rounds keep asking to run
// again at once (a compare-and-set lost over and over).
const minGap = 5 * time.Millisecond

// Start launches the loop that makes the owned schedules' tasks; it returns
// at once.
func (s *Service) Start(ctx context.Context) error {
	return s.Go(ctx, s.run)
}

func (s *Service) run(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-s.wake:
		}
		next := s.Round(ctx)
		timer.Reset(max(time.Until(next), minGap))
	}
}

// Round makes the due tasks of every schedule this node owns and returns
// when it should run again. The loop calls it; tests call it with a moved
// clock.
func (s *Service) Round(ctx context.Context) time.Time {
	now := s.now()
	wake := now.Add(s.cfg.Poll)
	recs, err := s.st.Schedules(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.m.failures.Inc()
			s.log.Warn("schedule: reading schedules failed", "err", err)
		}
		return now.Add(retryDelay)
	}
	for _, r := range recs {
		if ctx.Err() != nil {
			return wake
		}
		if !s.Owns(r.Name) {
			continue
		}
		if w := s.process(ctx, r); w.Before(wake) {
			wake = w
		}
	}
	return wake
}

// process brings one schedule up to now + Lookahead and returns when it
// needs the next look.
func (s *Service) process(ctx context.Context, r store.Schedule) time.Time {
	now := s.now()
	if r.Applied != r.Version {
		if !s.withdraw(ctx, &r, now) {
			return now.Add(retryDelay)
		}
	}
	if r.Paused {
		return now.Add(s.cfg.Poll)
	}
	spec, err := s.spec(r)
	if err != nil { // validated when written: only a zone database missing here
		s.log.Error("schedule: cannot parse its cron expression on this node", "schedule", r.Name, "err", err)
		return now.Add(s.cfg.Poll)
	}
	var specs []task.Spec
	start := r.Cursor
	missed := false
	if limit := now.Add(-s.cfg.MisfireAfter); start.Before(limit) {
		if last := lastFire(spec, start, limit); !last.IsZero() {
			missed = true
			if r.Misfire == store.MisfireFireOnce {
				specs = append(specs, taskSpec(r, last, true))
			}
			start = last
		}
	}
	times := spec.Between(start, now.Add(s.cfg.Lookahead), maxPerRound)
	for _, t := range times {
		specs = append(specs, taskSpec(r, t, false))
	}
	to := r.ScheduleProgress
	to.Cursor = start
	if len(times) > 0 {
		to.Cursor = times[len(times)-1]
	}
	if len(specs) == 0 && to.Cursor.Equal(r.Cursor) {
		return s.nextLook(spec, r.Cursor, now)
	}
	made := 0
	if len(specs) > 0 {
		res, err := s.sub.Submit(ctx, specs)
		if err != nil {
			if !errors.Is(err, submit.ErrNotReady) && ctx.Err() == nil {
				s.m.failures.Inc()
				s.log.Warn("schedule: making tasks failed", "schedule", r.Name, "err", err)
			}
			return now.Add(retryDelay)
		}
		for i, rr := range res {
			switch {
			case rr.Err != nil:
				// Judged valid when written; only a node whose limits differ
				// refuses it. Moving on beats retrying forever.
				s.log.Error("schedule: task refused", "schedule", r.Name, "key", specs[i].Key, "err", rr.Err)
			case !rr.Existing:
				made++
			}
		}
	}
	ok, err := s.st.AdvanceSchedule(ctx, r.Name, r.Version, r.ScheduleProgress, to)
	if err != nil {
		// The tasks stay; the next round finds them by key.
		if ctx.Err() == nil {
			s.log.Warn("schedule: moving the cursor failed", "schedule", r.Name, "err", err)
		}
		return now.Add(retryDelay)
	}
	if !ok {
		s.lost(ctx, r)
		return now
	}
	s.m.made.Add(float64(made))
	if missed {
		s.m.missed.WithLabelValues(string(r.Misfire)).Inc()
		s.log.Warn("schedule: fire times missed while no node made them", "schedule", r.Name, "misfire", string(r.Misfire),
			"from", r.Cursor, "to", start)
	}
	if made > 0 {
		s.log.Debug("schedule: tasks made", "schedule", r.Name, "tasks", made, "through", to.Cursor)
	}
	if len(times) == maxPerRound {
		return now
	}
	return s.nextLook(spec, to.Cursor, now)
}

// nextLook is when the round after one that made fire times through
// cursor is due: once the next fire time is within half the lookahead, so
// a round makes half a lookahead of fire times at once rather than one at
// a time (for @every 1s and 30s, 15 tasks every 15s), plus a phase that
// keeps rounds off the whole seconds where cron fire times fall: on SQLite
// a round's writes would queue on the one writer just when the tasks due
// that second are being started.
func (s *Service) nextLook(spec cronspec.Spec, cursor, now time.Time) time.Time {
	n := spec.Next(cursor)
	if n.IsZero() {
		return now.Add(s.cfg.Poll)
	}
	return n.Add(-s.cfg.Lookahead / 2).Add(min(roundPhase, s.cfg.Lookahead/4))
}

// roundPhase is how far after a whole second rounds are planned.
const roundPhase = 500 * time.Millisecond

// withdraw applies a change of definition: the tasks made under the old
// one and not yet due are withdrawn (cancelled, their keys freed), and the
// cursor comes back to now so the new definition makes its own. r's progress is updated; false when the
// row changed meanwhile (the next round reads it again).
func (s *Service) withdraw(ctx context.Context, r *store.Schedule, now time.Time) bool {
	if r.MadeTopic != "" {
		lo, hi := KeyRange(r.Name)
		why := "withdrawn: schedule " + r.Name + " updated"
		if r.Paused {
			why = "withdrawn: schedule " + r.Name + " paused"
		}
		n, err := s.st.WithdrawFires(ctx, r.MadeTopic, lo, hi, now, why)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("schedule: withdrawing tasks failed", "schedule", r.Name, "err", err)
			}
			return false
		}
		if n > 0 {
			s.m.withdrawn.Add(float64(n))
			s.log.Info("schedule: tasks of the previous definition withdrawn", "schedule", r.Name, "tasks", n)
		}
	}
	to := store.ScheduleProgress{Cursor: r.Cursor, Applied: r.Version, MadeTopic: r.Task.Topic}
	if to.Cursor.After(now) {
		to.Cursor = now.Truncate(time.Microsecond)
	}
	ok, err := s.st.AdvanceSchedule(ctx, r.Name, r.Version, r.ScheduleProgress, to)
	if err != nil || !ok {
		if err != nil && ctx.Err() == nil {
			s.log.Warn("schedule: moving the cursor failed", "schedule", r.Name, "err", err)
		}
		if err == nil {
			s.lost(ctx, *r)
		}
		return false
	}
	r.ScheduleProgress = to
	return true
}

// lost handles a compare-and-set that matched nothing: the row changed
// under this node. If it is gone (deleted), the tasks this node may have
// made just now are withdrawn; otherwise the next round reads it again.
func (s *Service) lost(ctx context.Context, r store.Schedule) {
	if _, err := s.st.Schedule(ctx, r.Name); errors.Is(err, store.ErrScheduleNotFound) {
		s.withdrawAll(ctx, r, s.now())
	}
}

// lastFire returns the last fire time in (after, until], zero if none,
// without walking every fire time of a long gap: it looks back from until
// in doubling steps for a fire time, then walks forward from there.
func lastFire(spec cronspec.Spec, after, until time.Time) time.Time {
	for back := time.Second; ; back *= 2 {
		from := until.Add(-back)
		if !from.After(after) {
			from = after
		}
		if f := spec.Next(from); !f.IsZero() && !f.After(until) {
			for {
				n := spec.Next(f)
				if n.IsZero() || n.After(until) {
					return f
				}
				f = n
			}
		}
		if from.Equal(after) {
			return time.Time{}
		}
	}
}
