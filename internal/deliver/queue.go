package deliver

import (
	"math/bits"

	"github.com/ontimehq/ontime/internal/task"
)

// queue is a lane's queue: one fifo per priority, taken by task.Rank. A
// task is queued when it is due, so everything here is ready; what orders
// it is the rank (its due time less priority × task.DefaultPriorityStep),
// which is the due time itself when every task is of priority 0: the
// common lane holds one level and costs what one fifo did. Each level is
// in the order its tasks were released, which is their due order, so the
// lowest rank of a level is its head, and choosing the next job compares
// at most MaxPriority+1 heads.
type queue struct {
	levels [task.MaxPriority + 1]fifo
	mask   uint16 // levels that hold jobs
	n      int    // jobs queued
}

func level(p int) int { return min(max(p, 0), task.MaxPriority) }

// push queues chunk, kept whole when all its jobs are of one priority.
func (q *queue) push(chunk []job) {
	if len(chunk) == 0 {
		return
	}
	p := level(chunk[0].d.Priority)
	uniform := true
	for i := 1; i < len(chunk); i++ {
		if level(chunk[i].d.Priority) != p {
			uniform = false
			break
		}
	}
	if uniform {
		q.pushLevel(p, chunk)
		return
	}
	var parts [task.MaxPriority + 1][]job
	for _, j := range chunk {
		pl := level(j.d.Priority)
		parts[pl] = append(parts[pl], j)
	}
	for pl, part := range parts {
		q.pushLevel(pl, part)
	}
}

func (q *queue) pushLevel(p int, chunk []job) {
	if len(chunk) == 0 {
		return
	}
	q.levels[p].push(chunk)
	q.mask |= 1 << p
	q.n += len(chunk)
}

// next is the level whose head goes first: the lowest rank; of equal
// ranks, the earlier due time (the lower level). The queue is not empty.
func (q *queue) next() int {
	if q.mask&(q.mask-1) == 0 {
		return bits.TrailingZeros16(q.mask)
	}
	best := -1
	var bestRank int64
	for m := q.mask; m != 0; m &= m - 1 {
		p := bits.TrailingZeros16(m)
		h := &q.levels[p].chunks[0][0]
		r := h.d.DueAt.UnixMicro() - int64(p)*task.DefaultPriorityStep.Microseconds()
		if best < 0 || r < bestRank {
			best, bestRank = p, r
		}
	}
	return best
}

// pop removes the next job; the queue must not be empty.
func (q *queue) pop() job {
	p := q.next()
	j := q.levels[p].pop()
	if q.levels[p].n == 0 {
		q.mask &^= 1 << p
	}
	q.n--
	return j
}

// take removes up to n jobs in order.
func (q *queue) take(n int) []job {
	if q.mask != 0 && q.mask&(q.mask-1) == 0 {
		p := bits.TrailingZeros16(q.mask)
		out := q.levels[p].take(n)
		if q.levels[p].n == 0 {
			q.mask = 0
		}
		q.n -= len(out)
		return out
	}
	out := make([]job, 0, min(n, q.n))
	for len(out) < n && q.n > 0 {
		out = append(out, q.pop())
	}
	return out
}
