package sqlstore

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/testdb"
)

// TestMigrateHandlersFromVersion10: the coordinator's tables as version 10
// left them (ontime_nodes without topics), with a registered node, migrate
// to version 11: the node keeps its registration with no topics, a
// heartbeat then stores and reads back its topics, and the handoffs table
// exists. The step and the open run again change nothing.
func TestMigrateHandlersFromVersion10(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dsns := testdb.DSNs(t, engine, 1)
			s := openT(t, engine, dsns, 1, 1)
			db := s.w[0]
			exec := func(q string, args ...any) {
				t.Helper()
				if _, err := db.ExecContext(ctx, s.d.rebind(q), args...); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			// Version 10, by the step that made ontime_nodes (version 2).
			exec(`DROP TABLE ontime_nodes`)
			exec(`DROP TABLE ontime_handoffs`)
			for _, q := range s.d.createCoord {
				exec(q)
			}
			exec(s.d.upsertMeta, "schema_version", "10")
			beat := time.UnixMicro(time.Now().UnixMicro())
			exec(`INSERT INTO ontime_nodes (node_id, addr, heartbeat_at, started_at) VALUES (?, ?, ?, ?)`, "old", "h:1", beat.UnixMicro(), beat.UnixMicro())
			s.Close()

			for range 2 { // the second open finds version 11 and changes nothing
				s = openT(t, engine, dsns, 1, 1)
				var v string
				if err := s.w[0].QueryRowContext(ctx, `SELECT v FROM ontime_meta WHERE k = 'schema_version'`).Scan(&v); err != nil || v != strconv.Itoa(SchemaVersion) {
					t.Fatalf("schema version %q, %v", v, err)
				}
				nodes, err := s.Nodes(ctx)
				if err != nil || len(nodes) != 1 || nodes[0].ID != "old" || !nodes[0].Heartbeat.Equal(beat) || nodes[0].Topics != nil {
					t.Fatalf("nodes after the migration: %+v %v", nodes, err)
				}
				stepAgain(t, s, 0, 11)
				s.Close()
			}
			s = openT(t, engine, dsns, 1, 1)
			now := time.Now()
			if err := s.Heartbeat(ctx, "old", "h:1", []string{"orders.cancel", "a.b"}, store.Process{Started: now}, now); err != nil {
				t.Fatal(err)
			}
			if err := s.Heartbeat(ctx, "new", "h:2", nil, store.Process{Started: now}, now); err != nil {
				t.Fatal(err)
			}
			nodes, err := s.Nodes(ctx)
			if err != nil || len(nodes) != 2 || !slices.Equal(nodes[1].Topics, []string{"a.b", "orders.cancel"}) || nodes[0].Topics != nil {
				t.Fatalf("nodes with topics: %+v %v", nodes, err)
			}
			if err := s.HandOff(ctx, "new", []store.Ref{{ID: "01J0000000000000000000000A", Topic: "a.b", DueAt: now, Token: 5}}, now); err != nil {
				t.Fatalf("hand off after the migration: %v", err)
			}
		})
	}
}

// TestHandoffs: handoffs are taken by their node only, earliest due first,
// each once; one handed off again under a new token replaces the first;
// a take deletes only the tokens it read; prune deletes what is old.
func TestHandoffs(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := openT(t, engine, testdb.DSNs(t, engine, 1), 1, 1)
			now := time.UnixMicro(time.Now().UnixMicro())
			ref := func(id string, due time.Duration, tok int64) store.Ref {
				return store.Ref{ID: id, Topic: "t", DueAt: now.Add(due), Token: tok}
			}
			if err := s.HandOff(ctx, "b", []store.Ref{ref("01J000000000000000000000B2", 2*time.Second, 1), ref("01J000000000000000000000B1", time.Second, 2)}, now); err != nil {
				t.Fatal(err)
			}
			if err := s.HandOff(ctx, "c", []store.Ref{ref("01J000000000000000000000C1", 0, 3)}, now); err != nil {
				t.Fatal(err)
			}
			// Handed off again, under a new token: replaces the first.
			if err := s.HandOff(ctx, "b", []store.Ref{ref("01J000000000000000000000B2", 2*time.Second, 4)}, now); err != nil {
				t.Fatal(err)
			}
			got, err := s.TakeHandoffs(ctx, "b", 10)
			want := []store.Ref{ref("01J000000000000000000000B1", time.Second, 2), ref("01J000000000000000000000B2", 2*time.Second, 4)}
			if err != nil || len(got) != 2 || !got[0].DueAt.Equal(want[0].DueAt) || got[0].ID != want[0].ID || got[0].Token != 2 ||
				got[1].ID != want[1].ID || got[1].Token != 4 || got[1].Topic != "t" {
				t.Fatalf("take: %+v %v, want %+v", got, err, want)
			}
			if got, err := s.TakeHandoffs(ctx, "b", 10); err != nil || len(got) != 0 {
				t.Fatalf("second take: %+v %v, want none", got, err)
			}
			// Old handoffs go; c's is old by now+1h.
			if err := s.PruneHandoffs(ctx, now.Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
			if got, err := s.TakeHandoffs(ctx, "c", 10); err != nil || len(got) != 0 {
				t.Fatalf("take after prune: %+v %v, want none", got, err)
			}
			if err := s.HandOff(ctx, "c", []store.Ref{ref("01J000000000000000000000C1", 0, 3)}, now); err != nil {
				t.Fatal(err)
			}
			if err := s.PruneHandoffs(ctx, now.Add(-time.Hour)); err != nil {
				t.Fatal(err)
			}
			if got, err := s.TakeHandoffs(ctx, "c", 10); err != nil || len(got) != 1 {
				t.Fatalf("a recent handoff was pruned: %+v %v", got, err)
			}
		})
	}
}
