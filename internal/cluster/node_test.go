package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/store"
)

func TestGrantValueRoundTrip(t *testing.T) {
	g := store.Grant{Node: "n-1", Since: time.UnixMicro(1_700_000_000_123_456), Term: 42}
	back, ok := ParseGrant(GrantValue(g))
	if !ok || back.Node != g.Node || !back.Since.Equal(g.Since) || back.Term != g.Term {
		t.Fatalf("%+v → %q → %+v %v", g, GrantValue(g), back, ok)
	}
	for _, bad := range []string{"", "a|b", "a|1|x", "a|x|1"} {
		if _, ok := ParseGrant(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestNodeConfigCheck(t *testing.T) {
	for _, c := range []struct {
		cfg  NodeConfig
		want string
	}{
		{NodeConfig{}, "node_id"},
		{NodeConfig{NodeID: "a/b"}, "node_id"},
		{NodeConfig{NodeID: "a", TTL: time.Millisecond}, "cluster.lease_ttl"},
		{NodeConfig{NodeID: "a", TTL: time.Hour}, "cluster.lease_ttl"},
	} {
		if err := c.cfg.Check(time.Second, "/"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error naming %s", c.cfg, err, c.want)
		}
	}
	c := NodeConfig{NodeID: "a", Items: []string{"b", "a"}}
	if err := c.Check(time.Second, "/"); err != nil || c.TTL != DefaultLeaseTTL || c.Clock == nil || c.Logger == nil || c.Items[0] != "a" {
		t.Fatalf("defaults: %+v %v", c, err)
	}
}

// TestPlanWaitsForLiveOwners: an item taken from a live node starts a TTL
// later; one of a dead node at once; items no longer configured go.
func TestPlanWaitsForLiveOwners(t *testing.T) {
	c := NodeConfig{NodeID: "a", TTL: 3 * time.Second, Items: []string{"i1", "i2", "i3", "i4"}}
	if err := c.Check(time.Second, ""); err != nil {
		t.Fatal(err)
	}
	core := NewCore(c)
	now := time.Now()
	cur := map[string]store.Grant{"i1": {Node: "a"}, "i2": {Node: "a"}, "i3": {Node: "dead"}, "i4": {Node: "dead"}, "old": {Node: "a"}}
	grants, drop, moved := core.Plan(map[string]string{"a": "", "b": ""}, cur, now, 7)
	if len(drop) != 1 || drop[0] != "old" || moved == 0 {
		t.Fatalf("drop %v moved %d", drop, moved)
	}
	for it, g := range grants {
		want := now
		if cur[it].Node == "a" {
			want = now.Add(c.TTL)
		}
		if !g.Since.Equal(want) || g.Term != 7 {
			t.Errorf("%s: %+v, want since %s", it, g, want)
		}
	}
}

// TestFollowNeedsALease: without a renewal within 2/3 TTL the node owns
// nothing, whatever the grants say; the watchdog fences it once the lease
// runs out.
func TestFollowNeedsALease(t *testing.T) {
	var owned []string
	c := NodeConfig{NodeID: "a", TTL: 600 * time.Millisecond, Items: []string{"i1"}, OnAssign: func(_ int64, items []string) { owned = items }}
	if err := c.Check(300*time.Millisecond, ""); err != nil {
		t.Fatal(err)
	}
	core := NewCore(c)
	all := map[string]store.Grant{"i1": {Node: "a", Since: time.Now().Add(-time.Second), Term: 1}}
	core.Follow(all)
	if len(owned) != 0 {
		t.Fatalf("owned %v without a lease", owned)
	}
	fenced := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	renewed := false
	go func() {
		defer close(done)
		core.RunRounds(ctx, func(context.Context) {
			if !renewed { // one renewal, then the backend goes silent
				renewed = true
				core.Renew(time.Now())
				core.Follow(all)
			}
		}, func() { core.Drop(); fenced <- struct{}{} })
	}()
	select {
	case <-fenced:
	case <-time.After(5 * time.Second):
		t.Fatal("not fenced 5s after the only renewal")
	}
	cancel()
	<-done
	if len(owned) != 0 || !renewed {
		t.Fatalf("after the fence: owned %v", owned)
	}
}
