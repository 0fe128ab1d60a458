package router

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// A task ID is 16 bytes written as 26 characters of Crockford's base32 in
// lower case (URL-safe, no padding):
//
//	bytes 0–5   milliseconds since the Unix epoch, big-endian (time order)
//	bytes 6–9   the task's shard hash, big-endian (its route)
//	bytes 10–15 random
//
// IDs sort by creation time as strings, need no coordination between nodes
// (48 random bits per millisecond per shard hash), and carry the shard hash
// rather than the slot, so an ID still finds its row after the topology grows.

// IDLen is the length of an encoded ID.
const IDLen = 26

const alphabet = "0123456789abcdefghjkmnpqrstvwxyz"

var decodeMap = func() [256]byte {
	var m [256]byte
	for i := range m {
		m[i] = 0xff
	}
	for i := 0; i < len(alphabet); i++ {
		m[alphabet[i]] = byte(i)
	}
	return m
}()

// ErrBadID is wrapped by every ID parsing error.
var ErrBadID = errors.New("malformed task id")

// ID is a decoded task ID.
type ID struct {
	Time      time.Time
	ShardHash uint32
	Random    uint64 // 48 bits
}

// NewID makes an ID for a task created at now. A task without a key is
// routed by its ID: pass keyed=false and the shard hash is drawn at random
// (the ID's own hash). With keyed=true, hash is the key's HashKey.
func NewID(now time.Time, hash uint32, keyed bool) (string, ID) {
	var b [16]byte
	ms := uint64(now.UnixMilli())
	b[0], b[1], b[2], b[3], b[4], b[5] = byte(ms>>40), byte(ms>>32), byte(ms>>24), byte(ms>>16), byte(ms>>8), byte(ms)
	var r [10]byte
	_, _ = rand.Read(r[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	if !keyed {
		hash = binary.BigEndian.Uint32(r[6:10])
	}
	binary.BigEndian.PutUint32(b[6:10], hash)
	copy(b[10:16], r[:6])
	return encode(b), ID{Time: time.UnixMilli(int64(ms)), ShardHash: hash, Random: uint64(r[0])<<40 | uint64(r[1])<<32 | uint64(binary.BigEndian.Uint32(r[2:6]))}
}

// Segment is the scan segment ("house number") of a task among segs; it
// comes from the ID's random bits, independent of the shard hash, so
// segments split every table evenly.
func (id ID) Segment(segs int) int { return int(id.Random % uint64(segs)) }

func encode(b [16]byte) string {
	// 128 bits → 26 symbols of 5 bits; the first symbol takes the top 3 bits.
	hi := binary.BigEndian.Uint64(b[0:8])
	lo := binary.BigEndian.Uint64(b[8:16])
	var out [IDLen]byte
	for i := IDLen - 1; i >= 0; i-- {
		out[i] = alphabet[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(out[:])
}

// ParseID decodes and checks an ID.
func ParseID(s string) (ID, error) {
	if len(s) != IDLen {
		return ID{}, fmt.Errorf("%w: %q has %d characters, want %d", ErrBadID, truncate(s), len(s), IDLen)
	}
	var hi, lo uint64
	for i := 0; i < IDLen; i++ {
		v := decodeMap[s[i]]
		if v == 0xff {
			return ID{}, fmt.Errorf("%w: %q has %q at position %d", ErrBadID, truncate(s), s[i], i)
		}
		if i == 0 && v > 7 {
			return ID{}, fmt.Errorf("%w: %q overflows 128 bits", ErrBadID, s)
		}
		hi = hi<<5 | lo>>59
		lo = lo<<5 | uint64(v)
	}
	var b [16]byte
	binary.BigEndian.PutUint64(b[0:8], hi)
	binary.BigEndian.PutUint64(b[8:16], lo)
	ms := uint64(b[0])<<40 | uint64(b[1])<<32 | uint64(binary.BigEndian.Uint32(b[2:6]))
	return ID{
		Time:      time.UnixMilli(int64(ms)),
		ShardHash: binary.BigEndian.Uint32(b[6:10]),
		Random:    uint64(b[10])<<40 | uint64(b[11])<<32 | uint64(binary.BigEndian.Uint32(b[12:16])),
	}, nil
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// WithShardHash returns ID s routed by hash instead: the same time and
// random bits, another shard hash. For IDs this node has just made and
// not yet given out (see submit's group commit).
func WithShardHash(s string, hash uint32) (string, error) {
	id, err := ParseID(s)
	if err != nil {
		return "", err
	}
	var b [16]byte
	ms := uint64(id.Time.UnixMilli())
	b[0], b[1], b[2], b[3], b[4], b[5] = byte(ms>>40), byte(ms>>32), byte(ms>>24), byte(ms>>16), byte(ms>>8), byte(ms)
	binary.BigEndian.PutUint32(b[6:10], hash)
	b[10], b[11] = byte(id.Random>>40), byte(id.Random>>32)
	binary.BigEndian.PutUint32(b[12:16], uint32(id.Random))
	return encode(b), nil
}
