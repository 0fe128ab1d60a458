package router

import (
	"testing"
	"time"
)

// WithShardHash changes the route and nothing else: the same time, the
// same random bits (so the same segment), and it parses back.
func TestWithShardHash(t *testing.T) {
	now := time.UnixMilli(time.Now().UnixMilli())
	for range 1000 {
		s, id := NewID(now, 0, false)
		want := id.ShardHash ^ 0x9e3779b9
		r, err := WithShardHash(s, want)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseID(r)
		if err != nil {
			t.Fatal(err)
		}
		if got.ShardHash != want || !got.Time.Equal(id.Time) || got.Random != id.Random {
			t.Fatalf("%s → %s: %+v, want time %v hash %d random %d", s, r, got, id.Time, want, id.Random)
		}
		if back, _ := WithShardHash(r, id.ShardHash); back != s {
			t.Fatalf("%s → %s → %s", s, r, back)
		}
	}
	if _, err := WithShardHash("nope", 1); err == nil {
		t.Fatal("a malformed ID was rehashed")
	}
}
