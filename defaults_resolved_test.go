package ontime

import (
	"context"
	"testing"
)

// TestUnsetDefaultsResolved: store.tables and hot.max_entries left unset
// are settled when the node opens its store, and Config reports what the
// node runs with: a new SQLite store's one table, the memory tier's
// 250,000 entries; the redis tier's default is 1,000,000.
func TestUnsetDefaultsResolved(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	cfg.DataDir = t.TempDir()
	if cfg.Store.Tables != 0 || cfg.Hot.MaxEntries != 0 {
		t.Fatalf("DefaultConfig sets store.tables %d, hot.max_entries %d; want both unset", cfg.Store.Tables, cfg.Hot.MaxEntries)
	}
	n, err := NewNode(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Stop(context.Background()) })
	got := n.Config()
	if got.Store.Tables != DefaultTables || got.Hot.MaxEntries != DefaultMemoryMaxEntries {
		t.Fatalf("node runs with store.tables %d, hot.max_entries %d; want %d, %d",
			got.Store.Tables, got.Hot.MaxEntries, DefaultTables, DefaultMemoryMaxEntries)
	}
	for tier, want := range map[string]int{"memory": DefaultMemoryMaxEntries, "redis": DefaultMaxEntries} {
		if got := (HotConfig{Tier: tier}).maxEntries(); got != want {
			t.Errorf("hot.max_entries unset with the %s tier: %d, want %d", tier, got, want)
		}
	}
	if got := (HotConfig{Tier: "redis", MaxEntries: 7}).maxEntries(); got != 7 {
		t.Errorf("hot.max_entries 7 set: %d", got)
	}
	bad := DefaultConfig()
	bad.Hot.MaxEntries = -1
	if err := bad.Validate(); err == nil {
		t.Error("hot.max_entries -1 accepted")
	}
}
