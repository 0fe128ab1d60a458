package client

import (
	"encoding/json"
	"time"
	"unicode/utf8"

	"github.com/ontimehq/ontime/apiv1"
)

// unmarshal is json.Unmarshal into a zero out, with the answers of the
// task routes (a task, a batch, a page) read by hand: encoding/json's
// reflection over a batch of 1,000 answers was 12 % of the CPU of a
// batch submit over loopback, client and node together, three times the
// node's whole HTTP edge. The fast path vouches only for what it fully
// understands (the exact field names, strings without escapes, whole
// numbers, RFC 3339 times); anything else, and any error, is
// encoding/json's, decoding from scratch. The differential tests and the
// fuzz target (decode_test.go) hold the two to the same result.
func unmarshal(raw []byte, out any) error {
	if utf8.Valid(raw) { // encoding/json would replace bad bytes in strings
		p := scan{b: raw}
		switch v := out.(type) {
		case *apiv1.Task:
			var t apiv1.Task
			if p.ws(); p.task(&t) && p.end() {
				*v = t
				return nil
			}
		case *apiv1.BatchResponse:
			var br apiv1.BatchResponse
			if p.ws(); p.batch(&br) && p.end() {
				*v = br
				return nil
			}
		case *apiv1.ListPage:
			var lp apiv1.ListPage
			if p.ws(); p.page(&lp) && p.end() {
				*v = lp
				return nil
			}
		}
	}
	return json.Unmarshal(raw, out)
}

// scan reads JSON the way the node writes it.
type scan struct {
	b []byte
	i int
}

func (p *scan) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *scan) eat(c byte) bool {
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// end reports whether only white space is left.
func (p *scan) end() bool {
	p.ws()
	return p.i == len(p.b)
}

// object reads an object, calling field for each member with the
// scanner at its value; field returns false to give up.
func (p *scan) object(field func(name []byte) bool) bool {
	if !p.eat('{') {
		return false
	}
	if p.eat('}') {
		return true
	}
	for {
		p.ws()
		name, ok := p.str()
		if !ok || !p.eat(':') {
			return false
		}
		p.ws()
		if !field(name) {
			return false
		}
		if p.eat('}') {
			return true
		}
		if !p.eat(',') {
			return false
		}
	}
}

// array reads an array, calling elem for each element.
func (p *scan) array(elem func() bool) bool {
	if !p.eat('[') {
		return false
	}
	if p.eat(']') {
		return true
	}
	for {
		p.ws()
		if !elem() {
			return false
		}
		if p.eat(']') {
			return true
		}
		if !p.eat(',') {
			return false
		}
	}
}

// str reads a string with no escapes and no control characters: the
// bytes between its quotes.
func (p *scan) str() ([]byte, bool) {
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return nil, false
	}
	p.i++
	start := p.i
	for p.i < len(p.b) {
		switch c := p.b[p.i]; {
		case c == '"':
			p.i++
			return p.b[start : p.i-1], true
		case c == '\\' || c < 0x20:
			return nil, false
		}
		p.i++
	}
	return nil, false
}

func (p *scan) strInto(s *string) bool {
	b, ok := p.str()
	*s = string(b)
	return ok
}

// timeInto reads an RFC 3339 time as time.Time's UnmarshalJSON does.
func (p *scan) timeInto(t *time.Time) bool {
	b, ok := p.str()
	return ok && t.UnmarshalText(b) == nil
}

// intInto reads -?(0|[1-9][0-9]*) of at most 15 digits: what encoding/json
// puts in an int without a question.
func (p *scan) intInto(n *int) bool {
	neg := p.i < len(p.b) && p.b[p.i] == '-'
	if neg {
		p.i++
	}
	start, v := p.i, 0
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		v = v*10 + int(p.b[p.i]-'0')
		p.i++
	}
	digits := p.i - start
	if digits == 0 || digits > 15 || (digits > 1 && p.b[start] == '0') {
		return false
	}
	if p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r', ',', '}', ']':
		default: // a fraction or an exponent
			return false
		}
	}
	if neg {
		v = -v
	}
	*n = v
	return true
}

// rawInto reads any valid JSON value into a copy of its bytes, as
// json.RawMessage's UnmarshalJSON keeps it.
func (p *scan) rawInto(m *json.RawMessage) bool {
	start := p.i
	depth := 0
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch c {
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
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return p.rawEnd(start, m)
			}
			depth--
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return p.rawEnd(start, m)
			}
		}
		p.i++
		if depth == 0 && (c == '"' || c == '}' || c == ']') {
			return p.rawEnd(start, m)
		}
	}
	return depth == 0 && p.rawEnd(start, m)
}

func (p *scan) rawEnd(start int, m *json.RawMessage) bool {
	v := p.b[start:p.i]
	if len(v) == 0 || !json.Valid(v) {
		return false
	}
	*m = append(json.RawMessage(nil), v...)
	return true
}

// task reads the members of a task object into t.
func (p *scan) task(t *apiv1.Task) bool {
	return p.object(func(name []byte) bool { return p.taskField(name, t) })
}

func (p *scan) taskField(name []byte, t *apiv1.Task) bool {
	switch string(name) {
	case "id":
		return p.strInto(&t.ID)
	case "topic":
		return p.strInto(&t.Topic)
	case "key":
		return p.strInto(&t.Key)
	case "due_at":
		return p.timeInto(&t.DueAt)
	case "first_due_at":
		return p.timeInto(&t.FirstDueAt)
	case "payload":
		return p.rawInto(&t.Payload)
	case "target":
		return p.strInto(&t.Target)
	case "max_attempts":
		return p.intInto(&t.MaxAttempts)
	case "status":
		return p.strInto(&t.Status)
	case "attempts":
		return p.intInto(&t.Attempts)
	case "created_at":
		return p.timeInto(&t.CreatedAt)
	case "updated_at":
		return p.timeInto(&t.UpdatedAt)
	case "last_error":
		return p.strInto(&t.LastError)
	}
	return false
}

// batch reads {"tasks": [...]}, each item a task or {"error": {...}}.
func (p *scan) batch(br *apiv1.BatchResponse) bool {
	return p.object(func(name []byte) bool {
		// A second "tasks" would decode into the first's items in
		// encoding/json: left to it.
		if string(name) != "tasks" || br.Tasks != nil {
			return false
		}
		items := make([]apiv1.BatchItem, 0, 64)
		ok := p.array(func() bool {
			var it apiv1.BatchItem
			ok := p.object(func(name []byte) bool {
				if string(name) == "error" {
					if it.Error == nil { // a second "error" adds to the first, as in encoding/json
						it.Error = new(apiv1.ErrorDetail)
					}
					return p.errorDetail(it.Error)
				}
				if it.Task == nil { // as encoding/json: made by its first field
					it.Task = new(apiv1.Task)
				}
				return p.taskField(name, it.Task)
			})
			items = append(items, it)
			return ok
		})
		br.Tasks = items
		return ok
	})
}

func (p *scan) errorDetail(d *apiv1.ErrorDetail) bool {
	return p.object(func(name []byte) bool {
		switch string(name) {
		case "code":
			var s string
			ok := p.strInto(&s)
			d.Code = apiv1.Code(s)
			return ok
		case "field":
			return p.strInto(&d.Field)
		case "message":
			return p.strInto(&d.Message)
		}
		return false
	})
}

// page reads {"tasks": [...], "next_cursor": "..."}.
func (p *scan) page(lp *apiv1.ListPage) bool {
	return p.object(func(name []byte) bool {
		switch string(name) {
		case "tasks":
			if lp.Tasks != nil { // as in batch
				return false
			}
			ts := make([]apiv1.Task, 0, 16)
			ok := p.array(func() bool {
				ts = append(ts, apiv1.Task{})
				return p.task(&ts[len(ts)-1])
			})
			lp.Tasks = ts
			return ok
		case "next_cursor":
			return p.strInto(&lp.NextCursor)
		}
		return false
	})
}
