package dbcoord

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/cluster/clustertest"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/testdb"
)

// Items taken from a live node are granted to their new owner a TTL
// later, a wait for the old owner to read the change; until the new owner
// starts, nobody scans them and their tasks coming due are late (a whole
// TTL after every join). The old owner, once it has read the change and
// let the items go, ends the wait. Here b joins (registered, its own
// coordinator left out so that only a can end the wait) with a TTL of
// 30 s: without the hand-over b's grants stay in the future for 30 s after
// a's next round (10 s) moves them.
func TestHandOverEndsTheWait(t *testing.T) {
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dsn := testdb.DSNs(t, engine, 1)[0]
			items := make([]string, 8)
			for i := range items {
				items[i] = fmt.Sprintf("0.%d.0", i)
			}
			const ttl = 30 * time.Second
			a := startNode(t, engine, dsn, "a", items, ttl)
			clustertest.WaitBalanced(t, recs([]*node{a}), items, 20*time.Second)
			joined := time.Now()
			if err := a.st.Heartbeat(ctx, "b", "127.0.0.1:0", nil, store.Process{Started: joined}, joined); err != nil {
				t.Fatal(err)
			}
			// a's next round comes within ttl/3; the rest is room for a
			// late round on a loaded machine, still short of the 30 s
			// the wait would last.
			deadline := joined.Add(ttl/3 + 10*time.Second)
			clustertest.WaitHandedOver(t, func() (map[string]store.Grant, error) { return a.st.Assignment(ctx) }, "b", a.Recorder, joined, deadline)
		})
	}
}
