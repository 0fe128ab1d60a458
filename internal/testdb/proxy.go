package testdb

import (
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/go-sql-driver/mysql"
)

// Proxy forwards TCP connections from a loopback port of its own to a real
// server. Down closes the port and every forwarded connection, so that a
// client sees the server go away as it would if it crashed (refused dials,
// reset sockets); Up opens the same port again. Pause holds every byte in
// both directions, connections open, like a server stuck in a long pause;
// Resume lets them through.
type Proxy struct {
	t      testing.TB
	target string
	addr   string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
	gate  chan struct{} // non-nil while paused; Resume closes it
	held  atomic.Int64  // bytes held back by Pause
}

// NewProxy starts a proxy to target (host:port), up; it stops when t ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	p := &Proxy{t: t, target: target, conns: map[net.Conn]struct{}{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testdb: proxy listen: %v", err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(func() {
		p.Resume()
		p.Down()
		p.wg.Wait()
	})
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.addr }

// ProxyDSN starts a proxy in front of the server of dsn (an engine's DSN
// as DSNs returns it) and returns the DSN that goes through it.
func ProxyDSN(t testing.TB, engine, dsn string) (string, *Proxy) {
	t.Helper()
	switch engine {
	case "postgres":
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatalf("testdb: proxy: %v", err)
		}
		p := NewProxy(t, u.Host)
		u.Host = p.Addr()
		return u.String(), p
	case "mysql":
		c, err := mysql.ParseDSN(dsn)
		if err != nil {
			t.Fatalf("testdb: proxy: %v", err)
		}
		p := NewProxy(t, c.Addr)
		c.Addr = p.Addr()
		return c.FormatDSN(), p
	default:
		t.Fatalf("testdb: no proxy for engine %q", engine)
		return "", nil
	}
}

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.forward(c)
		}
	}()
}

func (p *Proxy) forward(c net.Conn) {
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.ln == nil { // went down while dialling
		p.mu.Unlock()
		c.Close()
		s.Close()
		return
	}
	p.conns[c], p.conns[s] = struct{}{}, struct{}{}
	p.mu.Unlock()
	pipe := func(dst, src net.Conn) {
		defer p.wg.Done()
		p.copy(dst, src)
		// One direction ended: end both, as a dead server would.
		dst.Close()
		src.Close()
		p.mu.Lock()
		delete(p.conns, dst)
		delete(p.conns, src)
		p.mu.Unlock()
	}
	p.wg.Add(2)
	go pipe(s, c)
	go pipe(c, s)
}

func (p *Proxy) copy(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			gate := p.gate
			p.mu.Unlock()
			if gate != nil {
				p.held.Add(int64(n))
				<-gate
			}
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Pause holds back every byte read from then on, in both directions, until
// Resume.
func (p *Proxy) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gate == nil {
		p.gate = make(chan struct{})
	}
}

// Resume forwards what Pause held back, and all that follows.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gate != nil {
		close(p.gate)
		p.gate = nil
	}
}

// Held is how many bytes Pause has held back so far: above zero once a
// client wrote while paused.
func (p *Proxy) Held() int64 { return p.held.Load() }

// Down stops accepting and cuts every forwarded connection.
func (p *Proxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		// Reset, not FIN: a crashed server's peer sees ECONNRESET.
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		c.Close()
	}
}

// Up listens on the proxy's port again.
func (p *Proxy) Up() {
	p.t.Helper()
	p.mu.Lock()
	up := p.ln != nil
	p.mu.Unlock()
	if up {
		return
	}
	// The port may have been taken while down; rare enough on loopback.
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatalf("testdb: proxy: listen again on %s: %v", p.addr, err)
	}
	p.serve(ln)
}
