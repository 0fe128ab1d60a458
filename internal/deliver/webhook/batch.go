package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/ontimehq/ontime/internal/deliver"
)

// Batch calls (docs/topics.md, "Batch delivery"). A destination configured with
// batch N > 1 gets up to N tasks per call:
//
//	POST target
//	Content-Type: application/json
//	Ontime-Batch: <number of tasks>
//	Ontime-Target: <the target, as submitted: the URL the signature covers>
//	Ontime-Signature: t=…,v2=…   (over the whole body, as a single call's)
//
//	{"tasks": [{"id","topic","key","payload","due_at","attempt"}, …]}
//
// Each element is exactly the body a single call would carry, plus
// "traceparent" (its task's deliver span) when tracing is on: the call has
// no traceparent header, since one call carries many traces. Tasks of
// one call share their target URL and signing secrets: the tasks a lane
// takes at once are posted as one call per distinct (target, secrets).
//
// The answer:
//   - not 2xx: every task of the call failed (retried with backoff; 410
//     Gone makes them all dead, as for a single call);
//   - 2xx with a JSON body (Content-Type application/json or …+json)
//     {"failed": ["id", …]}: those tasks failed and are retried, the rest
//     are delivered; ids not in the call are ignored; an empty body, {} or
//     {"failed": []} means all delivered;
//   - 2xx with a JSON Content-Type but a body that is not that object (or
//     over 1 MiB): every task of the call is retried. The receiver
//     meant to say something and it cannot be read; retrying may deliver
//     some twice, which at-least-once allows, where assuming success could
//     lose tasks;
//   - 2xx with any other Content-Type: all delivered, the body is ignored.

// BatchAnswerBytes bounds the 2xx answer of a batch call that is read:
// 1,000 failed ids of 26 characters need 30 KB.
const BatchAnswerBytes = 1 << 20

// ErrFailedInBatch is wrapped by the error of a task the receiver listed
// in its batch answer's "failed".
var ErrFailedInBatch = errors.New(`listed in the batch answer's "failed"`)

// BatchSize is dest's configured batch (Config.Destinations); 1, one
// task per call, for any other destination.
func (s *Sink) BatchSize(dest string) int {
	if x := s.dests[dest]; x != nil {
		return x.batch
	}
	return 1
}

type batchKey struct {
	target  string
	secrets *string // identity of the keyring's secrets slice; nil: unsigned
}

// DeliverBatch delivers ds, tasks of one destination due now, in as few
// calls as their targets and secrets allow (one, usually), and returns one
// error per delivery, in order.
func (s *Sink) DeliverBatch(ctx context.Context, ds []deliver.Delivery) []error {
	errs := make([]error, len(ds))
	if len(ds) == 0 {
		return errs
	}
	var groups [][]int
	var index map[batchKey]int
	for i := range ds {
		k := batchKey{target: ds[i].Target}
		if sec := s.cfg.Keys.For(ds[i].Topic, ds[i].Target); len(sec) > 0 {
			k.secrets = &sec[0]
		}
		if index == nil {
			index = map[batchKey]int{k: 0}
			groups = append(groups, make([]int, 0, len(ds)))
		}
		g, ok := index[k]
		if !ok {
			g = len(groups)
			index[k] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	for _, g := range groups {
		s.postBatch(ctx, ds, g, errs)
	}
	return errs
}

// postBatch makes one call of the deliveries ds[idx…] (one target, one
// set of secrets) and sets their errors.
func (s *Sink) postBatch(ctx context.Context, ds []deliver.Delivery, idx []int, errs []error) {
	size := 16
	for _, i := range idx {
		size += bodySize(&ds[i]) + 1 + len(`,"traceparent":""`) + len(ds[i].Traceparent)
	}
	b := append(make([]byte, 0, size), `{"tasks":[`...)
	sent := make([]int, 0, len(idx))
	for _, i := range idx {
		if len(sent) > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = appendBody(b, &ds[i]); err != nil {
			errs[i] = err
			if len(sent) > 0 {
				b = b[:len(b)-1] // the comma
			}
			continue
		}
		// One call carries many traces, so no traceparent header: each
		// element carries its task's own (its deliver span), the receiver
		// continuing each task's trace from its element.
		if tp := ds[i].Traceparent; tp != "" {
			b = append(b[:len(b)-1], `,"traceparent":`...)
			b = appendString(b, tp)
			b = append(b, '}')
		}
		sent = append(sent, i)
	}
	if len(sent) == 0 {
		return
	}
	b = append(b, "]}"...)
	first := &ds[sent[0]]
	client, timeout := s.route(first)
	vals := make([]string, 4)
	vals[0] = strconv.Itoa(len(sent))
	hdr := make(http.Header, 6)
	hdr["Ontime-Batch"] = vals[0:1:1]
	resp, cancel, err := s.post(ctx, client, timeout, first.Topic, first.Target, b, hdr, vals[1:])
	if err == nil {
		defer cancel()
		defer resp.Body.Close()
		if resp.StatusCode/100 == 2 {
			var failed map[string]bool
			if failed, err = readFailed(resp); err == nil {
				for _, i := range sent {
					if failed[ds[i].ID] {
						errs[i] = fmt.Errorf("webhook answered HTTP %d: %w", resp.StatusCode, ErrFailedInBatch)
					}
				}
				return
			}
		} else {
			err = s.statusError(resp, first.Target)
		}
	}
	for _, i := range sent {
		errs[i] = err
	}
}

// readFailed reads a 2xx batch answer: the ids it lists as failed, or an
// error when the whole call must be retried (see the comment at the top).
func readFailed(resp *http.Response) (map[string]bool, error) {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt != "application/json" && !strings.HasSuffix(mt, "+json") {
		drain(resp)
		return nil, nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, BatchAnswerBytes+1))
	if err != nil {
		return nil, fmt.Errorf("webhook answered HTTP %d, reading its batch answer: %w", resp.StatusCode, err)
	}
	if len(body) > BatchAnswerBytes {
		return nil, fmt.Errorf("webhook answered HTTP %d with a batch answer over %d bytes", resp.StatusCode, BatchAnswerBytes)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, nil
	}
	var a struct {
		Failed []string `json:"failed"`
	}
	if err := json.Unmarshal(body, &a); err != nil {
		return nil, fmt.Errorf(`webhook answered HTTP %d with JSON that is not {"failed": ["id", …]}: %w`, resp.StatusCode, err)
	}
	if len(a.Failed) == 0 {
		return nil, nil
	}
	failed := make(map[string]bool, len(a.Failed))
	for _, id := range a.Failed {
		failed[id] = true
	}
	return failed, nil
}
