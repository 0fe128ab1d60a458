package task

import "time"

// MaxPriority is the highest priority a task may have; 0 is the lowest and
// the default.
const MaxPriority = 9

// DefaultPriorityStep is how much earlier each level of priority makes a
// ready task count (delivery.priority_step): a task of priority p is
// ordered as if it were due p × step earlier, among tasks already due.
const DefaultPriorityStep = time.Minute

// Rank is the moment that orders a task among those ready at once (in a
// backlog: behind a slow destination, after an outage, a pause, an open
// breaker): its due time, less priority × step. The lower goes first.
//
// Rank orders only what is due already, so a priority never makes a task
// early, and among tasks not yet due the due time alone rules. It is also
// the starvation bound: a task can be overtaken only by a task of higher
// priority due less than (the difference of priorities) × step after it,
// never by one due later, whatever the backlog; with the default step a
// priority-0 task waits at most for the priority-9 tasks due within nine
// minutes after it. Strict priority (asynq's strict mode) starves; weighted
// queues (asynq's default) bound only a share of throughput and lose the
// due order within a level; this keeps both.
func Rank(due time.Time, priority int, step time.Duration) time.Time {
	if priority <= 0 || step <= 0 {
		return due
	}
	return due.Add(-time.Duration(priority) * step)
}
