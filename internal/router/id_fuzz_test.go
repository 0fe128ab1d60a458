package router

import (
	"errors"
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzParseID: any string either parses to an ID that encodes back to the
// very same string (one spelling per ID: no upper case, no 129th bit), or
// fails with ErrBadID and a readable message.
func FuzzParseID(f *testing.F) {
	s, _ := NewID(time.UnixMilli(1_790_000_000_123), 0xdeadbeef, true)
	for _, seed := range []string{s, "", "0", "7zzzzzzzzzzzzzzzzzzzzzzzzz", "8zzzzzzzzzzzzzzzzzzzzzzzzz",
		"01ARZ3NDEKTSV4RRFFQ69G5FAV", "0000000000000000000000000i", "0000000000000000000000000\xff"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseID(s)
		if err != nil {
			if !errors.Is(err, ErrBadID) {
				t.Fatalf("ParseID(%q): %v does not wrap ErrBadID", s, err)
			}
			if !utf8.ValidString(err.Error()) {
				t.Fatalf("ParseID(%q): message %q is not UTF-8", s, err.Error())
			}
			return
		}
		if len(s) != IDLen {
			t.Fatalf("ParseID(%q) accepted %d characters", s, len(s))
		}
		ms := id.Time.UnixMilli()
		if ms < 0 || ms >= 1<<48 || id.Random >= 1<<48 {
			t.Fatalf("ParseID(%q) = %+v: fields out of their bits", s, id)
		}
		if got := encodeID(id); got != s {
			t.Fatalf("ParseID(%q) encodes back as %q", s, got)
		}
	})
}

// FuzzNewID: an ID made at any time for any shard hash parses back to
// that millisecond and hash, and IDs made at later milliseconds sort after.
func FuzzNewID(f *testing.F) {
	f.Add(int64(1_790_000_000_123), uint32(0xdeadbeef), true, int64(1))
	f.Add(int64(0), uint32(0), false, int64(0))
	f.Add(int64(1<<48-2), uint32(1<<32-1), true, int64(1))
	f.Fuzz(func(t *testing.T, ms int64, hash uint32, keyed bool, step int64) {
		ms &= 1<<48 - 1
		s, id := NewID(time.UnixMilli(ms), hash, keyed)
		p, err := ParseID(s)
		if err != nil {
			t.Fatalf("NewID made %q, which does not parse: %v", s, err)
		}
		if p != id || p.Time.UnixMilli() != ms || (keyed && p.ShardHash != hash) {
			t.Fatalf("NewID(%d, %#x, %v) = %q %+v; parsed back %+v", ms, hash, keyed, s, id, p)
		}
		if step = step & (1<<20 - 1); step > 0 && ms+step < 1<<48 {
			later, _ := NewID(time.UnixMilli(ms+step), hash, keyed)
			if later <= s {
				t.Fatalf("%q made %dms later sorts before or equal to %q", later, step, s)
			}
		}
	})
}

// encodeID is the inverse of ParseID, from the decoded fields.
func encodeID(id ID) string {
	var b [16]byte
	ms := uint64(id.Time.UnixMilli())
	b[0], b[1], b[2], b[3], b[4], b[5] = byte(ms>>40), byte(ms>>32), byte(ms>>24), byte(ms>>16), byte(ms>>8), byte(ms)
	b[6], b[7], b[8], b[9] = byte(id.ShardHash>>24), byte(id.ShardHash>>16), byte(id.ShardHash>>8), byte(id.ShardHash)
	r := id.Random
	b[10], b[11], b[12], b[13], b[14], b[15] = byte(r>>40), byte(r>>32), byte(r>>24), byte(r>>16), byte(r>>8), byte(r)
	return encode(b)
}
