package cluster

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/store"
)

// LetGo names only what node owned, that another node now holds from a
// later time, and that may be handed over at once.
func TestLetGo(t *testing.T) {
	now := time.Unix(1000, 0)
	later, earlier := now.Add(10*time.Second), now.Add(-time.Second)
	grants := map[string]store.Grant{
		"0.0.0": {Node: "b", Since: later}, // moved to b, waiting: let go
		"0.1.0": {Node: "b", Since: now},   // b already owns it
		"0.2.0": {Node: "a", Since: later}, // still a's (a later grant to a itself)
		"0.3.0": {Node: "c", Since: later}, // a never owned it
		"job.x": {Node: "b", Since: later}, // moved, but not to hand over at once
		"0.4.0": {Node: "b", Since: earlier},
	}
	before := []string{"0.0.0", "0.1.0", "0.2.0", "job.x", "0.4.0", "0.5.0"} // 0.5.0: dropped from the assignment
	tables := func(it string) bool { return !strings.HasPrefix(it, "job.") }
	if got := LetGo(before, grants, "a", now, tables); !slices.Equal(got, []string{"0.0.0"}) {
		t.Fatalf("LetGo = %v, want [0.0.0]", got)
	}
	if got := LetGo(before, grants, "a", now, nil); got != nil {
		t.Fatalf("LetGo with no eager items = %v, want none", got)
	}
}
