package sqlstore

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
	"github.com/ontimehq/ontime/internal/testdb"
)

// keyPlansWithoutStatistics: in a new table of one topic, never analyzed,
// the queries by key (the keyed insert's hold check, the read of a
// batch's existing keys) take a key index, not the topic index.
func keyPlansWithoutStatistics(t *testing.T, tasks []store.NewTask) {
	ctx := context.Background()
	s := openT(t, "postgres", testdb.DSNs(t, "postgres", 1), 1, 4)
	tn, db := s.names[0], s.w[0]
	var keyed []store.NewTask
	for _, nt := range tasks {
		if nt.Key != "" {
			nt.Topic = "t"
			keyed = append(keyed, nt)
		}
	}
	if _, err := s.Insert(ctx, keyed[1000:]); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMicro()
	idx := make([]int, 1000)
	var keys []string
	for i := range idx {
		idx[i] = i
		keys = append(keys, keyed[i].Key)
	}
	hold := []any{now, int64(math.MaxInt64)}
	hold = append(hold, arrayColumns(idx, keyed, make([]store.Inserted, len(keyed)), now)...)
	hold = append(hold, make([]bool, len(idx)))
	for name, q := range map[string]struct {
		q    string
		args []any
	}{
		"keyed insert":  {keyedInsertQuery([]string{tn}), hold},
		"existing keys": {s.d.rebind(s.keyRowsQuery(tn, 1000)), s.keyRowsArgs("t", keys)},
	} {
		plan := explain(t, "postgres", db, q.q, q.args)
		if fullScan("postgres", plan) || strings.Contains(plan, tn+"_topic ") {
			t.Errorf("%s, no statistics: the plan does not seek keys:\n%s", name, plan)
		}
		t.Logf("%s, no statistics:\n%s", name, plan)
	}
}

// TestTopicListsUseTopicIndex: with rows in 200 topics, most of them done,
// a topic's lists (any status, one status, a due range, both) read the
// topic index (schema 24) on SQLite and PostgreSQL, never the whole
// table; List answers them right. And on PostgreSQL, before any statistics
// exist (a new table, autovacuum off), the queries by key read a key
// index, not the topic index (with a plain (topic, id) index keyed batches
// ran 30 times slower in BenchmarkInsertBatch/postgres/plan).
func TestTopicListsUseTopicIndex(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := openT(t, engine, testdb.DSNs(t, engine, 1), 1, 4)
			tn, db := s.names[0], s.w[0]
			now := time.Now()
			var tasks []store.NewTask
			for i := range 20000 {
				key := ""
				if i%2 == 0 {
					key = fmt.Sprintf("key-%d", i)
				}
				nt := newTask(t, key, now.Add(time.Duration(i)*time.Second), 4)
				nt.Topic = fmt.Sprintf("t%03d", i%200)
				tasks = append(tasks, nt)
			}
			if engine == "postgres" {
				keyPlansWithoutStatistics(t, tasks)
			}
			rest := tasks
			if _, err := s.Insert(ctx, rest); err != nil {
				t.Fatal(err)
			}
			if _, err := db.ExecContext(ctx, s.d.rebind(`UPDATE `+tn+` SET status = ? WHERE due_at < ?`), int(task.StatusDone), now.Add(15000*time.Second).UnixMicro()); err != nil {
				t.Fatal(err)
			}
			analyze := map[string]string{"sqlite": "ANALYZE", "postgres": "ANALYZE " + tn}[engine]
			if _, err := db.ExecContext(ctx, analyze); err != nil {
				t.Fatal(err)
			}
			pending, done := task.StatusPending, task.StatusDone
			hour := now.Add(16000 * time.Second)
			for name, f := range map[string]store.ListFilter{
				"topic":                     {Topic: "t007"},
				"topic, pending":            {Topic: "t007", Status: &pending},
				"topic, done":               {Topic: "t007", Status: &done},
				"topic, due range":          {Topic: "t007", DueAfter: hour, DueBefore: hour.Add(time.Hour)},
				"topic, pending, due after": {Topic: "t007", Status: &pending, DueAfter: hour},
			} {
				q, args := s.listQuery(f)
				q = fmt.Sprintf(q, tn) + ` ORDER BY id LIMIT ?`
				plan := explain(t, engine, db, s.d.rebind(q), append(args, 50))
				if fullScan(engine, plan) || !strings.Contains(plan, tn+"_topic ") {
					t.Errorf("%s: plan does not read %s_topic:\n%s", name, tn, plan)
				}
				t.Logf("%s plan:\n%s", name, plan)

				f.Limit = 50
				got, err := s.List(ctx, f)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				var want []string
				for _, nt := range tasks {
					st, due := task.StatusPending, nt.DueAt
					if due.Before(now.Add(15000 * time.Second)) {
						st = task.StatusDone
					}
					if nt.Topic != f.Topic || (f.Status != nil && st != *f.Status) ||
						(!f.DueAfter.IsZero() && due.Before(f.DueAfter)) || (!f.DueBefore.IsZero() && !due.Before(f.DueBefore)) {
						continue
					}
					want = append(want, nt.ID)
				}
				slices.Sort(want)
				want = want[:min(len(want), 50)]
				if len(want) == 0 {
					t.Fatalf("%s: the test's filter matches nothing", name)
				}
				if len(got) != len(want) {
					t.Fatalf("%s: %d tasks, want %d", name, len(got), len(want))
				}
				for i := range got {
					if got[i].ID != want[i] {
						t.Fatalf("%s: task %d is %s, want %s", name, i, got[i].ID, want[i])
					}
				}
			}
		})
	}
}

// A database of schema version 23 that holds rows gets the topic index on
// every task table (MariaDB: none); the step run again changes nothing,
// and the rows are listed by topic through it.
func TestSchema24AddsTheTopicIndex(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := openT(t, engine, testdb.DSNs(t, engine, 1), 3, 2)
			db := s.w[0]
			var tasks []store.NewTask
			for i := range 30 {
				nt := newTask(t, "", time.Now().Add(time.Hour), 2)
				nt.Topic = fmt.Sprintf("t%d", i%3)
				tasks = append(tasks, nt)
			}
			if _, err := s.Insert(ctx, tasks); err != nil {
				t.Fatal(err)
			}
			has := func(name string) bool {
				t.Helper()
				q := map[string]string{
					"sqlite":   `SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name = ?`,
					"postgres": `SELECT COUNT(*) FROM pg_indexes WHERE indexname = $1`,
					"mysql":    `SELECT COUNT(*) FROM information_schema.statistics WHERE table_schema = DATABASE() AND index_name = ?`,
				}[engine]
				var n int
				if err := db.QueryRowContext(ctx, q, name).Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n > 0
			}
			for _, tn := range s.names {
				if has(tn+"_topic") != (engine != "mysql") {
					t.Fatalf("%s: topic index present = %v in a new %s database", tn, has(tn+"_topic"), engine)
				}
				if engine != "mysql" {
					if _, err := db.ExecContext(ctx, `DROP INDEX `+tn+`_topic`); err != nil {
						t.Fatal(err)
					}
				}
			}
			if _, err := db.ExecContext(ctx, `UPDATE ontime_meta SET v = '23' WHERE k = 'schema_version'`); err != nil {
				t.Fatal(err)
			}
			if err := s.migrate(ctx, db); err != nil {
				t.Fatal(err)
			}
			stepAgain(t, s, 0, 24)
			for _, tn := range s.names {
				if has(tn+"_topic") != (engine != "mysql") {
					t.Fatalf("%s: topic index present = %v after step 24 on %s", tn, has(tn+"_topic"), engine)
				}
			}
			got, err := s.List(ctx, store.ListFilter{Topic: "t1", Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 10 {
				t.Fatalf("topic t1: %d tasks listed, want 10", len(got))
			}
		})
	}
}
