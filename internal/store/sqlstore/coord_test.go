package sqlstore

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/testdb"
)

// TestCoordination runs the coordinator's statements on every engine:
// registrations, the leader lease and its term, and assignment writes
// fenced by that term.
func TestCoordination(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := openT(t, engine, testdb.DSNs(t, engine, 1), 1, 1)
			now := time.UnixMicro(time.Now().UnixMicro())
			ttl := 10 * time.Second

			// Registrations.
			for i, id := range []string{"b", "a", "old"} {
				beat := now
				if id == "old" {
					beat = now.Add(-time.Hour)
				}
				if err := s.Heartbeat(ctx, id, "h"+strconv.Itoa(i)+":7070", nil, store.Process{Started: now.Add(-2 * time.Hour)}, beat); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Heartbeat(ctx, "a", "h9:7070", nil, store.Process{Started: now.Add(-time.Minute)}, now); err != nil { // refresh: new address, one row
				t.Fatal(err)
			}
			live, err := s.LiveNodes(ctx, now.Add(-ttl))
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(live)
			if !slices.Equal(live, []string{"a", "b"}) {
				t.Fatalf("live nodes %v", live)
			}
			if err := s.PruneNodes(ctx, now.Add(-10*ttl)); err != nil {
				t.Fatal(err)
			}
			if err := s.Deregister(ctx, "b"); err != nil {
				t.Fatal(err)
			}
			nodes, err := s.Nodes(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// A refresh from a restarted process registers its start: the
			// others tell by it that the node restarted.
			if len(nodes) != 1 || nodes[0].ID != "a" || nodes[0].Addr != "h9:7070" || !nodes[0].Heartbeat.Equal(now) ||
				!nodes[0].Started.Equal(now.Add(-time.Minute)) {
				t.Fatalf("nodes after refresh, prune and deregister: %+v", nodes)
			}

			// The lease: vacant at first, then held, then taken over only
			// once expired, with a higher term.
			if l, err := s.Leader(ctx); err != nil || l.Node != "" || l.Term != 0 {
				t.Fatalf("initial lease %+v %v", l, err)
			}
			term, err := s.TryLead(ctx, "a", now, now.Add(ttl))
			if err != nil || term != 1 {
				t.Fatalf("a takes the vacant lease: term %d %v", term, err)
			}
			if term, err := s.TryLead(ctx, "b", now.Add(time.Second), now.Add(ttl+time.Second)); err != nil || term != 0 {
				t.Fatalf("b takes a held lease: term %d %v", term, err)
			}
			// Renewing to the same expiry still counts as held (MySQL
			// reports changed rows, not matched ones).
			for range 2 {
				if held, err := s.RenewLead(ctx, store.LeaderLease{Node: "a", Term: 1, Until: now.Add(2 * ttl)}); err != nil || !held {
					t.Fatalf("a renews: %v %v", held, err)
				}
			}
			if held, err := s.RenewLead(ctx, store.LeaderLease{Node: "b", Term: 1, Until: now.Add(2 * ttl)}); err != nil || held {
				t.Fatalf("b renews a's lease: %v %v", held, err)
			}

			// Fenced writes.
			grants := map[string]store.Grant{
				"0.0.0": {Node: "a", Since: now, Term: 1},
				"0.0.1": {Node: "b", Since: now.Add(ttl), Term: 1},
			}
			if held, err := s.WriteAssignment(ctx, store.LeaderLease{Node: "a", Term: 1, Until: now.Add(2 * ttl)}, grants, nil); err != nil || !held {
				t.Fatalf("leader writes: %v %v", held, err)
			}
			got, err := s.Assignment(ctx)
			if err != nil || !maps.Equal(got, grants) {
				t.Fatalf("assignment %v %v, want %v", got, err, grants)
			}
			if held, err := s.WriteAssignment(ctx, store.LeaderLease{Node: "a", Term: 0, Until: now.Add(2 * ttl)}, map[string]store.Grant{"0.0.0": {Node: "x", Since: now, Term: 0}}, []string{"0.0.1"}); err != nil || held {
				t.Fatalf("stale term writes: %v %v", held, err)
			}
			if got, _ := s.Assignment(ctx); !maps.Equal(got, grants) {
				t.Fatalf("a fenced write changed the assignment: %v", got)
			}
			moved := map[string]store.Grant{"0.0.0": {Node: "b", Since: now.Add(ttl), Term: 1}}
			if held, err := s.WriteAssignment(ctx, store.LeaderLease{Node: "a", Term: 1, Until: now.Add(2 * ttl)}, moved, []string{"0.0.1"}); err != nil || !held {
				t.Fatalf("leader moves and drops: %v %v", held, err)
			}
			if got, _ := s.Assignment(ctx); !maps.Equal(got, moved) {
				t.Fatalf("assignment %v, want %v", got, moved)
			}

			// Resign: another node takes the lease at once, term 2; the old
			// leader's writes are fenced.
			if err := s.Resign(ctx, "a", 1); err != nil {
				t.Fatal(err)
			}
			if term, err := s.TryLead(ctx, "b", now, now.Add(ttl)); err != nil || term != 2 {
				t.Fatalf("b after a resigned: term %d %v", term, err)
			}
			if l, err := s.Leader(ctx); err != nil || l.Node != "b" || l.Term != 2 || !l.Until.Equal(now.Add(ttl)) {
				t.Fatalf("lease %+v %v", l, err)
			}
			if held, err := s.WriteAssignment(ctx, store.LeaderLease{Node: "a", Term: 1, Until: now.Add(ttl)}, grants, nil); err != nil || held {
				t.Fatalf("deposed leader writes: %v %v", held, err)
			}
		})
	}
}

// TestMigrateFromVersion1: a database at schema version 1 — task tables
// only, or with the coordinator's tables that dbcoord used to create
// outside the schema version — migrates to SchemaVersion on open, keeping
// its tasks and the leader's term.
func TestMigrateFromVersion1(t *testing.T) {
	for _, engine := range testdb.Engines {
		for _, coord := range []string{"bare", "dbcoord-tables"} {
			t.Run(engine+"/"+coord, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				dsns := testdb.DSNs(t, engine, 1)
				s := openT(t, engine, dsns, 2, 2)
				nt := newTask(t, "k", time.Now().Add(time.Hour), 2)
				if _, err := s.Insert(ctx, []store.NewTask{nt}); err != nil {
					t.Fatal(err)
				}
				// Back to version 1.
				db := s.w[0]
				exec := func(q string, args ...any) {
					t.Helper()
					if _, err := db.ExecContext(ctx, s.d.rebind(q), args...); err != nil {
						t.Fatalf("%s: %v", q, err)
					}
				}
				for _, tn := range []string{"ontime_nodes", "ontime_leader", "ontime_assignment"} {
					exec(`DROP TABLE ` + tn)
				}
				exec(s.d.upsertMeta, "schema_version", "1")
				if coord == "dbcoord-tables" {
					// What dbcoord.Migrate made, word for word, and a leader
					// that reached term 7.
					exec(`CREATE TABLE IF NOT EXISTS ontime_nodes (node_id VARCHAR(128) NOT NULL PRIMARY KEY, addr VARCHAR(128) NOT NULL, heartbeat_at BIGINT NOT NULL, started_at BIGINT NOT NULL)`)
					exec(`CREATE TABLE IF NOT EXISTS ontime_leader (id INT NOT NULL PRIMARY KEY, node_id VARCHAR(128) NOT NULL, term BIGINT NOT NULL, lease_until BIGINT NOT NULL, version BIGINT NOT NULL DEFAULT 0)`)
					exec(`CREATE TABLE IF NOT EXISTS ontime_assignment (item VARCHAR(128) NOT NULL PRIMARY KEY, node_id VARCHAR(128) NOT NULL, term BIGINT NOT NULL, since BIGINT NOT NULL)`)
					exec(`INSERT INTO ontime_leader (id, node_id, term, lease_until) VALUES (1, 'old', 7, 0)`)
				}
				s.Close()

				s2 := openT(t, engine, dsns, 2, 2)
				var v string
				if err := s2.w[0].QueryRowContext(ctx, `SELECT v FROM ontime_meta WHERE k = 'schema_version'`).Scan(&v); err != nil || v != strconv.Itoa(SchemaVersion) {
					t.Fatalf("schema_version %q %v, want %d", v, err, SchemaVersion)
				}
				if _, err := s2.Get(ctx, nt.ID); err != nil {
					t.Fatalf("task lost by the migration: %v", err)
				}
				wantTerm := int64(1)
				if coord == "dbcoord-tables" {
					wantTerm = 8
				}
				now := time.Now()
				term, err := s2.TryLead(ctx, "n1", now, now.Add(time.Minute))
				if err != nil || term != wantTerm {
					t.Fatalf("TryLead after migration: term %d %v, want %d", term, err, wantTerm)
				}
				if err := s2.Heartbeat(ctx, "n1", "h:1", nil, store.Process{Started: now}, now); err != nil {
					t.Fatal(err)
				}
				g := map[string]store.Grant{"0.0.0": {Node: "n1", Since: time.UnixMicro(now.UnixMicro()), Term: term}}
				if held, err := s2.WriteAssignment(ctx, store.LeaderLease{Node: "n1", Term: term, Until: now.Add(time.Minute)}, g, nil); err != nil || !held {
					t.Fatalf("WriteAssignment after migration: %v %v", held, err)
				}
				// Reopening at the current version changes nothing.
				s3 := openT(t, engine, dsns, 2, 2)
				if l, err := s3.Leader(ctx); err != nil || l.Node != "n1" || l.Term != term {
					t.Fatalf("lease after reopen %+v %v", l, err)
				}
			})
		}
	}
}

// TestMigrateRefusesNewer: a database migrated by a newer ontime is left
// alone, with an error that says what to do.
func TestMigrateRefusesNewer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsns := testdb.DSNs(t, "sqlite", 1)
	s := openT(t, "sqlite", dsns, 1, 1)
	if _, err := s.w[0].ExecContext(ctx, s.d.upsertMeta, "schema_version", strconv.Itoa(SchemaVersion+1)); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, Config{Driver: "sqlite", DSNs: dsns, Tables: 1, Segments: 1}); err == nil {
		t.Fatal("a newer schema was accepted")
	}
}
