package sqlstore

import (
	"context"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/testdb"
)

// TestJobState runs the scan jobs' statements on every engine: flags,
// taking an item (which marks another node's running run lost), runs and
// cursors fenced by the token, listing, and deleting old runs.
func TestJobState(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := openT(t, engine, testdb.DSNs(t, engine, 1), 1, 1)
			now := time.UnixMicro(time.Now().UnixMicro())

			if err := s.RequestTrigger(ctx, "bill"); err != nil {
				t.Fatal(err)
			}
			if err := s.RequestTrigger(ctx, "bill"); err != nil {
				t.Fatal(err)
			}
			if err := s.SetPaused(ctx, "bill", true); err != nil {
				t.Fatal(err)
			}
			fl, err := s.JobFlags(ctx)
			if err != nil || fl["bill"] != (store.JobFlags{Paused: true, TriggerSeq: 2}) {
				t.Fatalf("flags %+v %v", fl, err)
			}

			// n1 takes the item and runs it; its progress is saved.
			st, err := s.TakeItem(ctx, "bill", "0.1.0", "n1", 11, now)
			if err != nil || st.RunID != "" || st.Owner != "" {
				t.Fatalf("first take: %+v %v", st, err)
			}
			r1 := &store.JobRun{ID: "r1", Job: "bill", Item: "0.1.0", Node: "n1", Trigger: "cron", FireAt: now, StartedAt: now, Status: store.RunRunning}
			if held, err := s.StartRun(ctx, r1, 11); err != nil || !held {
				t.Fatalf("start run: %v %v", held, err)
			}
			r1.Fetched, r1.Processed, r1.Cursor = 200, 200, "200"
			if held, err := s.SaveRun(ctx, r1, 11, false); err != nil || !held {
				t.Fatalf("save: %v %v", held, err)
			}
			// The same cursor again still matches (MySQL counts changed rows).
			if held, err := s.SaveRun(ctx, r1, 11, false); err != nil || !held {
				t.Fatalf("save again: %v %v", held, err)
			}

			// n1 dies; n2 takes the item: it finds the run and its cursor,
			// and n1's run is marked lost.
			later := now.Add(time.Second)
			st, err = s.TakeItem(ctx, "bill", "0.1.0", "n2", 22, later)
			if err != nil || st.RunID != "r1" || st.Cursor != "200" || st.Owner != "n1" || !st.LastFire.Equal(now) {
				t.Fatalf("take over: %+v %v", st, err)
			}
			// n1's writes are fenced off.
			if held, err := s.SaveRun(ctx, r1, 11, true); err != nil || held {
				t.Fatalf("a stale holder saved: %v %v", held, err)
			}
			if held, err := s.StartRun(ctx, &store.JobRun{ID: "rx", Job: "bill", Item: "0.1.0", Node: "n1", StartedAt: later, Status: store.RunRunning}, 11); err != nil || held {
				t.Fatalf("a stale holder started a run: %v %v", held, err)
			}
			r2 := &store.JobRun{ID: "r2", Job: "bill", Item: "0.1.0", Node: "n2", Trigger: "resume", FireAt: now, StartedAt: later, Cursor: "200", Status: store.RunRunning}
			if held, err := s.StartRun(ctx, r2, 22); err != nil || !held {
				t.Fatalf("resume: %v %v", held, err)
			}
			r2.Processed, r2.Status, r2.EndedAt, r2.Cursor = 50, store.RunDone, later.Add(time.Second), ""
			if held, err := s.SaveRun(ctx, r2, 22, true); err != nil || !held {
				t.Fatalf("finish: %v %v", held, err)
			}
			items, err := s.JobItems(ctx, "bill")
			if err != nil || len(items) != 1 || items[0].RunID != "" || items[0].Owner != "n2" {
				t.Fatalf("items %+v %v", items, err)
			}
			runs, err := s.Runs(ctx, "bill", "", 10)
			if err != nil || len(runs) != 2 || runs[0].ID != "r2" || runs[1].Status != store.RunLost || !runs[1].EndedAt.Equal(later) ||
				runs[1].Processed != 200 || runs[0].Trigger != "resume" {
				t.Fatalf("runs %+v %v", runs, err)
			}
			if runs, err := s.Runs(ctx, "bill", "9.9.9", 10); err != nil || len(runs) != 0 {
				t.Fatalf("runs of another item: %+v %v", runs, err)
			}

			// Retention: runs that ended before the cutoff go.
			n, err := s.DeleteRuns(ctx, later.Add(500*time.Millisecond))
			if err != nil || n != 1 {
				t.Fatalf("delete runs: %d %v", n, err)
			}
			if runs, _ := s.Runs(ctx, "bill", "", 10); len(runs) != 1 || runs[0].ID != "r2" {
				t.Fatalf("after delete: %+v", runs)
			}
		})
	}
}
