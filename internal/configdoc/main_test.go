package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The checked-in reference is exactly what the generator makes from the
// code: a key added, a default or a bound changed without running
// `go run ./internal/configdoc` fails here.
func TestConfigDocIsCurrent(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	want, err := generate(root)
	if err != nil {
		t.Fatal(err)
	}
	have, err := os.ReadFile(filepath.Join(root, page))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, want) {
		t.Fatalf("%s is stale: run `go run ./internal/configdoc` and commit the result", page)
	}
	// Spot checks that the three sources were read.
	for _, s := range []string{
		"| `hot.window` | duration | `30s` | 100ms..24h |",
		"| `delivery.max_attempts` | integer | `25` | 1..1000 | `ONTIME_DELIVERY_MAX_ATTEMPTS` |",
		"| `log_level` | string | `info` | one of debug, info, warn, error |",
		"`topics.NAME.",
		"`jobs[].",
		"| `jobs[].source.page` | integer |  | 1..10000 |",
		"| `destinations.NAME.batch` | integer |  | 1..1000",
	} {
		if !bytes.Contains(want, []byte(s)) {
			t.Errorf("generated reference lacks %q", s)
		}
	}
	if strings.Contains(string(want), "0m0s") {
		t.Errorf("a duration is written the long way (1h0m0s)")
	}
}
