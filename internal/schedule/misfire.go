package schedule

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

// Missed is a task Screen keeps from delivery: its fire time was missed
// and its schedule's misfire policy passes it over. Reason is meant as its
// last error (it ends cancelled).
type Missed struct {
	Task   *task.Task
	Reason string
}

// Screen judges the started tasks tasks just before their delivery and
// returns those to deliver and those the misfire policy passes over (to be
// ended cancelled with their reason, not delivered).
//
// A task made ahead for a fire time misses it when it starts MisfireAfter
// late or more (as the owner counts a fire time missed): every node was down after it was made, or delivery
// was that far behind. It is judged here, at its first start, because this
// is the one place every such task passes through, on whichever node
// delivers it, whatever the owner of its schedule is doing: a node
// restarted after a downtime starts the overdue tasks as soon as it scans,
// and the owner may not have looked at the schedule yet (or be another
// node not up yet). The judgement needs no coordination — it depends on
// the fire time, the clock and the schedule's definition only:
//
//   - skip: the task is not delivered;
//   - fire_once: it is delivered only when it is the last missed fire time
//     (the schedule's next fire time after it is not older than the
//     threshold); the earlier ones are not. A run of missed fire times is
//     thus delivered once, whether its last one was made ahead (delivered
//     here) or never made (the owner makes it, due now, when it finds the
//     cursor more than the threshold behind: every task made ahead is
//     then older than that one, so passed over here).
//
// At the edge — a task judged the last missed while the owner, itself
// behind, has yet to find the following fire times missed — a run can be
// delivered twice; never more.
//
// Judged: a task at its first start (attempt 1), due at the fire time its
// key names (Key), of a schedule that exists and makes tasks of its topic.
// A task retried, rescheduled or made by the misfire policy (due when
// made) is not, nor a trigger (TriggerKey) or a task without such a key.
// When the schedule cannot be read the task is delivered: late rather than
// lost.
func (s *Service) Screen(ctx context.Context, tasks []*task.Task) (deliver []*task.Task, missed []Missed) {
	now := s.now()
	limit := now.Add(-s.cfg.MisfireAfter)
	stale := false
	for _, t := range tasks {
		if !t.DueAt.After(limit) && t.Attempts == 1 {
			stale = true
			break
		}
	}
	if !stale { // the common case: nothing that late
		return tasks, nil
	}
	defs := map[string]*store.Schedule{} // read once per call; nil: none (or unreadable)
	deliver = tasks[:0:0]
	for _, t := range tasks {
		reason := ""
		if !t.DueAt.After(limit) && t.Attempts == 1 {
			reason = s.judge(ctx, t, now, limit, defs)
		}
		if reason == "" {
			deliver = append(deliver, t)
			continue
		}
		missed = append(missed, Missed{Task: t, Reason: reason})
	}
	return deliver, missed
}

// judgeReadTimeout bounds the read of a schedule by Screen.
const judgeReadTimeout = 5 * time.Second

// judge returns why t, started more than the threshold late, is not
// delivered; "" to deliver it.
func (s *Service) judge(ctx context.Context, t *task.Task, now, limit time.Time, defs map[string]*store.Schedule) string {
	name, at, ok := ParseKey(t.Key)
	if !ok || !at.Equal(t.DueAt) {
		return ""
	}
	r, seen := defs[name]
	if !seen {
		// Bounded: delivery of the batch waits for it.
		rctx, cancel := context.WithTimeout(ctx, judgeReadTimeout)
		got, err := s.st.Schedule(rctx, name)
		cancel()
		switch {
		case err == nil:
			r = &got
		case !errors.Is(err, store.ErrScheduleNotFound):
			s.log.Warn("schedule: reading a schedule to judge a late task failed; delivered", "schedule", name, "key", t.Key, "err", err)
		}
		defs[name] = r
	}
	if r == nil || (t.Topic != r.Task.Topic && t.Topic != r.MadeTopic) {
		return ""
	}
	late := now.Sub(at).Truncate(time.Millisecond)
	switch r.Misfire {
	case store.MisfireSkip:
		s.m.firesMissed.WithLabelValues(string(r.Misfire)).Inc()
		return fmt.Sprintf("missed: fire time %s started %s late, beyond the misfire threshold %s (misfire skip)",
			at.UTC().Format(time.RFC3339Nano), late, s.cfg.MisfireAfter)
	case store.MisfireFireOnce:
		spec, err := s.spec(*r)
		if err != nil {
			return ""
		}
		if next := spec.Next(at); !next.IsZero() && !next.After(limit) {
			s.m.firesMissed.WithLabelValues(string(r.Misfire)).Inc()
			return fmt.Sprintf("missed: fire time %s started %s late, beyond the misfire threshold %s; the later fire time %s, missed too, stands for it (misfire fire_once)",
				at.UTC().Format(time.RFC3339Nano), late, s.cfg.MisfireAfter, next.UTC().Format(time.RFC3339Nano))
		}
		s.log.Info("schedule: a missed fire time delivered once for the fire times missed before it (misfire fire_once)",
			"schedule", name, "key", t.Key, "late", late)
	}
	return ""
}
