package sqlstore

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/testdb"
)

// TestMigrateNodeVersionFromVersion18: ontime_nodes without the version
// column (schema 18), with a registered node, migrates to 19: the node
// keeps its registration with an empty version (unknown), and a heartbeat then
// stores and reads back its build version; a version longer than the
// column is cut, not refused (a heartbeat must not fail on it). The step
// run again changes nothing.
func TestMigrateNodeVersionFromVersion18(t *testing.T) {
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
			exec(`ALTER TABLE ontime_nodes DROP COLUMN version`)
			exec(s.d.upsertMeta, "schema_version", "18")
			beat := time.UnixMicro(time.Now().UnixMicro())
			exec(`INSERT INTO ontime_nodes (node_id, addr, heartbeat_at, started_at, topics, incarnation) VALUES (?, ?, ?, ?, ?, ?)`, "old", "h:1", beat.UnixMicro(), beat.UnixMicro(), "", 7)
			s.Close()

			s = openT(t, engine, dsns, 1, 1)
			var v string
			if err := s.w[0].QueryRowContext(ctx, `SELECT v FROM ontime_meta WHERE k = 'schema_version'`).Scan(&v); err != nil || v != strconv.Itoa(SchemaVersion) {
				t.Fatalf("schema version %q, %v", v, err)
			}
			nodes, err := s.Nodes(ctx)
			if err != nil || len(nodes) != 1 || nodes[0].ID != "old" || nodes[0].Incarnation != 7 || nodes[0].Version != "" {
				t.Fatalf("nodes after the migration: %+v %v", nodes, err)
			}
			stepAgain(t, s, 0, 19)
			const ver = "v1.4.2 0123456789ab"
			if err := s.Heartbeat(ctx, "old", "h:1", nil, store.Process{Started: beat, Incarnation: 8, Version: ver}, time.Now()); err != nil {
				t.Fatal(err)
			}
			if nodes, err := s.Nodes(ctx); err != nil || len(nodes) != 1 || nodes[0].Version != ver {
				t.Fatalf("nodes after a heartbeat with a version: %+v %v", nodes, err)
			}
			long := strings.Repeat("v", 300)
			if err := s.Heartbeat(ctx, "old", "h:1", nil, store.Process{Started: beat, Incarnation: 8, Version: long}, time.Now()); err != nil {
				t.Fatal(err)
			}
			if nodes, err := s.Nodes(ctx); err != nil || len(nodes) != 1 || nodes[0].Version != long[:128] {
				t.Fatalf("nodes after a heartbeat with a long version: %+v %v", nodes, err)
			}
		})
	}
}
