package client

import (
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/internal/jsonr"
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
		p := scan{Scanner: jsonr.New(raw)}
		switch v := out.(type) {
		case *apiv1.Task:
			var t apiv1.Task
			if p.task(&t) && p.End() {
				*v = t
				return nil
			}
		case *apiv1.BatchResponse:
			var br apiv1.BatchResponse
			if p.batch(&br) && p.End() {
				*v = br
				return nil
			}
		case *apiv1.BatchMinimalResponse:
			var br apiv1.BatchMinimalResponse
			if p.minimalBatch(&br) && p.End() {
				*v = br
				return nil
			}
		case *apiv1.ListPage:
			var lp apiv1.ListPage
			if p.page(&lp) && p.End() {
				*v = lp
				return nil
			}
		}
	}
	return json.Unmarshal(raw, out)
}

// scan reads the node's answers: jsonr's scanner, plus the values that
// only answers hold. The tasks of a batch's answer share most of their
// times and strings (one submit's stamps; often one due time, topic and
// target; a status), so the last of each is kept and a repeat is neither
// parsed nor allocated again.
type scan struct {
	jsonr.Scanner
	due, stamp            lastTime // due_at and first_due_at; created_at and updated_at
	topic, status, target string
}

// lastTime is the last time read into a field of its kind, and its text
// (which shares the answer's bytes).
type lastTime struct {
	text []byte
	t    time.Time
}

func (p *scan) strInto(s *string) bool {
	v, ok := p.Text()
	*s = v
	return ok
}

// timeInto reads an RFC 3339 time as time.Time's UnmarshalJSON does.
func (p *scan) timeInto(t *time.Time) bool {
	b, ok := p.Str()
	return ok && t.UnmarshalText(b) == nil
}

// lastTimeInto is timeInto for a field whose value often repeats the
// last one of its kind.
func (p *scan) lastTimeInto(t *time.Time, last *lastTime) bool {
	b, ok := p.Str()
	if !ok {
		return false
	}
	if last.text != nil && string(b) == string(last.text) {
		*t = last.t
		return true
	}
	if t.UnmarshalText(b) != nil {
		return false
	}
	*last = lastTime{text: b, t: *t}
	return true
}

// lastStrInto is strInto for a field whose value often repeats the last
// one of its kind.
func (p *scan) lastStrInto(s, last *string) bool {
	b, ok := p.Str()
	if !ok {
		return false
	}
	if string(b) != *last {
		*last = string(b)
	}
	*s = *last
	return true
}

func (p *scan) intInto(n *int) bool {
	v, ok := p.Int()
	if ok {
		*n = v
	}
	return ok
}

// rawInto reads any valid JSON value into a copy of its bytes, as
// json.RawMessage's UnmarshalJSON keeps it.
func (p *scan) rawInto(m *json.RawMessage) bool {
	v, ok := p.Value()
	if !ok || !json.Valid(v) {
		return false
	}
	*m = append(json.RawMessage(nil), v...)
	return true
}

// task reads the members of a task object into t.
func (p *scan) task(t *apiv1.Task) bool {
	return p.Object(func(name []byte) bool { return p.taskField(name, t) })
}

func (p *scan) taskField(name []byte, t *apiv1.Task) bool {
	switch string(name) {
	case "id":
		return p.strInto(&t.ID)
	case "topic":
		return p.lastStrInto(&t.Topic, &p.topic)
	case "key":
		return p.strInto(&t.Key)
	case "due_at":
		return p.lastTimeInto(&t.DueAt, &p.due)
	case "first_due_at":
		return p.lastTimeInto(&t.FirstDueAt, &p.due)
	case "moved_by":
		return p.strInto(&t.MovedBy)
	case "payload":
		return p.rawInto(&t.Payload)
	case "target":
		return p.lastStrInto(&t.Target, &p.target)
	case "max_attempts":
		return p.intInto(&t.MaxAttempts)
	case "priority":
		return p.intInto(&t.Priority)
	case "status":
		return p.lastStrInto(&t.Status, &p.status)
	case "attempts":
		return p.intInto(&t.Attempts)
	case "created_at":
		return p.lastTimeInto(&t.CreatedAt, &p.stamp)
	case "updated_at":
		return p.lastTimeInto(&t.UpdatedAt, &p.stamp)
	case "last_error":
		return p.strInto(&t.LastError)
	case "result":
		return p.rawInto(&t.Result)
	case "retry":
		v, ok := p.Value()
		if !ok {
			return false
		}
		t.Retry = new(apiv1.Retry)
		return json.Unmarshal(v, t.Retry) == nil
	case "next_attempt_at":
		var at time.Time
		if !p.timeInto(&at) {
			return false
		}
		t.NextAttemptAt = &at
		return true
	case "next_attempt_reason":
		return p.strInto(&t.NextAttemptReason)
	case "key_held_until":
		var at time.Time
		if !p.timeInto(&at) {
			return false
		}
		t.KeyHeldUntil = &at
		return true
	case "outbox":
		v, ok := p.Value()
		if !ok {
			return false
		}
		t.Outbox = new(apiv1.TaskOutbox)
		return json.Unmarshal(v, t.Outbox) == nil
	}
	return false
}

// batch reads {"tasks": [...]}, each item a task or {"error": {...}},
// with "created".
func (p *scan) batch(br *apiv1.BatchResponse) bool {
	return tasksOf(p, &br.Tasks, func(it *apiv1.BatchItem) bool {
		return p.Object(func(name []byte) bool {
			if handled, ok := p.itemMember(name, &it.Error, &it.Created); handled {
				return ok
			}
			if it.Task == nil { // as encoding/json: made by its first field
				it.Task = new(apiv1.Task)
			}
			return p.taskField(name, it.Task)
		})
	})
}

// minimalBatch reads {"tasks": [...]}, each item {"id", "status",
// "created"} or {"error": {...}, "created"}; the other members of a whole
// view (a node that did not apply Prefer: return=minimal) are skipped, as
// encoding/json skips them.
func (p *scan) minimalBatch(br *apiv1.BatchMinimalResponse) bool {
	return tasksOf(p, &br.Tasks, func(it *apiv1.BatchRef) bool {
		return p.Object(func(name []byte) bool {
			if handled, ok := p.itemMember(name, &it.Error, &it.Created); handled {
				return ok
			}
			switch string(name) {
			case "id":
				return p.strInto(&it.ID)
			case "status":
				return p.lastStrInto(&it.Status, &p.status)
			}
			for _, f := range [...]string{"id", "status", "error", "created"} {
				if strings.EqualFold(string(name), f) {
					return false // encoding/json matches names without case: left to it
				}
			}
			v, ok := p.Value() // Value finds a value's end; Valid checks it
			return ok && json.Valid(v)
		})
	})
}

// tasksOf reads a batch answer, {"tasks": [...]}, each element by elem.
func tasksOf[T any](p *scan, dst *[]T, elem func(*T) bool) bool {
	return p.Object(func(name []byte) bool {
		if string(name) != "tasks" {
			return false
		}
		return items(p, dst, 64, elem)
	})
}

// itemMember reads the members any batch item may have, "error" and
// "created"; handled is false for any other name.
func (p *scan) itemMember(name []byte, e **apiv1.ErrorDetail, created *bool) (handled, ok bool) {
	switch string(name) {
	case "error":
		if *e == nil { // a second "error" adds to the first, as in encoding/json
			*e = new(apiv1.ErrorDetail)
		}
		return true, p.errorDetail(*e)
	case "created":
		v, ok := p.Bool()
		*created = v
		return true, ok
	}
	return false, false
}

// items reads the "tasks" array of a batch or a page into *dst, each
// element by elem.
func items[T any](p *scan, dst *[]T, capacity int, elem func(*T) bool) bool {
	// A second "tasks" would decode into the first's items in
	// encoding/json: left to it.
	if *dst != nil {
		return false
	}
	all := make([]T, 0, capacity)
	ok := p.Array(func() bool {
		all = append(all, *new(T))
		return elem(&all[len(all)-1])
	})
	*dst = all
	return ok
}

func (p *scan) errorDetail(d *apiv1.ErrorDetail) bool {
	return p.Object(func(name []byte) bool {
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
	return p.Object(func(name []byte) bool {
		switch string(name) {
		case "tasks":
			return items(p, &lp.Tasks, 16, p.task)
		case "next_cursor":
			return p.strInto(&lp.NextCursor)
		}
		return false
	})
}
