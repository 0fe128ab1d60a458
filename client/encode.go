package client

import (
	"bytes"
	"encoding/json"
	"strconv"
	"sync"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/internal/jsonw"
)

// replyPool holds the buffers answers are read into: a cache, not state
// (any buffer serves any call), shared by every Client as sync.Pool is
// meant to be. Buffers that grew past maxPooledReply are dropped.
var replyPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

const maxPooledReply = 1 << 20

// appendTaskRequest appends t as json.Marshal writes it (field order,
// omitempty, HTML escaping), without reflection: every submit's body; a
// payload that is not valid JSON gets json.Marshal's error.
func appendTaskRequest(b []byte, t *apiv1.TaskRequest) ([]byte, error) {
	b = append(b, `{"topic":`...)
	b = jsonw.AppendString(b, t.Topic)
	str := func(name, v string) {
		if v != "" {
			b = append(b, `,"`...)
			b = append(b, name...)
			b = append(b, `":`...)
			b = jsonw.AppendString(b, v)
		}
	}
	str("key", t.Key)
	str("due_at", t.DueAt)
	str("delay", t.Delay)
	if len(t.Payload) > 0 {
		b = append(b, `,"payload":`...)
		var ok bool
		if b, ok = jsonw.AppendRaw(b, t.Payload); !ok {
			_, err := json.Marshal(t) // its error, in its words
			return nil, err
		}
	}
	str("target", t.Target)
	if t.MaxAttempts != 0 {
		b = append(b, `,"max_attempts":`...)
		b = strconv.AppendInt(b, int64(t.MaxAttempts), 10)
	}
	str("if_exists", t.IfExists)
	if t.Retry != nil {
		// Rare: encoding/json's form of the policy.
		r, err := json.Marshal(t.Retry)
		if err != nil {
			return nil, err
		}
		b = append(b, `,"retry":`...)
		b = append(b, r...)
	}
	if t.Priority != nil {
		b = append(b, `,"priority":`...)
		b = strconv.AppendInt(b, int64(*t.Priority), 10)
	}
	return append(b, '}'), nil
}
