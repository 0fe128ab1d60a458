package etcdcoord

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/testdb/testetcd"
)

// TestRestartShowsNewIncarnation (issue 25 item 10): a node that crashes
// and comes back under the same ID within the TTL never leaves the
// membership (its key is put again under the new session before the old
// lease ends), so the others can tell the restart only by what the key
// says of the process: its incarnation and start. Before, the key held
// neither and the others' scanners never ended what the previous process
// had claimed in their items: those tasks waited out their leases.
//
// The key carries the node's build version too (the cluster view shows
// every node's): the restarted b runs another.
func TestRestartShowsNewIncarnation(t *testing.T) {
	endpoint := testetcd.Start(t)
	start := func(id string, inc int64) *Coordinator {
		c, err := New(context.Background(), Config{Endpoints: []string{endpoint}, Prefix: "/inc", NodeID: id, Addr: id + ":7070",
			TTL: 5 * time.Second, Items: []string{"0.0.0"}, Incarnation: inc, Version: fmt.Sprintf("v1.%d", inc%1000)})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Stop)
		return c
	}
	process := func(c *Coordinator, id string) (store.NodeStatus, bool) {
		st, err := c.Status(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range st.Nodes {
			if n.ID == id {
				return n, true
			}
		}
		return store.NodeStatus{}, false
	}
	first, second := store.NewIncarnation().ID(), store.NewIncarnation().ID()
	a := start("a", store.NewIncarnation().ID())
	b := start("b", first)
	waitUntil(t, "b's incarnation shown", func() bool { n, ok := process(a, "b"); return ok && n.Incarnation == first })
	was, _ := process(a, "b")
	// b crashes: its session's lease stays until the TTL runs out.
	b.cli.Close()
	b.Stop()
	start("b", second)
	waitUntil(t, "b's new incarnation shown", func() bool { n, ok := process(a, "b"); return ok && n.Incarnation == second })
	now, _ := process(a, "b")
	if was.Version != fmt.Sprintf("v1.%d", first%1000) || now.Version != fmt.Sprintf("v1.%d", second%1000) {
		t.Fatalf("b's version %q before the restart, %q after", was.Version, now.Version)
	}
	if !now.Started.After(was.Started) {
		t.Fatalf("started %s after the restart, %s before", now.Started, was.Started)
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10s: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
