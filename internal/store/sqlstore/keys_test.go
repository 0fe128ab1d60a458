package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
	"github.com/ontimehq/ontime/internal/testdb"
)

// TestKeyQueriesUseIndexes: the by-key read and the retention delete go
// through their indexes on every engine, with most rows final.
func TestKeyQueriesUseIndexes(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := openT(t, engine, testdb.DSNs(t, engine, 1), 1, 4)
			var tasks []store.NewTask
			now := time.Now()
			for i := range 20000 {
				tasks = append(tasks, newTask(t, fmt.Sprintf("key-%d", i), now.Add(time.Duration(i)*time.Second), 4))
			}
			if _, err := s.Insert(ctx, tasks); err != nil {
				t.Fatal(err)
			}
			tn, db := s.names[0], s.w[0]
			if _, err := db.ExecContext(ctx, s.d.rebind(`UPDATE `+tn+` SET status = ? WHERE due_at < ?`), int(task.StatusDone), now.Add(19000*time.Second).UnixMicro()); err != nil {
				t.Fatal(err)
			}
			analyze := map[string]string{"sqlite": "ANALYZE", "mysql": "ANALYZE TABLE " + tn, "postgres": "ANALYZE " + tn}[engine]
			if _, err := db.ExecContext(ctx, analyze); err != nil {
				t.Fatal(err)
			}
			// EXPLAIN of a DELETE or an UPDATE is its plan; nothing is written.
			del := s.deleteExpiredQuery(tn, "")
			holdArgs := []any{"new-id", "t", "key-7", 1, 0, now.UnixMicro(), []byte("{}"), "https://x.example/h", 1, 0, 0, now.UnixMicro(), now.UnixMicro(),
				nil, 0, 0, now.UnixMicro(), "", "", 0, now.Add(-time.Hour).UnixMicro()}
			// A key's rows: on SQLite and PostgreSQL through both partial
			// indexes (live and final keyed rows, endedkeys.go), each
			// named in the plan.
			keyIndexes, every := []string{tn + "_live_keyed ", tn + "_ended_keyed "}, true
			if engine == "mysql" {
				keyIndexes, every = []string{"key=task_key "}, false
			}
			for name, q := range map[string]struct {
				q     string
				args  []any
				index []string // any of these names in the plan
				every bool     // every one of them
			}{
				"by key":  {s.keyRowsQuery(tn, 1), s.keyRowsArgs("t", []string{"key-7"}), keyIndexes, every},
				"by keys": {s.keyRowsQuery(tn, 3), s.keyRowsArgs("t", []string{"key-7", "key-8", "key-9"}), keyIndexes, every},
				// A key range of live rows: the partial indexes serve it too.
				"key range": {`SELECT id FROM ` + tn + ` WHERE topic = ? AND task_key >= ? AND task_key < ? AND status < 3`, []any{"t", "key-7", "key-8"}, []string{tn + "_live_keyed ", "key=task_key ", "key=live_key "}, false},
				// Withdrawing schedules' fire keys: a key range of live rows,
				// or the live rows when the statistics find them fewer.
				"withdraw fires": {withdrawQuery(tn), []any{5, "withdrawn", 0, "t", "key-7", "key-8", 0, 1, 0}, []string{tn + "_live_keyed ", tn + "_open ", tn + "_scan ", "key=task_key ", "key=live_key "}, false},
				// Not a key query, but it had the key index: now the dead
				// rows by topic (schema 21), on MariaDB the dead rows.
				"requeue topic":  {requeueTopicQuery(tn), []any{0, 0, 0, "t"}, []string{tn + "_dead ", "key=task_key ", "key=status_id ", "key=ended "}, false},
				"delete expired": {del, []any{1, 3, now.UnixMicro(), 500}, []string{tn + "_ended ", "key=ended "}, false},
				// The key hold's probes of final rows (endedkeys.go): SQLite's
				// keyed insert under a hold, PostgreSQL's check after a
				// keyed COPY.
				"hold insert (SQLite)": {liteHoldQuery(tn, 1), holdArgs, []string{tn + "_ended_keyed "}, false},
				"COPY check (PostgreSQL)": {heldKeyQuery(tn), []any{[]string{"t"}, []string{"key-7"}, now.UnixMicro()},
					[]string{tn + "_ended_keyed "}, false},
			} {
				if (name == "hold insert (SQLite)" && engine != "sqlite") || (name == "COPY check (PostgreSQL)" && engine != "postgres") {
					continue
				}
				plan := explain(t, engine, db, s.d.rebind(q.q), q.args)
				if fullScan(engine, plan) {
					t.Errorf("%s: plan reads the whole table:\n%s", name, plan)
				}
				found := 0
				for _, ix := range q.index {
					if strings.Contains(plan, ix) {
						found++
					}
				}
				if found == 0 || q.every && found < len(q.index) {
					t.Errorf("%s: plan does not use %v (every: %v):\n%s", name, q.index, q.every, plan)
				}
				t.Logf("%s plan:\n%s", name, plan)
			}
		})
	}
}

// TestMigrateKeysFromVersion2: a database made by schema version 2 (keys
// unique for ever) migrates forward with its rows, in every task table;
// afterwards a final task's key can be reused, a live one's still cannot,
// and opening again changes nothing.
func TestMigrateKeysFromVersion2(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dsns := testdb.DSNs(t, engine, 2)
			s, err := Open(ctx, Config{Driver: engine, DSNs: dsns, Tables: 3, Segments: 1})
			if err != nil {
				t.Fatal(err)
			}
			// Back to version 2: the version 1 tables (with the old unique
			// index) and rows in them.
			for _, db := range s.w {
				for _, tn := range s.names {
					if _, err := db.ExecContext(ctx, `DROP TABLE `+tn); err != nil {
						t.Fatal(err)
					}
					for _, stmt := range s.d.createTable(tn) {
						if _, err := db.ExecContext(ctx, stmt); err != nil {
							t.Fatal(err)
						}
					}
				}
				if _, err := db.ExecContext(ctx, s.d.rebind(s.d.upsertMeta), "schema_version", "2"); err != nil {
					t.Fatal(err)
				}
			}
			now := time.Now()
			var done, live []store.NewTask
			for i := range 30 {
				nt := newTask(t, fmt.Sprintf("old-%d", i), now.Add(-time.Second), 1)
				if i%2 == 0 {
					done = append(done, nt)
				} else {
					live = append(live, nt)
				}
			}
			// Written as version 2 wrote them (this Insert would use the
			// new indexes).
			for i, nt := range append(append([]store.NewTask{}, done...), live...) {
				st, at := task.StatusPending, now.UnixMicro()
				if i < len(done) {
					st, at = task.StatusDone, now.Add(-time.Hour).UnixMicro()
				}
				db, table, _ := s.locate(nt.ID)
				if _, err := s.w[db].ExecContext(ctx, s.d.rebind(`INSERT INTO `+s.names[table]+` (`+v1cols+`) VALUES (`+placeholders(17)+`)`),
					nt.ID, nt.Topic, nt.Key, int64(nt.ShardHash), nt.Seg, micros(nt.DueAt), nt.Payload, "", 1, 0, int(st), "", at, at, nil, 0, 0); err != nil {
					t.Fatal(err)
				}
			}
			s.Close()

			for range 2 { // the second open finds version 3 and changes nothing
				s2, err := Open(ctx, Config{Driver: engine, DSNs: dsns, Tables: 3, Segments: 1, KeyHold: 10 * time.Minute})
				if err != nil {
					t.Fatal(err)
				}
				var v string
				if err := s2.w[1].QueryRowContext(ctx, `SELECT v FROM ontime_meta WHERE k = 'schema_version'`).Scan(&v); err != nil || v != strconv.Itoa(SchemaVersion) {
					t.Fatalf("schema version %q, %v", v, err)
				}
				s2.Close()
			}
			s3, err := Open(ctx, Config{Driver: engine, DSNs: dsns, Tables: 3, Segments: 1, KeyHold: 10 * time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			defer s3.Close()
			for _, nt := range append(append([]store.NewTask{}, done...), live...) {
				if _, err := s3.Get(ctx, nt.ID); err != nil {
					t.Fatalf("row lost in migration: %v", err)
				}
			}
			var again []store.NewTask
			for _, nt := range append(append([]store.NewTask{}, done...), live...) {
				again = append(again, newTask(t, nt.Key, now, 1))
			}
			res, err := s3.Insert(ctx, again)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range res {
				if i < len(done) && (r.Existing || r.Task.ID != again[i].ID) {
					t.Fatalf("final key %q (ended an hour ago) not reused after migration", again[i].Key)
				}
				if i >= len(done) && (!r.Existing || r.Task.ID != live[i-len(done)].ID) {
					t.Fatalf("live key %q got a second task after migration", again[i].Key)
				}
			}
			// The live-key index holds in every table of every database: a
			// direct second live row of a key is refused.
			for _, nt := range live {
				db, table, _ := s3.locate(nt.ID)
				dup := newTask(t, nt.Key, now, 1)
				_, err := s3.w[db].ExecContext(ctx, s3.d.rebind(`INSERT INTO `+s3.names[table]+` (`+v1cols+`) VALUES (`+placeholders(17)+`)`),
					dup.ID, dup.Topic, dup.Key, int64(dup.ShardHash), dup.Seg, 0, []byte("null"), "", 1, 0, 0, "", 0, 0, nil, 0, 0)
				if err == nil || !uniqueViolation(err) {
					t.Fatalf("second live row of key %q: %v, want a unique violation", nt.Key, err)
				}
			}
			if _, err := s3.Insert(ctx, nil); err != nil && !errors.Is(err, store.ErrUnavailable) {
				t.Fatal(err)
			}
		})
	}
}

// v1cols are the columns of schema version 1's task tables.
const v1cols = `id, topic, task_key, shard_hash, seg, due_at, payload, target, max_attempts, attempts, status, last_error, created_at, updated_at, owner, lease_until, token`
