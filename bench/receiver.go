package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// hookReceiver is the webhook receiver of the bench: a net/http server on
// loopback (keep-alive) that records each task's lateness, one task per
// call or a batch {"tasks":[body, …]}. It must cost the machine as little
// as possible, since it shares the two cores with the node it measures:
// bodies are read into pooled buffers and the job (id, due) is picked out
// of each payload by a byte scan, with a full JSON decode only when the
// scan does not recognise the body.
type hookReceiver struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
	rec  func(string, time.Time)
	bufs sync.Pool
	// calls and tasks received, so the report can show how many tasks a
	// call carried (batch delivery at work).
	calls, tasks atomic.Int64
}

// perCall answers the tasks per call received so far (0: no call).
func (h *hookReceiver) perCall() float64 {
	c := h.calls.Load()
	if c == 0 {
		return 0
	}
	return float64(h.tasks.Load()) / float64(c)
}

// startReceiver listens on a free loopback port and serves until stop.
func startReceiver(rec func(string, time.Time)) (*hookReceiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	h := &hookReceiver{ln: ln, done: make(chan struct{}), rec: rec,
		bufs: sync.Pool{New: func() any { return new(bytes.Buffer) }}}
	h.srv = &http.Server{Handler: h, IdleTimeout: 2 * time.Minute, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(h.done)
		_ = h.srv.Serve(ln)
	}()
	return h, nil
}

// origin is scheme://host of the receiver (a destination's key).
func (h *hookReceiver) origin() string { return "http://" + h.ln.Addr().String() }

// url is the target tasks are given.
func (h *hookReceiver) url() string { return h.origin() + "/hook" }

func (h *hookReceiver) stop() {
	_ = h.srv.Close()
	<-h.done
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	buf := h.bufs.Get().(*bytes.Buffer)
	defer h.bufs.Put(buf)
	buf.Reset()
	if _, err := buf.ReadFrom(io.LimitReader(r.Body, 64<<20)); err != nil {
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	body := buf.Bytes()
	if bytes.HasPrefix(body, []byte(`{"tasks":`)) {
		n, err := h.batch(body)
		h.calls.Add(1)
		h.tasks.Add(int64(n))
		if err != nil || n == 0 {
			// 4xx: ontime retries; shows up as lateness and in the log.
			http.Error(w, "bad batch body", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"failed":[]}`))
		return
	}
	id, due, ok := scanJob(body)
	if !ok {
		var b struct {
			Payload job `json:"payload"`
		}
		if json.Unmarshal(body, &b) != nil || b.Payload.ID == "" {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		id, due = b.Payload.ID, b.Payload.Due
	}
	h.calls.Add(1)
	h.tasks.Add(1)
	h.rec(id, due)
	w.WriteHeader(http.StatusNoContent)
}

// batch records every task of a batch call; it answers how many.
func (h *hookReceiver) batch(body []byte) (int, error) {
	n, rest := 0, body
	for {
		id, due, next, ok := scanNext(rest)
		if !ok {
			break
		}
		h.rec(id, due)
		n++
		rest = next
	}
	if n > 0 {
		return n, nil
	}
	var b struct {
		Tasks []struct {
			Payload job `json:"payload"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return 0, err
	}
	for _, t := range b.Tasks {
		if t.Payload.ID == "" {
			return n, errors.New("a task without a job id")
		}
		h.rec(t.Payload.ID, t.Payload.Due)
		n++
	}
	return n, nil
}

// The payload of every bench task is json.Marshal(job{…}), which ontime
// passes through byte for byte inside the webhook body.
var (
	payloadOpen = []byte(`"payload":{"id":"`)
	dueOpen     = []byte(`","due":"`)
)

// scanJob picks the job out of one webhook body.
func scanJob(body []byte) (string, time.Time, bool) {
	id, due, _, ok := scanNext(body)
	return id, due, ok
}

// scanNext finds the next payload in b and answers the job and the rest.
func scanNext(b []byte) (id string, due time.Time, rest []byte, ok bool) {
	i := bytes.Index(b, payloadOpen)
	if i < 0 {
		return "", time.Time{}, nil, false
	}
	b = b[i+len(payloadOpen):]
	j := bytes.Index(b, dueOpen)
	if j < 0 || bytes.IndexByte(b[:j], '"') >= 0 {
		return "", time.Time{}, nil, false
	}
	id = string(b[:j])
	b = b[j+len(dueOpen):]
	k := bytes.IndexByte(b, '"')
	if k < 0 {
		return "", time.Time{}, nil, false
	}
	due, err := time.Parse(time.RFC3339Nano, string(b[:k]))
	if err != nil {
		return "", time.Time{}, nil, false
	}
	return id, due, b[k:], true
}
