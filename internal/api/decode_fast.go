package api

import (
	"encoding/json"
	"sync/atomic"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/internal/halves"
	"github.com/ontimehq/ontime/internal/jsonr"
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
	p := jsonr.New(raw)
	ok := p.Object(func(name []byte) bool {
		var ok bool
		switch string(name) { // no allocation: the compiler compares in place
		case "topic":
			out.Topic, ok = p.Text()
		case "key":
			out.Key, ok = p.Text()
		case "due_at":
			out.DueAt, ok = p.Text()
		case "delay":
			out.Delay, ok = p.Text()
		case "target":
			out.Target, ok = p.Text()
		case "if_exists":
			out.IfExists, ok = p.Text()
		case "max_attempts":
			out.MaxAttempts, ok = p.Int()
		case "priority":
			var n int
			if n, ok = p.Int(); ok {
				out.Priority = &n
			}
		case "payload":
			out.Payload, ok = p.Value()
			ok = ok && (valid || json.Valid(out.Payload))
		}
		return ok // false for an unknown field too
	})
	if !ok || !p.End() {
		return false
	}
	*v = out
	return true
}

// fastBatch splits a whole batch body, {"tasks": [...]}, into its tasks,
// for bodies that are valid JSON with exactly that shape and at most
// MaxBatch tasks; false for any other, which readBatch's decoder answers.
// The tasks share body's bytes.
//
// The shape is read strictly by jsonr and each task checked by
// json.Valid, which together is json.Valid of the whole body (JSON's
// grammar composes; FuzzFastBatch holds it to encoding/json), and lets a
// large batch's tasks be checked on two cores: checking the body was a
// third of the HTTP edge's time for a batch of 1,000, while the store and
// the client wait.
func fastBatch(body []byte) ([]json.RawMessage, bool) {
	p := jsonr.New(body)
	var tasks []json.RawMessage
	seen := false
	ok := p.Object(func(name []byte) bool {
		if seen || string(name) != "tasks" {
			return false
		}
		seen = true
		return p.Array(func() bool {
			if len(tasks) == MaxBatch {
				return false
			}
			t, ok := p.Value()
			if tasks == nil {
				tasks = make([]json.RawMessage, 0, 64)
			}
			tasks = append(tasks, json.RawMessage(t[:len(t):len(t)]))
			return ok
		})
	})
	if !ok || !seen || !p.End() {
		return nil, false
	}
	var bad atomic.Bool
	halves.Do(len(tasks), func(lo, hi int) {
		for _, t := range tasks[lo:hi] {
			if bad.Load() {
				return
			}
			if !json.Valid(t) {
				bad.Store(true)
			}
		}
	})
	return tasks, !bad.Load()
}
