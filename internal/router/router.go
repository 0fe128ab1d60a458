// Package router maps a task to its place in the sharded store and gives
// tasks their IDs.
//
// Routing is the standard two-level scheme (seed 002): with M databases of N
// tables each,
//
//	slot  = hash mod (M·N)
//	db    = slot / N
//	table = slot mod N
//
// Because N divides M·N, table = hash mod N whatever M is: doubling the
// databases (M → 2M) keeps every row in a table with the same index and moves
// it, at most, to database db+M. After such a doubling, database d keeps only
// rows whose new slot lies in [d·N, d·N+N) (CleanupRange); sqlstore's
// expansion (expand.go) copies the rows that move and deletes, in batches,
// the copies left behind.
package router

import (
	"fmt"

	"github.com/cespare/xxhash/v2"
)

// Bounds of the topology; the config, the store and the router check these
// and no other numbers.
const (
	// MaxSlots bounds M·N so a slot always fits the 32-bit shard hash space
	// with room for an even spread.
	MaxSlots = 1 << 20
	// MaxTables bounds N, the task tables per database.
	MaxTables = 4096
	// MaxSegments bounds the scan segments ("house numbers") per table.
	MaxSegments = 256
)

// Topology is the shape of the store: Databases (M) × Tables (N).
type Topology struct {
	Databases int
	Tables    int
}

// Validate checks the topology's bounds.
func (t Topology) Validate() error {
	if t.Databases < 1 {
		return fmt.Errorf("store.databases: need at least one database, have %d", t.Databases)
	}
	if t.Tables < 1 || t.Tables > MaxTables {
		return fmt.Errorf("store.tables: %d is out of range 1..%d", t.Tables, MaxTables)
	}
	if t.Databases*t.Tables > MaxSlots {
		return fmt.Errorf("store: %d databases × %d tables exceeds %d slots", t.Databases, t.Tables, MaxSlots)
	}
	return nil
}

// Slots is M·N.
func (t Topology) Slots() int { return t.Databases * t.Tables }

// Slot returns hash mod M·N.
func (t Topology) Slot(hash uint32) int { return int(uint64(hash) % uint64(t.Slots())) }

// Locate returns the database and table that hold a task with this shard hash.
func (t Topology) Locate(hash uint32) (db, table int) {
	s := t.Slot(hash)
	return s / t.Tables, s % t.Tables
}

// CleanupRange describes, for database db of t, the slot range the database
// keeps: a row belongs there iff lo <= shard_hash % mod <= hi. After growing
// the topology, run in every table of db:
//
//	DELETE FROM <table> WHERE shard_hash % mod NOT BETWEEN lo AND hi
//
// (all three engines evaluate % on non-negative integers the same way).
func (t Topology) CleanupRange(db int) (mod, lo, hi int64) {
	return int64(t.Slots()), int64(db * t.Tables), int64(db*t.Tables + t.Tables - 1)
}

// HashKey is the shard hash of a key: xxHash64 folded to 32 bits.
//
// Why xxHash64: it is stable across processes, machines and Go versions (a
// fixed algorithm with a fixed seed, unlike Go's map hash), it passes
// SMHasher's distribution tests, so consecutive and common-prefix keys such
// as "order-000001" spread evenly (no "genes" from a prefix), and it hashes
// a 16-byte key in a few nanoseconds. Folding the halves keeps every input
// bit in the 32 bits we store and route on.
func HashKey(key string) uint32 {
	h := xxhash.Sum64String(key)
	return uint32(h) ^ uint32(h>>32)
}

// HashKeyBytes is HashKey for a key held in bytes (no allocation).
func HashKeyBytes(key []byte) uint32 {
	h := xxhash.Sum64(key)
	return uint32(h) ^ uint32(h>>32)
}
