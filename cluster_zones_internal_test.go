package ontime

import "testing"

// itemZone: task items take store.zones by database, a configured scan
// job's items its source.zones, anything else none.
func TestItemZone(t *testing.T) {
	n := &Node{cfg: Config{Store: StoreConfig{Zones: []string{"dc-a", "dc-b"}},
		Jobs: []JobConfig{{Name: "bills", Source: JobSourceConfig{Zones: []string{"dc-b", "dc-c"}}}, {Name: "plain"}}}}
	for key, want := range map[string]string{
		"0.3.1":             "dc-a",
		"1.0.0":             "dc-b",
		"2.0.0":             "",
		"job:bills:0.1.0":   "dc-b",
		"job:bills:1.0.3":   "dc-c",
		"job:plain:0.0.0":   "",
		"job:gojob:0":       "",
		"job:unknown:1.0.0": "",
	} {
		if got := n.itemZone(key); got != want {
			t.Errorf("itemZone(%q) = %q, want %q", key, got, want)
		}
	}
}
