package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/internal/jsonw"
)

// The answers of the hot routes (a task, a batch, a page of tasks, an
// error) are written by hand here instead of by encoding/json's
// reflection, which was half the edge's CPU on a batch of 1,000 (see
// docs/performance-notes.md, "HTTP edge"). The bytes are exactly encoding/json's, HTML
// escaping and the trailing newline of Encoder.Encode included: the
// differential tests (encode_test.go) hold the two to the same output, and
// any value the appenders do not vouch for (an invalid payload, a year
// outside 0–9999) is left to encoding/json, so its errors stay its own.

// bufPool holds reply buffers: a cache, not state (any buffer serves any
// answer), shared by every handler of the process as sync.Pool is meant
// to be. Buffers that grew past maxPooledBuf (a batch of large payloads)
// are dropped, so one big answer does not pin its memory.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

const maxPooledBuf = 1 << 20

// writeJSON answers v with code. The body is built in a pooled buffer and
// sent with its Content-Length: one write, never chunked.
func writeJSON(w http.ResponseWriter, code int, v any) {
	bp := bufPool.Get().(*[]byte)
	b, ok := appendReply((*bp)[:0], v)
	if !ok {
		b = encodeSlow((*bp)[:0], v)
	}
	writeBody(w, code, bp, b)
}

// encodeSlow appends v as json.NewEncoder(w).Encode(v) writes it: on an
// error, nothing (the status and no body).
func encodeSlow(b []byte, v any) []byte {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(v); err == nil {
		b = append(b, buf.Bytes()...)
	}
	return b
}

// replyBuf is a pooled reply buffer of at least size bytes (an estimate of
// the answer: a buffer grown by appends from a few kilobytes copies and
// drops each smaller one on the way).
func replyBuf(size int) *[]byte {
	bp := bufPool.Get().(*[]byte)
	if cap(*bp) < size {
		*bp = make([]byte, 0, min(size, maxPooledBuf))
	}
	return bp
}

// writeBody answers code with the JSON body b, appended to the pooled
// buffer bp, and gives bp back to the pool.
func writeBody(w http.ResponseWriter, code int, bp *[]byte, b []byte) {
	h := w.Header()
	h["Content-Type"] = []string{"application/json"} // canonical keys: no Set, no canonicalising
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	w.WriteHeader(code)
	_, _ = w.Write(b)
	if cap(b) <= maxPooledBuf {
		*bp = b[:0]
		bufPool.Put(bp)
	}
}

// appendReply appends v as encoding/json's Encoder would, newline
// included; ok is false for a type or value it leaves to encoding/json.
func appendReply(b []byte, v any) (_ []byte, ok bool) {
	switch v := v.(type) {
	case apiv1.Task:
		b, ok = appendTask(b, &v)
	case apiv1.BatchResponse:
		b, ok = appendBatch(b, &v)
	case apiv1.ListPage:
		b, ok = appendPage(b, &v)
	case apiv1.ErrorBody:
		b = append(b, `{"error":`...)
		b, ok = appendErrorDetail(b, &v.Error), true
		b = append(b, '}')
	default:
		return b, false
	}
	if !ok {
		return b, false
	}
	return append(b, '\n'), true
}

func appendBatch(b []byte, v *apiv1.BatchResponse) ([]byte, bool) {
	if v.Tasks == nil {
		return append(b, `{"tasks":null}`...), true
	}
	b = append(b, `{"tasks":[`...)
	for i := range v.Tasks {
		if i > 0 {
			b = append(b, ',')
		}
		var ok bool
		if b, ok = appendBatchItem(b, &v.Tasks[i], false); !ok {
			return b, false
		}
	}
	return append(b, "]}"...), true
}

// appendBatchItem appends one item of a batch's answer. validPayload: the
// item's task payload was checked with json.Valid at its submit.
func appendBatchItem(b []byte, it *apiv1.BatchItem, validPayload bool) ([]byte, bool) {
	switch {
	case it.Task != nil && it.Error == nil:
		var ok bool
		if b, ok = appendTaskOf(b, it.Task, validPayload); !ok {
			return b, false
		}
		return appendCreated(b[:len(b)-1], it.Created), true // inside the task's object, as the field after its embedded ones
	case it.Task == nil && it.Error != nil:
		b = append(b, `{"error":`...)
		b = appendErrorDetail(b, it.Error)
		return appendCreated(b, it.Created), true
	default: // never written by the handler; encoding/json knows
		return b, false
	}
}

// appendBatchRef appends one item of a minimal batch answer.
func appendBatchRef(b []byte, r *apiv1.BatchRef) []byte {
	if r.Error != nil {
		b = append(b, `{"error":`...)
		b = appendErrorDetail(b, r.Error)
		return appendCreated(b, r.Created)
	}
	b = append(b, `{"id":`...)
	b = jsonw.AppendString(b, r.ID)
	b = append(b, `,"status":`...)
	b = jsonw.AppendString(b, r.Status)
	return appendCreated(b, r.Created)
}

// appendCreated ends a batch item with its created member.
func appendCreated(b []byte, created bool) []byte {
	if created {
		return append(b, `,"created":true}`...)
	}
	return append(b, `,"created":false}`...)
}

func appendPage(b []byte, v *apiv1.ListPage) ([]byte, bool) {
	if v.Tasks == nil {
		b = append(b, `{"tasks":null`...)
	} else {
		b = append(b, `{"tasks":[`...)
		for i := range v.Tasks {
			if i > 0 {
				b = append(b, ',')
			}
			var ok bool
			if b, ok = appendTask(b, &v.Tasks[i]); !ok {
				return b, false
			}
		}
		b = append(b, ']')
	}
	if v.NextCursor != "" {
		b = append(b, `,"next_cursor":`...)
		b = jsonw.AppendString(b, v.NextCursor)
	}
	return append(b, '}'), true
}

func appendErrorDetail(b []byte, d *apiv1.ErrorDetail) []byte {
	b = append(b, `{"code":`...)
	b = jsonw.AppendString(b, string(d.Code))
	if d.Field != "" {
		b = append(b, `,"field":`...)
		b = jsonw.AppendString(b, d.Field)
	}
	b = append(b, `,"message":`...)
	b = jsonw.AppendString(b, d.Message)
	return append(b, '}')
}

// appendTask appends t in apiv1.Task's field order and omitempty rules.
func appendTask(b []byte, t *apiv1.Task) ([]byte, bool) {
	return appendTaskOf(b, t, false)
}

// appendTaskOf is appendTask; validPayload: t's payload was checked with
// json.Valid already.
func appendTaskOf(b []byte, t *apiv1.Task, validPayload bool) ([]byte, bool) {
	var ok bool
	b = append(b, `{"id":`...)
	b = jsonw.AppendString(b, t.ID)
	b = append(b, `,"topic":`...)
	b = jsonw.AppendString(b, t.Topic)
	if t.Key != "" {
		b = append(b, `,"key":`...)
		b = jsonw.AppendString(b, t.Key)
	}
	b = append(b, `,"due_at":`...)
	if b, ok = jsonw.AppendTime(b, t.DueAt); !ok {
		return b, false
	}
	b = append(b, `,"first_due_at":`...)
	if b, ok = appendTimeAgain(b, t.FirstDueAt, t.DueAt); !ok {
		return b, false
	}
	if t.MovedBy != "" {
		b = append(b, `,"moved_by":`...)
		b = jsonw.AppendString(b, t.MovedBy)
	}
	b = append(b, `,"payload":`...)
	if validPayload {
		b, ok = jsonw.AppendValidRaw(b, t.Payload)
	} else {
		b, ok = jsonw.AppendRaw(b, t.Payload)
	}
	if !ok {
		return b, false
	}
	if t.Target != "" {
		b = append(b, `,"target":`...)
		b = jsonw.AppendString(b, t.Target)
	}
	b = append(b, `,"max_attempts":`...)
	b = strconv.AppendInt(b, int64(t.MaxAttempts), 10)
	b = append(b, `,"priority":`...)
	b = strconv.AppendInt(b, int64(t.Priority), 10)
	b = append(b, `,"status":`...)
	b = jsonw.AppendString(b, t.Status)
	b = append(b, `,"attempts":`...)
	b = strconv.AppendInt(b, int64(t.Attempts), 10)
	b = append(b, `,"created_at":`...)
	if b, ok = jsonw.AppendTime(b, t.CreatedAt); !ok {
		return b, false
	}
	b = append(b, `,"updated_at":`...)
	if b, ok = appendTimeAgain(b, t.UpdatedAt, t.CreatedAt); !ok {
		return b, false
	}
	if t.LastError != "" {
		b = append(b, `,"last_error":`...)
		b = jsonw.AppendString(b, t.LastError)
	}
	if len(t.Result) > 0 {
		b = append(b, `,"result":`...)
		if b, ok = jsonw.AppendRaw(b, t.Result); !ok {
			return b, false
		}
	}
	if t.Retry != nil || t.NextAttemptAt != nil {
		// Rare in an answer (a task's own policy; a retried task):
		// encoding/json's form, as the struct has them.
		if t.Retry != nil {
			rb, err := json.Marshal(t.Retry)
			if err != nil {
				return b, false
			}
			b = append(b, `,"retry":`...)
			b = append(b, rb...)
		}
		if t.NextAttemptAt != nil {
			b = append(b, `,"next_attempt_at":`...)
			if b, ok = jsonw.AppendTime(b, *t.NextAttemptAt); !ok {
				return b, false
			}
		}
		if t.NextAttemptReason != "" {
			b = append(b, `,"next_attempt_reason":`...)
			b = jsonw.AppendString(b, t.NextAttemptReason)
		}
	}
	if t.KeyHeldUntil != nil {
		b = append(b, `,"key_held_until":`...)
		if b, ok = jsonw.AppendTime(b, *t.KeyHeldUntil); !ok {
			return b, false
		}
	}
	if t.Outbox != nil {
		// Only GET /v1/tasks/{id} of a relayed task: encoding/json's form.
		ob, err := json.Marshal(t.Outbox)
		if err != nil {
			return b, false
		}
		b = append(b, `,"outbox":`...)
		b = append(b, ob...)
	}
	return append(b, '}'), true
}

// appendTimeAgain appends t, copying the text of prev, the value just
// appended before ",\"name\":", when they are the same instant: a new
// task's two due times and two stamps are, and formatting is the
// costliest part of a task's answer.
func appendTimeAgain(b []byte, t, prev time.Time) ([]byte, bool) {
	if t != prev {
		return jsonw.AppendTime(b, t)
	}
	// b ends with `"<prev>","name":`; find prev's quoted text.
	end := bytes.LastIndexByte(b, ',')
	start := bytes.LastIndexByte(b[:end-1], '"')
	return append(b, b[start:end]...), true
}
