package sqlstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/testdb"
)

// The due counters (schema 25) follow inserts, claims, moves across hours
// and topics' deletes, and the hourly histogram read from them equals the
// one counted from the rows, over a day and a week; the counters of past
// hours that reached 0 are dropped; a database migrated from 24 with rows
// in it starts from their count; MariaDB counts from the rows. The
// contract tests compare the counters with the rows after every other
// write (CountsDrift).
func TestDueCounts(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := openT(t, engine, testdb.DSNs(t, engine, 2), 2, 2)
			check := func(when string) {
				t.Helper()
				if drift, err := CountsDrift(ctx, s); err != nil || drift != "" {
					t.Fatalf("%s: %q %v", when, drift, err)
				}
				for _, rg := range []struct {
					step time.Duration
					n    int
				}{{time.Hour, 25}, {4 * time.Hour, 43}} {
					from := time.Now().Add(-2 * time.Hour).Truncate(rg.step)
					got, err := s.DueHistogram(ctx, from, rg.step, rg.n)
					if err != nil {
						t.Fatal(err)
					}
					want := map[string][]int64{}
					for db := range s.r {
						if err := s.dueLive(ctx, db, micros(from), rg.step.Microseconds(), rg.n, want); err != nil {
							t.Fatal(err)
						}
					}
					if len(got) != len(want) {
						t.Fatalf("%s, step %s: %d topics, counted %d: %v", when, rg.step, len(got), len(want), got)
					}
					for _, dc := range got {
						if !slices.Equal(dc.Counts, want[dc.Topic]) {
							t.Fatalf("%s, step %s, topic %s: %v, counted %v", when, rg.step, dc.Topic, dc.Counts, want[dc.Topic])
						}
					}
				}
			}
			// 120 tasks over 3 topics and 40 hours, from an hour ago;
			// keyed and keyless (COPY on PostgreSQL). The k-th hour's
			// tasks are k hours and k seconds after base (and a
			// millisecond apart): a topic's tasks are more than an hour
			// apart, so no two share an hour's counter whatever the
			// clock says (the fold below counts on it).
			base := time.Now().Add(-time.Hour)
			var tasks []store.NewTask
			for i := range 120 {
				key := ""
				if i%2 == 0 {
					key = fmt.Sprintf("k%d", i)
				}
				k := time.Duration(i % 40)
				nt := newTask(t, key, base.Add(k*time.Hour+k*time.Second+time.Duration(i/40)*time.Millisecond), 2)
				nt.Topic = fmt.Sprintf("d.%d", i%3)
				tasks = append(tasks, nt)
			}
			if _, err := s.Insert(ctx, tasks[:60]); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Insert(ctx, tasks[60:]); err != nil {
				t.Fatal(err)
			}
			check("after the inserts")

			// Claims take the overdue ones out of pending.
			now := time.Now()
			var claimed []store.Ref
			for db := range s.r {
				for tb := range s.names {
					for seg := range 2 {
						refs, err := s.Claim(ctx, store.Item{DB: db, Table: tb, Segment: seg}, now, now, store.Lease{Owner: "o", Until: now.Add(time.Minute), Token: 1}, 100)
						if err != nil {
							t.Fatal(err)
						}
						claimed = append(claimed, refs...)
					}
				}
			}
			check("after claims")

			// A pending task moved a day later, another cancelled, a
			// third purged.
			later := tasks[7].DueAt.Add(24 * time.Hour)
			if _, err := s.Update(ctx, tasks[7].ID, store.Patch{DueAt: &later}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Cancel(ctx, tasks[8].ID); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Cancel(ctx, tasks[9].ID); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Purge(ctx, tasks[9].ID); err != nil {
				t.Fatal(err)
			}
			check("after a move, a cancel and a purge")
			if !s.maintainsCounts() {
				return
			}

			// Spent counters of past hours go at the next fold; those of
			// hours to come stay until theirs has passed.
			if _, err := s.FoldCounts(ctx); err != nil {
				t.Fatal(err)
			}
			var zero int
			for db := range s.w {
				var past, z int
				if err := s.w[db].QueryRowContext(ctx, s.d.rebind(`SELECT
					COALESCE(SUM(CASE WHEN hour < ? AND n = 0 THEN 1 ELSE 0 END), 0), COALESCE(SUM(CASE WHEN n = 0 THEN 1 ELSE 0 END), 0) FROM ontime_due_counts`),
					micros(time.Now())/dueHour).Scan(&past, &z); err != nil {
					t.Fatal(err)
				}
				if past != 0 {
					t.Fatalf("database %d: %d spent counters of past hours kept after a fold", db, past)
				}
				zero += z
			}
			// Each (hour, topic) holds one task: tasks[7]'s first hour and
			// tasks[8]'s and [9]'s emptied, hours to come; and the hour of
			// each claimed task that is not past yet (the claims ran late
			// in the hour base+1h began in, or took a while).
			want := 3
			for _, r := range claimed {
				if micros(r.DueAt)/dueHour >= micros(time.Now())/dueHour {
					want++
				}
			}
			if zero != want {
				t.Fatalf("%d spent counters of hours to come kept, want %d (%d tasks claimed)", zero, want, len(claimed))
			}
			check("after a fold")

			// Back to 24 with the rows in place: step 25 counts them.
			migrateFrom(t, s, 24, `DROP TABLE ontime_due_counts`)
			check("after migrating from 24")
			more := newTask(t, "", time.Now().Add(3*time.Hour), 2)
			more.Topic = "d.new"
			if _, err := s.Insert(ctx, []store.NewTask{more}); err != nil {
				t.Fatal(err)
			}
			check("after an insert into the migrated store")
		})
	}
}

// migrateFrom takes every database of s back to schema version v after
// running reset there (what undoes step v+1), migrates it, and runs step
// v+1 once more, which must change nothing.
func migrateFrom(t *testing.T, s *Store, v int, reset string) {
	t.Helper()
	ctx := context.Background()
	for db := range s.w {
		for _, q := range []string{reset, `UPDATE ontime_meta SET v = '` + strconv.Itoa(v) + `' WHERE k = 'schema_version'`} {
			if _, err := s.w[db].ExecContext(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.migrate(ctx, s.w[db]); err != nil {
			t.Fatal(err)
		}
		stepAgain(t, s, db, v+1)
	}
}
