// Package jsonr reads JSON without reflection, for the hand-written
// decoders of the hot API bodies: internal/api's task requests and the
// client's task answers. It is jsonw's other half, on the same terms: it
// reads only the plain forms (strings without escapes, whole numbers) and
// says when it cannot, so that its caller leaves the whole body to
// encoding/json, whose behaviour and errors stay the only ones a user sees.
// What a field holds (a time, a payload to check or copy) is the caller's.
package jsonr

// Scanner reads one JSON text. It does not check UTF-8: its callers do,
// once for the whole body.
type Scanner struct {
	b []byte
	i int
}

// New returns a Scanner at the start of b.
func New(b []byte) Scanner { return Scanner{b: b} }

// WS skips white space.
func (s *Scanner) WS() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// eat skips white space, then c if it is next.
func (s *Scanner) eat(c byte) bool {
	s.WS()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// End reports whether only white space is left.
func (s *Scanner) End() bool {
	s.WS()
	return s.i == len(s.b)
}

// Object reads an object, calling field for each member with the scanner
// at its value; field returns false to give up. Repeated names are the
// caller's to notice: encoding/json merges them.
func (s *Scanner) Object(field func(name []byte) bool) bool {
	if !s.eat('{') {
		return false
	}
	if s.eat('}') {
		return true
	}
	for {
		s.WS()
		name, ok := s.Str()
		if !ok || !s.eat(':') {
			return false
		}
		s.WS()
		if !field(name) {
			return false
		}
		if s.eat('}') {
			return true
		}
		if !s.eat(',') {
			return false
		}
	}
}

// Array reads an array, calling elem for each element with the scanner at
// it; elem returns false to give up.
func (s *Scanner) Array(elem func() bool) bool {
	if !s.eat('[') {
		return false
	}
	if s.eat(']') {
		return true
	}
	for {
		s.WS()
		if !elem() {
			return false
		}
		if s.eat(']') {
			return true
		}
		if !s.eat(',') {
			return false
		}
	}
}

// Str reads a string with no escapes and no control characters: the bytes
// between its quotes, which share the text's.
func (s *Scanner) Str() ([]byte, bool) {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, false
	}
	s.i++
	start := s.i
	for s.i < len(s.b) {
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			return s.b[start : s.i-1], true
		case c == '\\' || c < 0x20:
			return nil, false
		}
		s.i++
	}
	return nil, false
}

// Bool reads true or false, followed by white space, a delimiter or the
// end (what encoding/json puts in a bool; null, which it skips, is
// declined).
func (s *Scanner) Bool() (v, ok bool) {
	rest := s.b[s.i:]
	switch {
	case len(rest) >= 4 && string(rest[:4]) == "true":
		v, s.i = true, s.i+4
	case len(rest) >= 5 && string(rest[:5]) == "false":
		s.i += 5
	default:
		return false, false
	}
	if s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r', ',', '}', ']':
		default: // "truex": not a literal
			return false, false
		}
	}
	return v, true
}

// Text is Str as a string.
func (s *Scanner) Text() (string, bool) {
	b, ok := s.Str()
	return string(b), ok
}

// Int reads -?(0|[1-9][0-9]*) of at most 15 digits, followed by white
// space, a delimiter or the end: what encoding/json puts in an int without
// a question (no fraction, no exponent, no overflow).
func (s *Scanner) Int() (int, bool) {
	neg := s.i < len(s.b) && s.b[s.i] == '-'
	if neg {
		s.i++
	}
	start, n := s.i, 0
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		n = n*10 + int(s.b[s.i]-'0')
		s.i++
	}
	digits := s.i - start
	if digits == 0 || digits > 15 || (digits > 1 && s.b[start] == '0') {
		return 0, false
	}
	if s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r', ',', '}', ']':
		default: // a fraction or an exponent
			return 0, false
		}
	}
	if neg {
		n = -n
	}
	return n, true
}

// Value moves past one JSON value and returns its bytes, which share the
// text's. It finds where the value ends by its strings and brackets only:
// the caller checks that it is valid JSON (json.Valid), unless it knows
// the whole text is.
func (s *Scanner) Value() ([]byte, bool) {
	start := s.i
	depth := 0
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case '"':
			s.i++
			for s.i < len(s.b) && s.b[s.i] != '"' {
				if s.b[s.i] == '\\' {
					s.i++
				}
				s.i++
			}
			if s.i >= len(s.b) {
				return nil, false
			}
			s.i++
			if depth == 0 {
				return s.b[start:s.i], true
			}
		case '{', '[':
			depth++
			s.i++
		case '}', ']':
			if depth == 0 {
				return s.value(start)
			}
			depth--
			s.i++
			if depth == 0 {
				return s.b[start:s.i], true
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return s.value(start)
			}
			s.i++
		default:
			s.i++
		}
	}
	if depth != 0 {
		return nil, false
	}
	return s.value(start)
}

// value is the bare value (a number, true, false, null) from start to
// here, if there is one.
func (s *Scanner) value(start int) ([]byte, bool) {
	if s.i == start {
		return nil, false
	}
	return s.b[start:s.i], true
}
