package dbcoord

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/cluster"
	"github.com/ontimehq/ontime/internal/cluster/clustertest"
	"github.com/ontimehq/ontime/internal/testdb"
)

// zoneNode is a running coordinator of a node in a zone.
type zoneNode struct {
	rec  *clustertest.Recorder
	zone string
	c    *Coordinator
	st   *cutStore
}

// TestZones: nodes in two zones through the database coordinator. Each
// zone's nodes own its databases' items, balanced among them; when every
// node of zone a leaves, zone b's node takes a's items; a node of zone a
// joining takes them back. The zones are registered (ontime_nodes.zone)
// and shown by Status. On every engine: the zone column is schema 18.
func TestZones(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			dsn := testdb.DSNs(t, engine, 1)[0]
			// Databases 0 and 1 in zone a, 2 in zone b; 4 tables × 2 segments each.
			dbZone := []string{"a", "a", "b"}
			var items []string
			for db := range dbZone {
				for tb := range 4 {
					for seg := range 2 {
						items = append(items, fmt.Sprintf("%d.%d.%d", db, tb, seg))
					}
				}
			}
			zoneOf := func(k string) string {
				if it, ok := cluster.ParseItemKey(k); ok {
					return dbZone[it.DB]
				}
				return ""
			}
			const ttl = 900 * time.Millisecond
			start := func(id, zone string) *zoneNode {
				rec := &clustertest.Recorder{ID: id}
				st := &cutStore{Store: openStore(t, engine, dsn)}
				c, err := New(Config{Store: st, NodeConfig: cluster.NodeConfig{NodeID: id, Addr: id + ":7070", TTL: ttl,
					Items: items, Zone: zone, ItemZone: zoneOf, OnAssign: rec.OnAssign, HandOverAtOnce: func(string) bool { return true },
					Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))}})
				if err != nil {
					t.Fatal(err)
				}
				if err := c.Start(context.Background()); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(c.Stop)
				return &zoneNode{rec: rec, zone: zone, c: c, st: st}
			}
			a1, a2, b1 := start("a1", "a"), start("a2", "a"), start("b1", "b")

			waitZones(t, []*zoneNode{a1, a2, b1}, items, zoneOf, 20*ttl)
			st, err := b1.c.Status(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, ns := range st.Nodes {
				got[ns.ID] = ns.Zone
			}
			if got["a1"] != "a" || got["a2"] != "a" || got["b1"] != "b" {
				t.Fatalf("Status shows zones %v", got)
			}

			// Zone a goes dark — a1 leaves, a2 is cut off (no goodbye: its
			// registration stays until its heartbeat is a TTL old): b1
			// takes zone a's items within the lease.
			a1.c.Stop()
			a2.st.down.Store(true)
			a2.c.Stop()
			waitZones(t, []*zoneNode{b1}, items, zoneOf, 20*ttl)

			// Zone a is back: its items return to it, b1 keeps zone b's.
			a3 := start("a3", "a")
			waitZones(t, []*zoneNode{a3, b1}, items, zoneOf, 20*ttl)
		})
	}
}

// waitZones waits until nodes own every item once, each item on a node of
// its zone when one of nodes is in it (else on any), balanced within the
// zone. At every look it fails at once if two nodes own the same item.
func waitZones(t *testing.T, nodes []*zoneNode, items []string, zoneOf func(string) string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		why := ""
		owner := map[string]*zoneNode{}
		count := map[*zoneNode]map[string]int{} // node → item zone → items
		for _, n := range nodes {
			count[n] = map[string]int{}
			for _, it := range n.rec.Owned() {
				if prev, dup := owner[it]; dup {
					t.Fatalf("item %s owned by %s and %s", it, prev.rec.ID, n.rec.ID)
				}
				owner[it] = n
				count[n][zoneOf(it)]++
			}
		}
		zoneHas := map[string]bool{}
		for _, n := range nodes {
			zoneHas[n.zone] = true
		}
		for _, it := range items {
			n, ok := owner[it]
			switch {
			case !ok:
				why = fmt.Sprintf("item %s unowned", it)
			case zoneHas[zoneOf(it)] && n.zone != zoneOf(it):
				why = fmt.Sprintf("item %s of zone %s on %s of zone %s", it, zoneOf(it), n.rec.ID, n.zone)
			}
		}
		for z := range zoneHas {
			lo, hi := len(items), 0
			for _, n := range nodes {
				if n.zone == z {
					lo, hi = min(lo, count[n][z]), max(hi, count[n][z])
				}
			}
			if hi-lo > 1 {
				why = fmt.Sprintf("zone %s's items unbalanced: %d..%d", z, lo, hi)
			}
		}
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("zones not settled within %s: %s", within, why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
