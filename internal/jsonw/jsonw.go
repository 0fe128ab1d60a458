// Package jsonw appends JSON values exactly as encoding/json writes them
// (HTML escaping included), without reflection, for the hand-written
// encoders of the hot API bodies (internal/api's answers, the client's
// requests). Each appender either writes encoding/json's bytes or says it
// cannot, so that its caller can leave that value to encoding/json.
package jsonw

import (
	"bytes"
	"encoding/json"
	"time"
	"unicode/utf8"
)

// AppendTime is time.Time's MarshalJSON (RFC 3339 with nanoseconds,
// trailing zeros cut) for UTC times (View's) of the years it accepts.
func AppendTime(b []byte, t time.Time) ([]byte, bool) {
	if y := t.Year(); y < 0 || y > 9999 || t.Location() != time.UTC {
		return b, false
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), true
}

// AppendRaw is json.RawMessage as encoding/json writes it: null when
// empty, else compacted with <, >, &, U+2028 and U+2029 escaped. A payload
// with none of those bytes and no white space is already in that form.
func AppendRaw(b []byte, raw json.RawMessage) ([]byte, bool) {
	if raw == nil {
		return append(b, "null"...), true
	}
	if !json.Valid(raw) {
		return b, false
	}
	if compactSafe(raw) {
		return append(b, raw...), true
	}
	var c bytes.Buffer
	if json.Compact(&c, raw) != nil {
		return b, false
	}
	buf := bytes.NewBuffer(b)
	json.HTMLEscape(buf, c.Bytes())
	return buf.Bytes(), true
}

// AppendValidRaw is AppendRaw for a raw value its caller has checked with
// json.Valid already (a payload just submitted): it is not read a second
// time for that.
func AppendValidRaw(b []byte, raw json.RawMessage) ([]byte, bool) {
	if raw == nil {
		return append(b, "null"...), true
	}
	if compactSafe(raw) {
		return append(b, raw...), true
	}
	return AppendRaw(b, raw)
}

// compactSafe reports a JSON text with no white space and none of the
// bytes encoding/json escapes in it (<, >, &, and 0xE2, which begins
// U+2028 and U+2029): one it writes as it is.
func compactSafe(raw []byte) bool {
	for _, c := range raw {
		switch c {
		case ' ', '\t', '\r', '\n', '<', '>', '&', 0xe2:
			return false
		}
	}
	return true
}

// htmlSafe reports the ASCII bytes encoding/json writes as they are in a
// string when it escapes HTML: printable, and not ", \, <, > or &.
func htmlSafe(c byte) bool {
	return c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
}

const hexDigits = "0123456789abcdef"

// AppendString is encoding/json's string encoding with HTML escaping:
// invalid UTF-8 becomes U+FFFD, U+2028 and U+2029 are escaped.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if htmlSafe(c) {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
