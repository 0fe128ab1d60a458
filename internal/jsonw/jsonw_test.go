package jsonw

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// FuzzAppendStringIsEncodingJSON: AppendString writes json.Marshal's bytes
// for any string, valid UTF-8 or not.
func FuzzAppendStringIsEncodingJSON(f *testing.F) {
	for _, s := range []string{"", "a", `"\`, "<>&", "\x00\x1f\x7f\b\f\n\r\t", "\u2028\u2029", "\xff\xc3", "日本😀"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := AppendString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("%q: got %s want %s", s, got, want)
		}
	})
}

// FuzzAppendRawIsEncodingJSON: AppendRaw writes json.Marshal's bytes for a
// valid raw value and declines an invalid one, as json.Marshal fails.
func FuzzAppendRawIsEncodingJSON(f *testing.F) {
	for _, s := range []string{"null", `{ "a" : [1, 2] }`, `"<\u2028>"`, "\"\u2028\"", `{bad`, "", " 1 "} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		want, err := json.Marshal(json.RawMessage(raw))
		got, ok := AppendRaw(nil, raw)
		if ok != (err == nil) || ok && !bytes.Equal(got, want) {
			t.Fatalf("%q: got %s %v, json.Marshal %s %v", raw, got, ok, want, err)
		}
	})
}

func TestAppendTimeIsMarshalJSON(t *testing.T) {
	for _, tm := range []time.Time{{}, time.Date(2026, 11, 23, 18, 0, 0, 0, time.UTC), time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(2026, 1, 2, 3, 4, 5, 120000000, time.UTC)} {
		want, _ := tm.MarshalJSON()
		if got, ok := AppendTime(nil, tm); !ok || !bytes.Equal(got, want) {
			t.Errorf("%v: got %s %v want %s", tm, got, ok, want)
		}
	}
	for _, tm := range []time.Time{time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC), time.Now()} {
		if _, ok := AppendTime(nil, tm); ok {
			t.Errorf("%v: AppendTime took a time it does not vouch for (out of range or not UTC)", tm)
		}
	}
}
