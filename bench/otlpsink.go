package main

import (
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// otlpSink is an OTLP/HTTP trace collector that keeps nothing: it reads
// each export request and answers 200 with an empty
// ExportTraceServiceResponse (an empty protobuf message is zero bytes).
// It stands in for a collector so a traced node's cost is its own.
type otlpSink struct {
	ln       net.Listener
	srv      *http.Server
	done     chan struct{}
	requests atomic.Int64
	bytes    atomic.Int64
}

func startOTLPSink() (*otlpSink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &otlpSink{ln: ln, done: make(chan struct{})}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

func (s *otlpSink) url() string { return "http://" + s.ln.Addr().String() }

func (s *otlpSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n, _ := io.Copy(io.Discard, r.Body)
	s.requests.Add(1)
	s.bytes.Add(n)
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.WriteHeader(http.StatusOK)
}

func (s *otlpSink) stop() {
	_ = s.srv.Close()
	<-s.done
}
