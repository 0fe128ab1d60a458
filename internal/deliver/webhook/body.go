package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/ontimehq/ontime/internal/deliver"
)

// The body of a call, {"id","topic","key","payload","due_at","attempt"},
// is appended by hand rather than by json.Marshal of a struct: no
// reflection, and the payload, valid JSON since it was submitted, is
// copied as it is instead of being compacted again. A batch call's body is
// {"tasks":[body, …]} of the same bodies.

var errPayloadNotJSON = errors.New("payload is not valid JSON")

// bodySize is the room a body takes, a little more when strings need
// escapes, so appendBody seldom grows its buffer.
func bodySize(d *deliver.Delivery) int {
	return 96 + len(d.ID) + len(d.Topic) + len(d.Key) + len(d.Payload) + len(time.RFC3339Nano)
}

// appendBody appends d's body to dst (unchanged on error). A payload that is not JSON (the
// store holds what submit validated, so it should not happen) is a
// Permanent error: retrying cannot fix it.
func appendBody(dst []byte, d *deliver.Delivery) ([]byte, error) {
	payload := d.Payload
	if len(payload) == 0 {
		payload = []byte("null")
	} else if !json.Valid(payload) {
		return dst, deliver.Permanent(fmt.Errorf("encode webhook body: %w", errPayloadNotJSON))
	}
	dst = append(dst, `{"id":`...)
	dst = appendString(dst, d.ID)
	dst = append(dst, `,"topic":`...)
	dst = appendString(dst, d.Topic)
	dst = append(dst, `,"key":`...)
	dst = appendString(dst, d.Key)
	dst = append(dst, `,"payload":`...)
	dst = append(dst, payload...)
	dst = append(dst, `,"due_at":"`...)
	dst = d.DueAt.UTC().AppendFormat(dst, time.RFC3339Nano)
	dst = append(dst, `","attempt":`...)
	dst = strconv.AppendInt(dst, int64(d.Attempt), 10)
	return append(dst, '}'), nil
}

// appendString appends s as a JSON string, as encoding/json writes it.
// IDs, topics and most keys are plain ASCII and are copied at once; the
// rest go through encoding/json.
func appendString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s) // a string always encodes
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}
