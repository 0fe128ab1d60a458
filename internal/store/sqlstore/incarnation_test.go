package sqlstore

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/testdb"
)

// TestMigrateIncarnationFromVersion11: ontime_nodes as version 11 left it
// (no incarnation), with a registered node, migrates to version 12: the
// node keeps its registration with incarnation 0 (unknown: its restarts
// told by started_at), and a heartbeat then stores and reads back the
// incarnation of the node's process. The step run again changes nothing.
func TestMigrateIncarnationFromVersion11(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dsns := testdb.DSNs(t, engine, 1)
			s := openT(t, engine, dsns, 1, 1)
			exec := func(q string, args ...any) {
				t.Helper()
				if _, err := s.w[0].ExecContext(ctx, s.d.rebind(q), args...); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			exec(`ALTER TABLE ontime_nodes DROP COLUMN incarnation`)
			exec(s.d.upsertMeta, "schema_version", "11")
			beat := time.UnixMicro(time.Now().UnixMicro())
			exec(`INSERT INTO ontime_nodes (node_id, addr, heartbeat_at, started_at, topics) VALUES (?, ?, ?, ?, ?)`, "old", "h:1", beat.UnixMicro(), beat.UnixMicro(), "")
			s.Close()

			s = openT(t, engine, dsns, 1, 1)
			var v string
			if err := s.w[0].QueryRowContext(ctx, `SELECT v FROM ontime_meta WHERE k = 'schema_version'`).Scan(&v); err != nil || v != strconv.Itoa(SchemaVersion) {
				t.Fatalf("schema version %q, %v", v, err)
			}
			nodes, err := s.Nodes(ctx)
			if err != nil || len(nodes) != 1 || nodes[0].ID != "old" || !nodes[0].Started.Equal(beat) || nodes[0].Incarnation != 0 {
				t.Fatalf("nodes after the migration: %+v %v", nodes, err)
			}
			stepAgain(t, s, 0, 12)
			inc := store.NewIncarnation()
			if err := s.Heartbeat(ctx, "old", "h:1", nil, store.Process{Started: beat, Incarnation: inc.ID()}, time.Now()); err != nil {
				t.Fatal(err)
			}
			if nodes, err := s.Nodes(ctx); err != nil || len(nodes) != 1 || nodes[0].Incarnation != inc.ID() {
				t.Fatalf("nodes after a heartbeat with an incarnation: %+v %v", nodes, err)
			}
			// A restart under the same ID: the registration shows the new one.
			next := store.NewIncarnation()
			if err := s.Heartbeat(ctx, "old", "h:1", nil, store.Process{Started: time.Now(), Incarnation: next.ID()}, time.Now()); err != nil {
				t.Fatal(err)
			}
			if nodes, err := s.Nodes(ctx); err != nil || len(nodes) != 1 || nodes[0].Incarnation != next.ID() {
				t.Fatalf("nodes after a restart: %+v %v", nodes, err)
			}
		})
	}
}
