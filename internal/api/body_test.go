package api_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/internal/api/apitest"
)

// These tests measure the process's heap, so they do not run in parallel
// with others (t.Parallel), and they serve the node's own handler, not
// apitest's checker, which keeps a copy of every body it sees.

const (
	bodyLimit = 8 << 20   // http.max_batch_bytes in these tests
	offered   = 400 << 20 // what each client would send
)

// TestRefusedBodiesCostAtMostTheLimit: 8 bodies of 400 MB at once, half
// with a Content-Length (refused before a byte is read), half chunked
// (refused at the byte past the limit), are all answered 413, and what the
// node allocated for them all stays within what the limit allows each —
// not the several times the limit of a buffer doubled past it and a
// decoder's second copy.
func TestRefusedBodiesCostAtMostTheLimit(t *testing.T) {
	_, h := apitest.StartHandler(t, func(c *ontime.Config) {
		c.HTTP.MaxBatchBytes = bodyLimit
		c.HTTP.MaxInflightBodyBytes = 1 << 30 // not the budget: each body's own cost
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var wg sync.WaitGroup
	codes := make([]int, 8)
	errs := make([]error, 8)
	for i := range codes {
		wg.Go(func() {
			body := &endless{prefix: `{"tasks":[{"topic":"big","payload":"`, filler: 'x', max: offered}
			req, _ := http.NewRequest("POST", srv.URL+"/v1/tasks:batch", body)
			req.ContentLength = -1 // chunked
			if i%2 == 0 {
				req.ContentLength = offered
			}
			c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
			resp, err := c.Do(req)
			if err != nil {
				errs[i] = err
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			codes[i] = resp.StatusCode
		})
	}
	wg.Wait()
	runtime.ReadMemStats(&after)
	for i, code := range codes {
		if errs[i] != nil || code != http.StatusRequestEntityTooLarge {
			t.Errorf("body %d (Content-Length %v): HTTP %d %v; want 413", i, i%2 == 0, code, errs[i])
		}
	}
	// Each chunked body costs its limit (plus the pieces' rounding), each
	// with a Content-Length nothing; the node's own work meanwhile and the
	// clients' buffers are small beside that. Before, one body cost ~6×
	// the limit, 8 of them ~48×.
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("allocated %d MiB for 8 refused bodies of %d MiB under a limit of %d MiB", allocated>>20, offered>>20, bodyLimit>>20)
	if want := uint64(4*bodyLimit + 2*bodyLimit); allocated > want {
		t.Errorf("8 refused bodies allocated %d bytes; want at most %d (4 chunked bodies × the limit, plus slack)", allocated, want)
	}
}

// TestBodyBudgetBoundsBodiesAtOnce: 8 chunked bodies of 6 MiB each (under
// the limit) arrive at once and stall; with a node-wide budget of two
// limits, the node holds at most that budget of them — the others are
// refused 503 with Retry-After — and its live heap shows it.
func TestBodyBudgetBoundsBodiesAtOnce(t *testing.T) {
	const budget = 2 * bodyLimit
	const sent = 6 << 20
	_, h := apitest.StartHandler(t, func(c *ontime.Config) {
		c.HTTP.MaxBatchBytes = bodyLimit
		c.HTTP.MaxInflightBodyBytes = budget
	})
	// How much of each body the handler has read, by the request's
	// X-Body header.
	var read [8]atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var i int
		fmt.Sscan(r.Header.Get("X-Body"), &i)
		r.Body = countingBody{r.Body, &read[i]}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "http://")

	var before, during runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	type answer struct {
		code       int
		retryAfter string
	}
	answers := make(chan answer, 8)
	var answered [8]atomic.Bool
	conns := make([]net.Conn, 8)
	for i := range conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = c
		t.Cleanup(func() { c.Close() })
		go func() {
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				return // closed by the test's end
			}
			resp.Body.Close()
			answered[i].Store(true)
			answers <- answer{resp.StatusCode, resp.Header.Get("Retry-After")}
		}()
		go func() {
			// Unbuffered writes: every byte written reaches the node; the
			// body is never ended, so a body the node takes stays held.
			fmt.Fprintf(c, "POST /v1/tasks:batch HTTP/1.1\r\nHost: x\r\nX-Body: %d\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n", i)
			piece := strings.Repeat(" ", 64<<10)
			for n := 0; n < sent; n += len(piece) {
				if _, err := fmt.Fprintf(c, "%x\r\n%s\r\n", len(piece), piece); err != nil {
					return // refused: the node closed the connection
				}
			}
		}()
	}
	// Each body is either answered or read up to what was sent.
	deadline := time.Now().Add(time.Minute)
	for {
		settled := 0
		for i := range read {
			if answered[i].Load() || read[i].Load() == sent {
				settled++
			}
		}
		if settled == len(read) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the bodies neither answered nor read after a minute")
		}
		time.Sleep(10 * time.Millisecond)
	}
	runtime.GC()
	runtime.ReadMemStats(&during)
	held := int64(during.HeapAlloc) - int64(before.HeapAlloc)
	refused := 0
	for len(answers) > 0 {
		a := <-answers
		if a.code != http.StatusServiceUnavailable || a.retryAfter == "" {
			t.Errorf("a body answered HTTP %d (Retry-After %q) while stalled; want 503 with Retry-After", a.code, a.retryAfter)
		}
		refused++
	}
	t.Logf("%d of 8 bodies refused; heap grew by %d MiB under a budget of %d MiB", refused, held>>20, budget>>20)
	if refused == 0 {
		t.Error("8 bodies of 6 MiB were all taken under a budget of 16 MiB")
	}
	if held > budget+bodyLimit {
		t.Errorf("the heap grew by %d bytes while the bodies stalled; want at most the budget %d plus slack %d", held, budget, bodyLimit)
	}
}

// countingBody counts the bytes a handler reads of a body.
type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (c countingBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.n.Add(int64(n))
	return n, err
}
