package webhook

import (
	"bytes"
	"context"
	"hash/maphash"
	"io"
	"net/http"
	"sync/atomic"
)

// templates keeps the parsed request of recent targets, so the calls of
// a burst to one URL parse it once, not once each (url.Parse, a Header
// net/http makes and the call replaces, and the body's wrappers were a
// third of what building a call allocated). A few slots picked by a hash
// of the target: bounded however many targets there are, no lock; a slot
// two busy targets share is overwritten back and forth, which only costs
// the parse the slot saves.
type templates struct {
	seed  maphash.Seed
	slots [64]atomic.Pointer[template]
}

type template struct {
	target string
	// req is never sent: each call sends a shallow copy. Neither
	// Transport.RoundTrip nor Client.Do modifies a request, so the copies
	// share its URL.
	req *http.Request
}

func newTemplates() *templates { return &templates{seed: maphash.MakeSeed()} }

// request is a POST of body to target under ctx, as
// http.NewRequestWithContext(ctx, "POST", target, bytes.NewReader(body))
// makes it, without a Header (the caller sets it).
func (t *templates) request(ctx context.Context, target string, body []byte) (*http.Request, error) {
	slot := &t.slots[maphash.String(t.seed, target)%uint64(len(t.slots))]
	tp := slot.Load()
	if tp == nil || tp.target != target {
		req, err := http.NewRequest(http.MethodPost, target, nil)
		if err != nil {
			return nil, err
		}
		req.Header = nil
		tp = &template{target: target, req: req}
		slot.Store(tp)
	}
	req := tp.req.WithContext(ctx)
	req.ContentLength = int64(len(body))
	if len(body) == 0 {
		req.Body, req.GetBody = http.NoBody, func() (io.ReadCloser, error) { return http.NoBody, nil }
		return req, nil
	}
	// io.NopCloser of a *bytes.Reader is a body net/http knows is in
	// memory: it writes the headers and the body in one write (one
	// segment). Any other type has it flush the headers first, a second
	// write for every call and a second read for the receiver.
	req.Body = io.NopCloser(bytes.NewReader(body))
	// The transport resends a call whose keep-alive connection turned
	// out closed; it reads the body again from here.
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return req, nil
}
