package main

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/ontimehq/ontime"
)

// gate is the HTTP handler of ontime serve: the node's, except while the
// node is switched to a grown store (an expansion's online cutover), when
// calls wait for the next node rather than fail.
type gate struct {
	mu       sync.Mutex
	h        http.Handler
	open     chan struct{} // closed while calls pass
	inflight sync.WaitGroup
}

func newGate(h http.Handler) *gate {
	g := &gate{h: h, open: make(chan struct{})}
	close(g.open)
	return g
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	for {
		g.mu.Lock()
		select {
		case <-g.open:
			h := g.h
			g.inflight.Add(1)
			g.mu.Unlock()
			defer g.inflight.Done()
			h.ServeHTTP(w, r)
			return
		default:
		}
		open := g.open
		g.mu.Unlock()
		select {
		case <-open:
		case <-r.Context().Done():
			http.Error(w, "the node is switching to the store's grown databases", http.StatusServiceUnavailable)
			return
		}
	}
}

// close holds new calls and waits up to grace for those under way.
func (g *gate) close(grace time.Duration) {
	g.mu.Lock()
	g.open = make(chan struct{})
	g.mu.Unlock()
	done := make(chan struct{})
	go func() { g.inflight.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
	}
}

// reopen lets calls through to h.
func (g *gate) reopen(h http.Handler) {
	g.mu.Lock()
	g.h = h
	close(g.open)
	g.mu.Unlock()
}

// switchTopology stops node for an expansion's cutover, waits for it, and
// starts a node on the store's databases then (grown, or the same ones
// when the cutover did not happen): ontime.SwitchTopology, with calls
// waiting at the gate meanwhile.
func switchTopology(ctx context.Context, cfg ontime.Config, node *ontime.Node, g *gate, log *slog.Logger, opts ...ontime.NodeOption) (*ontime.Node, ontime.Config, error) {
	start := time.Now()
	grace := time.Duration(cfg.Delivery.ShutdownGrace) + 10*time.Second
	g.close(grace)
	n, next, err := ontime.SwitchTopology(ctx, node, grace, opts...)
	if err != nil {
		return nil, cfg, err
	}
	g.reopen(n.HTTPHandler())
	if len(next.Store.Databases) != len(cfg.Store.Databases) {
		log.Warn("store grown under this node: set store.databases to these before its next restart", "databases", next.Store.Databases,
			"paused", time.Since(start).Round(time.Millisecond))
	} else {
		log.Info("store cutover did not happen: serving the same databases", "paused", time.Since(start).Round(time.Millisecond))
	}
	return n, next, nil
}
