package sqlstore

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
	"github.com/ontimehq/ontime/internal/testdb"
)

// The counts the writes maintain (schema 20) follow inserts with and
// without keys (PostgreSQL's COPY), status changes and deletes; a drift
// shows in CountsDrift, and RecountTopics repairs it; a database migrated
// from 19 with rows in it starts from their count. The contract tests
// check the counts after every other write (contract_test.go).
func TestMaintainedCounts(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := openT(t, engine, testdb.DSNs(t, engine, 2), 2, 2)
			check := func(when string) {
				t.Helper()
				drift, err := CountsDrift(ctx, s)
				if err != nil {
					t.Fatalf("%s: %v", when, err)
				}
				if drift != "" {
					t.Fatalf("%s: %s", when, drift)
				}
			}
			due := time.Now().Add(-time.Minute)
			var keyless, keyed []store.NewTask
			for i := range 300 {
				keyless = append(keyless, newTask(t, "", due, 2))
				keyed = append(keyed, newTask(t, "k"+strconv.Itoa(i), due, 2))
			}
			for i := range keyless {
				keyless[i].Topic = fmt.Sprintf("c.%d", i%3)
			}
			if _, err := s.Insert(ctx, keyless); err != nil { // COPY on PostgreSQL
				t.Fatal(err)
			}
			check("after a keyless batch")
			if _, err := s.Insert(ctx, keyed); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Insert(ctx, keyed[:10]); err != nil { // duplicates: nothing inserted
				t.Fatal(err)
			}
			check("after a keyed batch")
			if _, err := s.Cancel(ctx, keyed[0].ID); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Purge(ctx, keyed[0].ID); err != nil {
				t.Fatal(err)
			}
			check("after cancel and purge")
			// Bulk operations: cancel one topic, delete another's tasks.
			for i, op := range []*store.Operation{
				{ID: "op-cancel", Action: store.OpCancel, Filter: store.OpFilter{Topic: "c.0"}, CreatedAt: time.Now()},
				{ID: "op-delete", Action: store.OpDelete, Filter: store.OpFilter{Topic: "c.1"}, CreatedAt: time.Now()},
			} {
				if err := s.CreateOperation(ctx, op); err != nil {
					t.Fatal(err)
				}
				dbs, tables := s.OperationTables()
				for db := range dbs {
					for tb := range tables {
						for {
							pg, err := s.OperationPage(ctx, op, db, tb, 40, time.Now())
							if err != nil {
								t.Fatal(err)
							}
							if pg.Done {
								break
							}
						}
					}
				}
				check(fmt.Sprintf("after bulk operation %d", i))
			}

			stats, err := s.TopicStats(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]int64{"c.2": 100, "t": 299}
			if stats[0].Topic != "c.0" || stats[0].Counts[task.StatusCancelled] != 100 || len(stats[0].Counts) != 1 {
				t.Fatalf("c.0 after the bulk cancel: %+v", stats[0])
			}
			for _, ts := range stats[1:] {
				if ts.Counts[task.StatusPending] != want[ts.Topic] || ts.OldestDueAt.IsZero() {
					t.Fatalf("%s: %v pending, oldest due %v; want %d and a due time", ts.Topic, ts.Counts, ts.OldestDueAt, want[ts.Topic])
				}
			}
			if len(stats) != len(want)+1 {
				t.Fatalf("%d topics, want %d: %+v", len(stats), len(want), stats)
			}
			if !s.maintainsCounts() {
				return
			}

			// A drift shows, and the repair mends it.
			if _, err := s.FoldCounts(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := s.w[1].ExecContext(ctx, `INSERT INTO ontime_counts (topic, status, n) VALUES ('c.bogus', 0, 5)`); err != nil {
				t.Fatal(err)
			}
			if drift, err := CountsDrift(ctx, s); err != nil || drift == "" {
				t.Fatalf("a drift of 5 not seen: %q %v", drift, err)
			}
			if err := s.RecountTopics(ctx); err != nil {
				t.Fatal(err)
			}
			check("after the recount")
			if _, err := s.FoldCounts(ctx); err != nil {
				t.Fatal(err)
			}
			check("after a fold")

			// Back to 19 with the rows in place: step 20 counts them.
			migrateFrom(t, s, 19, `DELETE FROM ontime_counts`)
			check("after migrating from 19")
		})
	}
}
