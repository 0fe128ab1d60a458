package cluster

import (
	"testing"

	"github.com/ontimehq/ontime/internal/store"
)

func TestItemKeyRoundTrip(t *testing.T) {
	t.Parallel()
	for _, it := range []store.Item{{}, {DB: 1, Table: 2, Segment: 3}, {DB: 15, Table: 127, Segment: 1023}} {
		k := ItemKey(it)
		got, ok := ParseItemKey(k)
		if !ok || got != it {
			t.Errorf("ParseItemKey(%q) = %+v, %v; want %+v", k, got, ok, it)
		}
	}
	if k := ItemKey(store.Item{DB: 1, Table: 2, Segment: 3}); k != "1.2.3" {
		t.Errorf("ItemKey = %q, want 1.2.3", k)
	}
}

// Keys that are not a task store's item — a scan job's, or garbage — are
// told apart: the node hands only task items to its scanner.
func TestParseItemKeyRejects(t *testing.T) {
	t.Parallel()
	for _, k := range []string{"", "1.2", "1.2.3.4", "a.b.c", "1..3", "job:bill:0.1.0", "job:bill:0", " 1.2.3"} {
		if it, ok := ParseItemKey(k); ok {
			t.Errorf("ParseItemKey(%q) = %+v, true; want false", k, it)
		}
	}
}
