package sqlstore

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
	"github.com/ontimehq/ontime/internal/testdb"
)

// TestConsoleQueriesMatchModel: the console's lists (List by topic, status
// and due range, paged) and the Coming up histogram (DueHistogram) answer
// exactly what a model of the rows says, on every engine, whatever plan
// each filter takes (the dead rows by topic through schema 21's partial
// index, due ranges through the scan index).
func TestConsoleQueriesMatchModel(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			const segs = 2
			s := openT(t, engine, testdb.DSNs(t, engine, 2), 3, segs)
			now := time.Now().Truncate(time.Second)
			type row struct {
				id, topic string
				status    task.Status
				due       time.Time
			}
			var model []row
			var batch []store.NewTask
			byStatus := map[task.Status][]any{}
			// Enough rows that a wide due range holds more than
			// dueRangeCap entries in a table (SQLite then walks the primary
			// key) and a narrow one fewer (it reads the scan index).
			const rows = 36000
			for i := range rows {
				due := now.Add(time.Duration((i*7919)%36000) * time.Second)
				nt := newTask(t, "", due, segs)
				if i%3 == 0 {
					nt = newTask(t, fmt.Sprintf("k%d", i), due, segs)
				}
				nt.Topic = fmt.Sprintf("m.%d", i%4)
				st := []task.Status{task.StatusPending, task.StatusPending, task.StatusDone, task.StatusDead, task.StatusCancelled, task.StatusRunning, task.StatusDead}[i%7]
				batch = append(batch, nt)
				model = append(model, row{nt.ID, nt.Topic, st, due})
				if st != task.StatusPending {
					byStatus[st] = append(byStatus[st], nt.ID)
				}
			}
			for len(batch) > 0 {
				n := min(len(batch), 2000)
				if _, err := s.Insert(ctx, batch[:n]); err != nil {
					t.Fatal(err)
				}
				batch = batch[n:]
			}
			for st, ids := range byStatus {
				for db := range s.w {
					for _, tn := range s.names {
						for rest := ids; len(rest) > 0; {
							chunk := rest[:min(len(rest), 1000)]
							rest = rest[len(chunk):]
							q := s.d.rebind(`UPDATE ` + tn + ` SET status = ? WHERE id IN (` + placeholders(len(chunk)) + `)`)
							if _, err := s.w[db].ExecContext(ctx, q, append([]any{int(st)}, chunk...)...); err != nil {
								t.Fatal(err)
							}
						}
					}
				}
			}
			slices.SortFunc(model, func(a, b row) int { return compareStr(a.id, b.id) })

			pending, dead, done := task.StatusPending, task.StatusDead, task.StatusDone
			for _, topic := range []string{"", "m.1"} {
				for _, status := range []*task.Status{nil, &pending, &dead, &done} {
					// Ranges of 3 minutes (narrow), 3 hours, from 3 hours on,
					// up to 4 hours (wide).
					for _, rg := range [][2]time.Duration{{}, {2 * time.Hour, 2*time.Hour + 3*time.Minute}, {2 * time.Hour, 5 * time.Hour}, {3 * time.Hour, 0}, {0, 4 * time.Hour}} {
						f := store.ListFilter{Topic: topic, Status: status, Limit: 40}
						if rg[0] != 0 {
							f.DueAfter = now.Add(rg[0])
						}
						if rg[1] != 0 {
							f.DueBefore = now.Add(rg[1])
						}
						var want []string
						for _, r := range model {
							if (topic == "" || r.topic == topic) && (status == nil || r.status == *status) &&
								(f.DueAfter.IsZero() || !r.due.Before(f.DueAfter)) && (f.DueBefore.IsZero() || r.due.Before(f.DueBefore)) {
								want = append(want, r.id)
							}
						}
						// The first pages, then pages from the middle.
						for _, start := range []int{0, len(want) / 2} {
							f.After = ""
							if start > 0 {
								f.After = want[start-1]
							}
							var got []string
							for range 4 {
								pg, err := s.List(ctx, f)
								if err != nil {
									t.Fatal(err)
								}
								for _, tk := range pg {
									got = append(got, tk.ID)
								}
								if len(pg) < f.Limit {
									break
								}
								f.After = pg[len(pg)-1].ID
							}
							w := want[start:min(len(want), start+4*f.Limit)]
							if !slices.Equal(got, w) {
								t.Errorf("topic %q status %v range %v from %d: %d tasks, want %d\n got %v\nwant %v", topic, status, rg, start, len(got), len(w), got, w)
							}
						}
					}
				}
			}

			// The histogram: pending tasks per topic and 30-minute bucket
			// over the next 6 hours.
			step, n := 30*time.Minute, 12
			from := now.Add(time.Minute)
			want := map[string][]int64{}
			for _, r := range model {
				if r.status != task.StatusPending || r.due.Before(from) || !r.due.Before(from.Add(step*time.Duration(n))) {
					continue
				}
				if want[r.topic] == nil {
					want[r.topic] = make([]int64, n)
				}
				want[r.topic][r.due.Sub(from)/step]++
			}
			got, err := s.DueHistogram(ctx, from, step, n)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("histogram: %d topics, want %d: %v", len(got), len(want), got)
			}
			for _, dc := range got {
				if !slices.Equal(dc.Counts, want[dc.Topic]) {
					t.Errorf("histogram of %s: %v, want %v", dc.Topic, dc.Counts, want[dc.Topic])
				}
			}
		})
	}
}

func compareStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
