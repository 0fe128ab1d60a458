package sqlstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
	"github.com/ontimehq/ontime/internal/testdb"
)

// TestMigrateKeyedFromVersion7: databases made by the steps up to version
// 7, with keyed (live and final) and keyless rows in every table, migrate
// to version 8 with their rows; the key indexes are then partial on SQLite
// and PostgreSQL (MariaDB's are kept), live keys stay unique, final keys
// are reused, and the step and the open run again change nothing.
func TestMigrateKeyedFromVersion7(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dsns := testdb.DSNs(t, engine, 2)
			const tables = 3
			s := openT(t, engine, dsns, tables, 1)
			// Version 7 made from scratch, by the steps that made it.
			for _, db := range s.w {
				for _, tn := range s.names {
					if _, err := db.ExecContext(ctx, `DROP TABLE `+tn); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := db.ExecContext(ctx, `DELETE FROM ontime_meta`); err != nil {
					t.Fatal(err)
				}
				if err := s.migrateUpTo(ctx, db, 7); err != nil {
					t.Fatal(err)
				}
				// The rows below are written by today's Insert, which
				// writes traceparent (step 13), retry (step 14) and priority
				// (step 15): their columns go in ahead of their steps, which
				// then find them and skip.
				c, err := db.Conn(ctx)
				if err != nil {
					t.Fatal(err)
				}
				for _, tn := range s.names {
					if err := s.addColumn(ctx, c, tn, "traceparent", "VARCHAR(64) NOT NULL DEFAULT ''"); err != nil {
						t.Fatal(err)
					}
					if err := s.addColumn(ctx, c, tn, "retry", "VARCHAR(512) NOT NULL DEFAULT ''"); err != nil {
						t.Fatal(err)
					}
					if err := s.addColumn(ctx, c, tn, "priority", "SMALLINT NOT NULL DEFAULT 0"); err != nil {
						t.Fatal(err)
					}
				}
				c.Close()
			}
			if engine != "mysql" {
				ix := indexes(t, s, 0, s.names[0])
				if _, ok := ix[s.names[0]+"_key"]; !ok || ix[s.names[0]+"_live_key"] == "" {
					t.Fatalf("not a version 7 database: %v", ix)
				}
			}
			now := time.Now()
			var live, done, keyless []store.NewTask
			for i := range 60 {
				switch i % 3 {
				case 0:
					live = append(live, newTask(t, fmt.Sprintf("live-%d", i), now.Add(time.Hour), 1))
				case 1:
					done = append(done, newTask(t, fmt.Sprintf("done-%d", i), now.Add(time.Hour), 1))
				default:
					keyless = append(keyless, newTask(t, "", now.Add(time.Hour), 1))
				}
			}
			all := slices.Concat(live, done, keyless)
			if _, err := s.Insert(ctx, all); err != nil {
				t.Fatal(err)
			}
			for _, nt := range done {
				db, table, _ := s.locate(nt.ID)
				if _, err := s.w[db].ExecContext(ctx, s.d.rebind(`UPDATE `+s.names[table]+` SET status = ?, updated_at = ? WHERE id = ?`),
					int(task.StatusDone), now.Add(-time.Hour).UnixMicro(), nt.ID); err != nil {
					t.Fatal(err)
				}
			}
			s.Close()

			for range 2 { // the second open finds version 8 and changes nothing
				s = openT(t, engine, dsns, tables, 1)
				for db := range s.w {
					var v string
					if err := s.w[db].QueryRowContext(ctx, `SELECT v FROM ontime_meta WHERE k = 'schema_version'`).Scan(&v); err != nil || v != strconv.Itoa(SchemaVersion) {
						t.Fatalf("schema version %q, %v", v, err)
					}
				}
				s.Close()
			}
			s = openT(t, engine, dsns, tables, 1)
			s.cfg.KeyHold = 10 * time.Minute
			stepAgain(t, s, 1, 8)
			// Step 8 run again makes the index of every keyed row again;
			// step 26 (endedkeys.go), run again, takes it out again.
			stepAgain(t, s, 1, 26)
			if engine != "mysql" {
				for db := range s.w {
					for _, tn := range s.names {
						ix := indexes(t, s, db, tn)
						for _, gone := range []string{tn + "_key", tn + "_live_key", tn + "_topic_key", tn + "_status"} {
							if _, ok := ix[gone]; ok {
								t.Errorf("%s still has %s", tn, gone)
							}
						}
						for _, name := range []string{tn + "_ended_keyed", tn + "_live_keyed"} {
							if !strings.Contains(ix[name], "task_key IS NOT NULL") {
								t.Errorf("%s: %s is %q, want it partial on keyed rows", tn, name, ix[name])
							}
						}
						// Schema 26 (endedkeys.go): the index of every keyed
						// row gave way to the one of final keyed rows.
						if def, ok := ix[tn+"_keyed"]; ok {
							t.Errorf("%s still has %s_keyed: %q", tn, tn, def)
						}
						if !strings.Contains(ix[tn+"_ended_keyed"], "status >= 3") {
							t.Errorf("%s: %s_ended_keyed is %q, want it partial on final rows", tn, tn, ix[tn+"_ended_keyed"])
						}
						if !strings.Contains(ix[tn+"_open"], "status <> 3") {
							t.Errorf("%s: %s_open is %q, want it partial on rows not done", tn, tn, ix[tn+"_open"])
						}
					}
				}
			}
			for _, nt := range all {
				if _, err := s.Get(ctx, nt.ID); err != nil {
					t.Fatalf("row lost in migration: %v", err)
				}
			}
			for _, nt := range slices.Concat(live, done) {
				got, err := s.GetByKey(ctx, nt.Topic, nt.Key)
				if err != nil || got.ID != nt.ID {
					t.Fatalf("by key %q: %v, %v", nt.Key, got, err)
				}
			}
			var again []store.NewTask
			for _, nt := range slices.Concat(live, done) {
				again = append(again, newTask(t, nt.Key, now, 1))
			}
			res, err := s.Insert(ctx, again)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range res {
				if i < len(live) && (!r.Existing || r.Task.ID != live[i].ID) {
					t.Fatalf("live key %q got a second task after migration", again[i].Key)
				}
				if i >= len(live) && (r.Existing || r.Task.ID != again[i].ID) {
					t.Fatalf("final key %q (ended an hour ago) not reused after migration", again[i].Key)
				}
			}
			// The live-key index itself holds in every table: a direct
			// second live row of a key is refused; keyless rows never meet.
			for _, nt := range live {
				db, table, _ := s.locate(nt.ID)
				dup := newTask(t, nt.Key, now, 1)
				_, err := s.w[db].ExecContext(ctx, s.d.rebind(`INSERT INTO `+s.names[table]+` (`+v1cols+`) VALUES (`+placeholders(17)+`)`),
					dup.ID, dup.Topic, dup.Key, int64(dup.ShardHash), dup.Seg, 0, []byte("null"), "", 1, 0, 0, "", 0, 0, nil, 0, 0)
				if err == nil || !uniqueViolation(err) {
					t.Fatalf("second live row of key %q: %v, want a unique violation", nt.Key, err)
				}
			}
			if _, err := s.Insert(ctx, []store.NewTask{newTask(t, "", now, 1), newTask(t, "", now, 1)}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// indexes maps the names of table tn's indexes in database db to their
// definitions (SQLite, PostgreSQL).
func indexes(t *testing.T, s *Store, db int, tn string) map[string]string {
	t.Helper()
	q := map[string]string{
		"sqlite":   `SELECT name, COALESCE(sql, '') FROM sqlite_master WHERE type = 'index' AND tbl_name = ?`,
		"postgres": `SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() AND tablename = ?`,
	}[s.d.name]
	rows, err := s.w[db].QueryContext(context.Background(), s.d.rebind(q), tn)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var name, def string
		if err := rows.Scan(&name, &def); err != nil {
			t.Fatal(err)
		}
		out[name] = def
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestStatusQueriesUseOpenIndex: the queries by a status other than done
// go through the (status, id) index of rows not done on every engine, with
// most rows done; Start and Finish on SQLite and MariaDB seek their rows
// by ID (MariaDB's optimizer picks an index on status here, whose range
// read's gap locks deadlocked keyed inserts: byID).
// (Lease extensions: on the leases index, TestQueriesUseScanIndex.)
func TestStatusQueriesUseOpenIndex(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			s, tasks, _ := planRows(t, engine)
			tn, db := s.names[0], s.w[0]
			var refs []store.Ref
			var dones []store.Outcome
			for _, nt := range tasks[len(tasks)-4:] {
				refs = append(refs, store.Ref{ID: nt.ID, Token: 7})
				dones = append(dones, store.Outcome{Ref: store.Ref{ID: nt.ID, Token: 7}, Done: true})
			}
			startQ, startArgs := startWhere(refs)
			finish := s.finishParts(group{table: 0, idx: []int{0, 1, 2, 3}}, dones, 1)[0]
			open := []string{tn + "_open ", "key=status_id ", "key=ended "}
			for name, q := range map[string]struct {
				q     string
				args  []any
				index []string
			}{
				// Or the dead rows' own partial index (schema 21), which
				// PostgreSQL may take when the status is 4.
				"list dead":        {`SELECT id FROM ` + tn + ` WHERE id > ? AND status = ?` + notDone + ` ORDER BY id LIMIT ?`, []any{"", 4, 100}, append(slices.Clone(open), tn+"_dead ")},
				"start (SQLite)":   {liteOpQuery(liteOpKey{op: liteOpStart, class: 4}, tn), []any{2, 0, 0, "a", "b", "c", "d", 1, 1}, []string{"PRIMARY KEY (id=?)"}},
				"start (MariaDB)":  {s.startLock(tn, startQ), startArgs, []string{"key=PRIMARY "}},
				"finish (MariaDB)": {finish.q, finish.args, []string{"key=PRIMARY "}},
			} {
				if (name == "start (SQLite)" && engine != "sqlite") || (strings.HasSuffix(name, "(MariaDB)") && engine != "mysql") {
					continue
				}
				plan := explain(t, engine, db, s.d.rebind(q.q), q.args)
				if fullScan(engine, plan) {
					t.Errorf("%s: plan reads the whole table:\n%s", name, plan)
				}
				found := false
				for _, ix := range q.index {
					found = found || strings.Contains(plan, ix)
				}
				if !found {
					t.Errorf("%s: plan does not use %v:\n%s", name, q.index, plan)
				}
				t.Logf("%s plan:\n%s", name, plan)
			}
		})
	}
}
