package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/ontimehq/ontime/apiv1"
)

// Request bodies are read whole before they are decoded (a batch is held
// while it is submitted), so what they cost is bounded twice:
//
//   - per request, by the endpoint's limit: a Content-Length over it is
//     refused (413) before a byte is read; a body without one (chunked,
//     HTTP/2) is read into pieces that never add up to more than the limit,
//     and refused at the byte past it — never a buffer doubled past the
//     limit, never a second copy by a decoder;
//   - node wide, by a byte budget (Options.MaxInflightBodyBytes,
//     http.max_inflight_body_bytes): the bytes of every body being read or
//     held at once. A body with a Content-Length waits for its share, in
//     arrival order, up to bodyWait; a body without one takes its share
//     piece by piece as it arrives and is refused (503, retry) when the
//     budget cannot give the next piece at once — waiting then, holding
//     pieces, could deadlock with the others doing the same.
//
// So 8 clients sending 400 MB each at once cost at most the budget, not 8
// times the limit, and one refused body at most its limit.

// DefaultMaxInflightBodyBytes is the default node-wide budget: four
// batches of the default limit.
const DefaultMaxInflightBodyBytes = 4 * DefaultMaxBatchBytes

// bodyWait is how long a body with a Content-Length waits for its share of
// the budget before it is refused 503.
const bodyWait = 5 * time.Second

// Pieces of a body without a Content-Length: the first small (most bodies
// are), each next twice the last, up to bodyPieceMax, and never past what
// the limit leaves.
const (
	bodyPieceMin = 16 << 10
	bodyPieceMax = 4 << 20
)

// bodyBudget is the node-wide byte budget of request bodies.
type bodyBudget struct {
	sem *semaphore.Weighted
	max int64
}

func newBodyBudget(max int64) *bodyBudget {
	return &bodyBudget{sem: semaphore.NewWeighted(max), max: max}
}

// body is a request body read whole, and its share of the budget, which
// release gives back once the bytes are no longer used.
type body struct {
	b      []byte
	budget *bodyBudget
	held   int64
}

func (b *body) release() {
	if b.held > 0 {
		b.budget.sem.Release(b.held)
		b.held = 0
	}
}

func tooLarge(limit int64, field string) error {
	return &httpError{status: http.StatusRequestEntityTooLarge, code: apiv1.CodeTooLarge, field: field,
		message: fmt.Sprintf("request body exceeds %d bytes", limit)}
}

func budgetExhausted(b *bodyBudget) error {
	return &httpError{status: http.StatusServiceUnavailable, code: apiv1.CodeUnavailable,
		message: fmt.Sprintf("the node is reading its budget of request bodies (%d bytes, http.max_inflight_body_bytes); retry shortly or on another node", b.max)}
}

// readBody reads r's body whole, at most limit bytes, under the budget.
// The caller must release the answer once it is done with its bytes (also
// on error: release of an empty body does nothing). field names the input
// a 413 is about.
func (h *handler) readBody(w http.ResponseWriter, r *http.Request, limit int64, field string) (*body, error) {
	out := &body{budget: h.budget}
	if r.ContentLength > limit {
		// Refused unread. One byte read through a zero limit tells the
		// server the body is over its limit, so that it ends the
		// connection gracefully (the answer first, then close) instead of
		// resetting it under a client still sending.
		var one [1]byte
		_, _ = http.MaxBytesReader(rawWriter(w), r.Body, 0).Read(one[:])
		return out, tooLarge(limit, field)
	}
	src := http.MaxBytesReader(rawWriter(w), r.Body, limit)
	if n := r.ContentLength; n >= 0 {
		// Known length: one buffer of exactly that size, once its share
		// of the budget is had.
		if n > 0 {
			ctx, cancel := context.WithTimeout(r.Context(), bodyWait)
			err := h.budget.sem.Acquire(ctx, n)
			cancel()
			if err != nil {
				return out, budgetExhausted(h.budget)
			}
			out.held = n
		}
		out.b = make([]byte, n)
		if _, err := io.ReadFull(src, out.b); err != nil {
			return out, readError(err, limit, field)
		}
		return out, nil
	}
	var pieces [][]byte
	var total int64
	size := int64(bodyPieceMin)
	for {
		if total == limit {
			// Full: the body must end here; a byte more is one too many.
			var one [1]byte
			if n, err := src.Read(one[:]); n > 0 || (err != nil && err != io.EOF) {
				if err == nil {
					err = &http.MaxBytesError{Limit: limit}
				}
				return out, readError(err, limit, field)
			}
			break
		}
		size = min(size, limit-total)
		if !h.budget.sem.TryAcquire(size) {
			return out, budgetExhausted(h.budget)
		}
		out.held += size
		p := make([]byte, size)
		n, err := fill(src, p)
		pieces = append(pieces, p[:n])
		total += int64(n)
		if err == io.EOF {
			break
		}
		if err != nil {
			return out, readError(err, limit, field)
		}
		size = min(2*size, bodyPieceMax)
	}
	if len(pieces) == 1 {
		out.b = pieces[0]
		return out, nil
	}
	// One contiguous body for the decoders; the pieces go once copied.
	// For this moment both are held: the budget counts the pieces'
	// capacity, never below the copy's size.
	out.b = make([]byte, 0, total)
	for _, p := range pieces {
		out.b = append(out.b, p...)
	}
	return out, nil
}

// fill reads into p until it is full (nil error) or src fails: io.EOF when
// the body ended, as is, so that a body cut short (io.ErrUnexpectedEOF from
// the transport) is not taken for its end.
func fill(src io.Reader, p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m, err := src.Read(p[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// readError is the answer to a body that could not be read whole.
func readError(err error, limit int64, field string) error {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return tooLarge(limit, field)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("", "the body ended before its Content-Length")
	default:
		return badRequest("", "reading body: %v", err)
	}
}
