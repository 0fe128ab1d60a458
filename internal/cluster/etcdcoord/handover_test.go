package etcdcoord

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/cluster/clustertest"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/testdb/testetcd"
)

// The old owner of items moved to a joining node ends their handover
// wait once it has let them go (dbcoord's TestHandOverEndsTheWait has the
// why). b is registered with no coordinator of its own, so only a can end
// the wait; with a TTL of 30 s, without the hand-over b's grants stay in
// the future for 30 s after a's next round (10 s) moves them.
func TestHandOverEndsTheWait(t *testing.T) {
	endpoint := testetcd.Start(t)
	ctx := context.Background()
	items := make([]string, 8)
	for i := range items {
		items[i] = fmt.Sprintf("0.%d.0", i)
	}
	const ttl = 30 * time.Second
	a := startNodeTTL(t, endpoint, "/handover", "a", items, ttl)
	clustertest.WaitBalanced(t, recs([]*node{a}), items, 20*time.Second)
	joined := time.Now()
	if _, err := a.c.cli.Put(ctx, "/handover/nodes/b", "b:7070"); err != nil {
		t.Fatal(err)
	}
	deadline := joined.Add(ttl/3 + 10*time.Second)
	clustertest.WaitHandedOver(t, func() (map[string]store.Grant, error) { return a.c.assignment(ctx) }, "b", a.Recorder, joined, deadline)
}
