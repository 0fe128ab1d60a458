package api

import (
	"encoding/json"

	"github.com/ontimehq/ontime/apiv1"
)

// fastDecodeTask decodes the common task body without encoding/json's
// reflection: an object of the exact field names, string values without
// escapes, a whole-number max_attempts and any valid JSON payload. It
// vouches only for what it fully understands: anything else (an escape, a
// null, a name in other case, an unknown field, a syntax error) returns
// false with v untouched, and encoding/json decodes the body, so every
// error and every corner of its behaviour stays its own. raw must be valid
// UTF-8 (checkUTF8). With valid set, the caller vouches that raw is valid
// JSON (a decoder's or fastBatch's value), and the payload is not checked a
// second time. The payload shares raw's bytes.
func fastDecodeTask(raw []byte, v *apiv1.TaskRequest, valid bool) bool {
	var out apiv1.TaskRequest
	p := fastParser{b: raw, valid: valid}
	p.ws()
	if !p.eat('{') {
		return false
	}
	p.ws()
	if p.eat('}') {
		return p.end(v, &out)
	}
	for {
		name, ok := p.str()
		if !ok {
			return false
		}
		p.ws()
		if !p.eat(':') {
			return false
		}
		p.ws()
		switch string(name) { // no allocation: the compiler compares in place
		case "topic":
			out.Topic, ok = p.strValue()
		case "key":
			out.Key, ok = p.strValue()
		case "due_at":
			out.DueAt, ok = p.strValue()
		case "delay":
			out.Delay, ok = p.strValue()
		case "target":
			out.Target, ok = p.strValue()
		case "if_exists":
			out.IfExists, ok = p.strValue()
		case "max_attempts":
			out.MaxAttempts, ok = p.int()
		case "payload":
			out.Payload, ok = p.value()
		default:
			return false
		}
		if !ok {
			return false
		}
		p.ws()
		if p.eat('}') {
			return p.end(v, &out)
		}
		if !p.eat(',') {
			return false
		}
		p.ws()
	}
}

type fastParser struct {
	b     []byte
	i     int
	valid bool // b is known to be valid JSON
}

func (p *fastParser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *fastParser) eat(c byte) bool {
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// end accepts the object if nothing but white space follows it.
func (p *fastParser) end(v, out *apiv1.TaskRequest) bool {
	p.ws()
	if p.i != len(p.b) {
		return false
	}
	*v = *out
	return true
}

// str reads a string with no escapes and no control characters, the
// bytes between its quotes.
func (p *fastParser) str() ([]byte, bool) {
	if !p.eat('"') {
		return nil, false
	}
	start := p.i
	for p.i < len(p.b) {
		switch c := p.b[p.i]; {
		case c == '"':
			s := p.b[start:p.i]
			p.i++
			return s, true
		case c == '\\' || c < 0x20:
			return nil, false
		}
		p.i++
	}
	return nil, false
}

func (p *fastParser) strValue() (string, bool) {
	s, ok := p.str()
	return string(s), ok
}

// int reads -?(0|[1-9][0-9]*) of at most 15 digits, followed by a
// delimiter: what encoding/json puts in an int without a question.
func (p *fastParser) int() (int, bool) {
	neg := p.eat('-')
	start := p.i
	n := 0
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		n = n*10 + int(p.b[p.i]-'0')
		p.i++
	}
	digits := p.i - start
	if digits == 0 || digits > 15 || (digits > 1 && p.b[start] == '0') || !p.delim() {
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}

// delim reports whether the value just read ends here: white space, a
// comma, a closing brace or the end.
func (p *fastParser) delim() bool {
	if p.i == len(p.b) {
		return true
	}
	switch p.b[p.i] {
	case ' ', '\t', '\n', '\r', ',', '}':
		return true
	}
	return false
}

// value reads any JSON value, checked with json.Valid unless the whole
// text is known to be valid, as raw bytes.
func (p *fastParser) value() (json.RawMessage, bool) {
	start := p.i
	if !p.skip() {
		return nil, false
	}
	v := p.b[start:p.i]
	if !p.valid && !json.Valid(v) {
		return nil, false
	}
	return json.RawMessage(v), true
}

// skip moves past one JSON value, finding where it ends by its strings and
// brackets only; the caller checks that it is valid.
func (p *fastParser) skip() bool {
	start := p.i
	depth := 0
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case '"':
			p.i++
			for p.i < len(p.b) && p.b[p.i] != '"' {
				if p.b[p.i] == '\\' {
					p.i++
				}
				p.i++
			}
			if p.i >= len(p.b) {
				return false
			}
			p.i++
			if depth == 0 {
				return true
			}
		case '{', '[':
			depth++
			p.i++
		case '}', ']':
			if depth == 0 {
				return p.i > start
			}
			depth--
			p.i++
			if depth == 0 {
				return true
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return p.i > start
			}
			p.i++
		default:
			p.i++
		}
	}
	return depth == 0 && p.i > start
}

// fastBatch splits a whole batch body, {"tasks": [...]}, into its tasks,
// for bodies that are valid JSON with exactly that shape and at most
// MaxBatch tasks; false for any other, which readBatch's decoder answers.
// The tasks share body's bytes.
func fastBatch(body []byte) ([]json.RawMessage, bool) {
	if !json.Valid(body) {
		return nil, false
	}
	p := fastParser{b: body}
	p.ws()
	if !p.eat('{') {
		return nil, false
	}
	p.ws()
	if name, ok := p.str(); !ok || string(name) != "tasks" {
		return nil, false
	}
	p.ws()
	if !p.eat(':') {
		return nil, false
	}
	p.ws()
	if !p.eat('[') {
		return nil, false
	}
	p.ws()
	var tasks []json.RawMessage
	if !p.eat(']') {
		tasks = make([]json.RawMessage, 0, 64)
		for {
			if len(tasks) == MaxBatch {
				return nil, false
			}
			start := p.i
			if !p.skip() {
				return nil, false
			}
			tasks = append(tasks, json.RawMessage(body[start:p.i:p.i]))
			p.ws()
			if p.eat(']') {
				break
			}
			if !p.eat(',') {
				return nil, false
			}
			p.ws()
		}
	}
	p.ws()
	if !p.eat('}') {
		return nil, false
	}
	p.ws()
	return tasks, p.i == len(p.b)
}
