// Package redis is the hot tier for clusters: slotted Redis sorted sets
// with the two-phase store → prepare → ack protocol of seed 001.
//
// Layout, for key prefix P, topic T and slot i = CRC32(task id) mod S:
//
//	P:{T:i}:store    sorted set: task id, scored by due time (unix µs)
//	P:{T:i}:prepare  sorted set: popped task id, scored by visibility deadline
//	P:{T:i}:tok      hash: task id → "token|priority|due µs" (the claim it belongs to)
//	P:{T:i}:ready    sorted set: due task id in a backlog, scored by rank (task.Rank, µs)
//	P:slots          set of "T|i": every slot that ever held an entry
//	P:wake           pub/sub channel: "T|i|due" when a slot gets an earlier head
//
// The {T:i} hash tag keeps one slot's three keys on one Redis Cluster node,
// so each Lua script (scripts.go) touches one node atomically.
package redis

import (
	"hash/crc32"
	"strconv"
	"strings"
)

// slotKey names one (topic, slot).
type slotKey struct {
	topic string
	slot  int
}

func (k slotKey) tag(prefix string) string {
	return prefix + ":{" + k.topic + ":" + strconv.Itoa(k.slot) + "}"
}

func (k slotKey) store(prefix string) string   { return k.tag(prefix) + ":store" }
func (k slotKey) prepare(prefix string) string { return k.tag(prefix) + ":prepare" }
func (k slotKey) tokens(prefix string) string  { return k.tag(prefix) + ":tok" }
func (k slotKey) ready(prefix string) string   { return k.tag(prefix) + ":ready" }

// registryMember is how a slot is listed in P:slots.
func (k slotKey) registryMember() string { return k.topic + "|" + strconv.Itoa(k.slot) }

func registryKey(prefix string) string { return prefix + ":slots" }
func wakeChannel(prefix string) string { return prefix + ":wake" }

// epochKey holds a random value written once per life of the tier's data:
// when it is gone or changed, Redis lost (FLUSHALL, a restart without
// persistence, a failover to an empty replica) what the nodes had added.
func epochKey(prefix string) string { return prefix + ":epoch" }

func parseRegistryMember(s string) (slotKey, bool) {
	topic, slot, ok := strings.Cut(s, "|")
	if !ok {
		return slotKey{}, false
	}
	n, err := strconv.Atoi(slot)
	if err != nil || n < 0 {
		return slotKey{}, false
	}
	return slotKey{topic: topic, slot: n}, true
}

// slotOf is seed 001's index = CRC32(id) mod S.
func slotOf(id string, slots int) int {
	return int(crc32.ChecksumIEEE([]byte(id)) % uint32(slots))
}
