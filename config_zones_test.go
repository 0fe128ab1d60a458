package ontime_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ontimehq/ontime"
)

// TestZoneConfigKeys: cluster.zone and store.zones are validated at load,
// each error naming its key.
func TestZoneConfigKeys(t *testing.T) {
	dir := t.TempDir()
	load := func(body string) (ontime.Config, error) {
		f := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return ontime.LoadConfig(f, nil)
	}
	two := "store: {driver: postgres, databases: [\"postgres://h/a\", \"postgres://h/b\"], zones: "
	for _, ok := range []string{
		"cluster: {zone: eu-west-1}",
		two + "[dc-a, dc-b]}\ncluster: {coordinator: database, zone: dc-b}",
		two + "[dc-a, dc-a]}",
	} {
		if _, err := load(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	c, err := load(two + "[dc-a, dc-b]}\ncluster: {zone: dc-a}")
	if err != nil || c.Cluster.Zone != "dc-a" || strings.Join(c.Store.Zones, ",") != "dc-a,dc-b" {
		t.Fatalf("loaded %q %q, %v", c.Cluster.Zone, c.Store.Zones, err)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"cluster: {zone: EU}", "cluster.zone: "},
		{"cluster: {zone: \"dc a\"}", "cluster.zone: "},
		{"cluster: {zone: " + strings.Repeat("z", 33) + "}", "cluster.zone: "},
		{two + "[dc-a]}", "store.zones: "},
		{two + "[dc-a, dc-b, dc-c]}", "store.zones: "},
		{two + "[dc-a, \"\"]}", "store.zones[1]: "},
		{two + "[dc-a, Dc_B]}", "store.zones[1]: "},
	} {
		if _, err := load(tc.yaml); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want %q", tc.yaml, err, tc.want)
		}
	}
}
