package hottest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/hot"
	"github.com/ontimehq/ontime/internal/task"
)

// RunPriority checks the order of a backlog (more due than a Pop takes):
// the lowest task.Rank first, and the due order where ranks say so. The
// tier must keep one slot per topic (a tier with slots orders each slot).
func RunPriority(t *testing.T, newTier func(t *testing.T) hot.Tier) {
	ctx := context.Background()
	tr := newTier(t)
	now := time.Now().Truncate(time.Microsecond)
	var entries []hot.Entry
	// Three waves of a backlog: priority 0 due 5 s ago, priority 9 due
	// now (ranks 9 minutes earlier: they overtake), priority 3 due 5 min
	// ago (rank 8 min ago: between), and priority 0 due 10 min ago (the
	// bound: a priority-9 task due more than 9 min later does not pass it).
	add := func(prefix string, n, prio int, due time.Time) {
		for i := range n {
			entries = append(entries, hot.Entry{ID: fmt.Sprintf("%s%02d", prefix, i), Topic: "prio", DueAt: due, Token: 1, Priority: prio})
		}
	}
	add("a", 20, 0, now.Add(-5*time.Second))
	add("b", 20, 9, now)
	add("c", 20, 3, now.Add(-5*time.Minute))
	add("d", 5, 0, now.Add(-10*time.Minute))
	if err := tr.Add(ctx, entries...); err != nil {
		t.Fatal(err)
	}
	rank := func(e hot.Entry) int64 {
		return task.Rank(e.DueAt, e.Priority, task.DefaultPriorityStep).UnixMicro()
	}
	var order []hot.Entry
	for len(order) < len(entries) {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		got, err := tr.Pop(c, 7, 0)
		cancel()
		if err != nil {
			t.Fatalf("pop after %d: %v", len(order), err)
		}
		// Within one Pop a tier may order by due time; across Pops,
		// ranks must not go down.
		slices.SortStableFunc(got, func(a, b hot.Entry) int { return cmp.Compare(rank(a), rank(b)) })
		order = append(order, got...)
		if err := tr.Ack(ctx, got...); err != nil {
			t.Fatal(err)
		}
	}
	for i := 7; i < len(order); i++ {
		batchStart := i - i%7
		for j := 0; j < batchStart; j++ {
			if rank(order[j]) > rank(order[i]) {
				t.Fatalf("entry %s (priority %d, due %s) popped after %s (priority %d, due %s), of a higher rank",
					order[i].ID, order[i].Priority, order[i].DueAt, order[j].ID, order[j].Priority, order[j].DueAt)
			}
		}
	}
	want := []byte("dbca") // by rank: d (−10m), b (−9m), c (−8m), a (−5s)
	seen := []byte{}
	for _, e := range order {
		if len(seen) == 0 || seen[len(seen)-1] != e.ID[0] {
			seen = append(seen, e.ID[0])
		}
	}
	if string(seen) != string(want) {
		t.Errorf("waves popped in order %q, want %q", seen, want)
	}
	for _, e := range order {
		if e.ID[0] == 'b' && e.Priority != 9 {
			t.Errorf("entry %s lost its priority: %d", e.ID, e.Priority)
		}
	}
}
