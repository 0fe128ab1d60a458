package router

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestIDRoundTrip(t *testing.T) {
	now := time.UnixMilli(1_790_000_000_123)
	s, id := NewID(now, 0xdeadbeef, true)
	if len(s) != IDLen || strings.ToLower(s) != s {
		t.Fatalf("id %q: want %d lower-case characters", s, IDLen)
	}
	p, err := ParseID(s)
	if err != nil {
		t.Fatal(err)
	}
	if p != id || p.ShardHash != 0xdeadbeef || !p.Time.Equal(now) {
		t.Fatalf("parsed %+v, made %+v", p, id)
	}
	// Keyless IDs draw their shard hash at random.
	seen := map[uint32]bool{}
	for range 100 {
		_, k := NewID(now, 0, false)
		seen[k.ShardHash] = true
	}
	if len(seen) < 95 {
		t.Fatalf("keyless shard hashes repeat: %d distinct of 100", len(seen))
	}
}

func TestIDsUniqueAcrossGoroutinesAndTimeOrdered(t *testing.T) {
	var mu sync.Mutex
	all := map[string]bool{}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := make([]string, 0, 5000)
			for range 5000 {
				s, _ := NewID(time.Now(), uint32(g), true)
				local = append(local, s)
			}
			mu.Lock()
			for _, s := range local {
				if all[s] {
					t.Errorf("duplicate id %s", s)
				}
				all[s] = true
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	base := time.UnixMilli(1_800_000_000_000)
	var ids []string
	for i := range 1000 {
		s, _ := NewID(base.Add(time.Duration(i)*time.Millisecond), rand.Uint32(), true)
		ids = append(ids, s)
	}
	if !sort.StringsAreSorted(ids) {
		t.Fatal("IDs of increasing milliseconds do not sort as strings")
	}
}

func TestParseIDRejects(t *testing.T) {
	good, _ := NewID(time.Now(), 1, true)
	for name, s := range map[string]string{
		"empty":      "",
		"short":      good[:25],
		"long":       good + "0",
		"upper case": strings.ToUpper(good),
		"letter i":   "i" + good[1:],
		"letter u":   good[:5] + "u" + good[6:],
		"overflow":   "8" + good[1:],
		"slash":      good[:10] + "/" + good[11:],
	} {
		if _, err := ParseID(s); !errors.Is(err, ErrBadID) {
			t.Errorf("%s: ParseID(%q) = %v, want ErrBadID", name, s, err)
		}
	}
}

// TestDoublingKeepsTables: over a million keys, doubling the databases keeps
// every key's table index and moves it only from db to db or db+M; and the
// cleanup range of each database keeps exactly the keys Locate puts there,
// which is what makes one DELETE per table a correct cleanup.
func TestDoublingKeepsTables(t *testing.T) {
	keys := 1_000_000
	if testing.Short() {
		keys = 100_000
	}
	hashes := make([]uint32, keys)
	for i := range hashes {
		hashes[i] = HashKey(fmt.Sprintf("order-%d", i))
	}
	for _, m := range []int{1, 2, 4, 8} {
		for _, n := range []int{1, 16, 100} {
			old, grown := Topology{Databases: m, Tables: n}, Topology{Databases: 2 * m, Tables: n}
			for _, h := range hashes {
				db, table := old.Locate(h)
				db2, table2 := grown.Locate(h)
				if table2 != table || (db2 != db && db2 != db+m) {
					t.Fatalf("M=%d N=%d hash %d: (%d,%d) → (%d,%d)", m, n, h, db, table, db2, table2)
				}
				mod, lo, hi := grown.CleanupRange(db2)
				if v := int64(h) % mod; v < lo || v > hi {
					t.Fatalf("cleanup of db %d would delete a row it owns", db2)
				}
				if db2 != db {
					mod, lo, hi := grown.CleanupRange(db)
					if v := int64(h) % mod; v >= lo && v <= hi {
						t.Fatalf("cleanup of db %d would keep a row that moved to %d", db, db2)
					}
				}
			}
		}
	}
}

// TestHashStable pins HashKey's values: a change of algorithm or library
// would move every stored task to another table.
func TestHashStable(t *testing.T) {
	for key, want := range map[string]uint32{
		"":          0xbe9e32ae, // xxh64("") = 0xef46db3751d8e999, folded
		"order-42":  0x1798710e,
		"user:1001": 0x6cd50058,
	} {
		if got := HashKey(key); got != want {
			t.Errorf("HashKey(%q) = %#x, want %#x", key, got, want)
		}
		if got := HashKeyBytes([]byte(key)); got != HashKey(key) {
			t.Errorf("HashKeyBytes and HashKey disagree on %q", key)
		}
	}
	if HashKey("order-42") == HashKey("order-43") {
		t.Fatal("neighbouring keys collide")
	}
}

func TestTopologyValidate(t *testing.T) {
	for _, bad := range []Topology{{0, 1}, {1, 0}, {1, 5000}, {2048, 1024}} {
		if bad.Validate() == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	if (Topology{8, 100}).Validate() != nil {
		t.Error("8×100 rejected")
	}
}

func BenchmarkHashKey(b *testing.B) {
	for b.Loop() {
		HashKey("a1B2c3D4e5F6g7H8")
	}
}

func BenchmarkNewID(b *testing.B) {
	now := time.Now()
	for b.Loop() {
		NewID(now, 1, true)
	}
}

func BenchmarkParseID(b *testing.B) {
	s, _ := NewID(time.Now(), 1, true)
	for b.Loop() {
		_, _ = ParseID(s)
	}
}
