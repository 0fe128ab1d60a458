package console

import (
	"bytes"
	"io"
	"net/http"
)

// inproc is an http.RoundTripper that serves the request with the API
// handler in this process: the console's client calls cost a handler call,
// not a connection, and see exactly what a remote client would (auth,
// validation, paging).
type inproc struct{ h http.Handler }

func (t inproc) RoundTrip(r *http.Request) (*http.Response, error) {
	w := &recorder{header: http.Header{}}
	r.RemoteAddr = "127.0.0.1:0" // the console itself; the API logs it
	r.RequestURI = r.URL.RequestURI()
	t.h.ServeHTTP(w, r)
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return &http.Response{
		Status:        http.StatusText(w.status),
		StatusCode:    w.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.header,
		Body:          io.NopCloser(bytes.NewReader(w.body.Bytes())),
		ContentLength: int64(w.body.Len()),
		Request:       r,
	}, nil
}

// recorder is the http.ResponseWriter of an in-process call.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *recorder) Header() http.Header { return w.header }

func (w *recorder) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *recorder) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.body.Write(b)
}
