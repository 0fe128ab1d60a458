package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"golang.org/x/net/netutil"

	"github.com/ontimehq/ontime"
)

// runServe runs a node until SIGINT/SIGTERM: with no flags, SQLite under
// ./ontime-data, the in-process hot tier and the API on 127.0.0.1:7070.
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "path to ontime.yaml (default: built-in defaults)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "ontime: serve: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	cfg, err := ontime.LoadConfig(*cfgPath, os.Environ())
	if err != nil {
		fmt.Fprintf(stderr, "ontime: serve: %v\n", err)
		return 1
	}
	log := ontime.NewLogger(stderr, cfg.LogLevel)
	node, err := ontime.NewNode(ctx, cfg, ontime.WithLogger(log))
	if err != nil {
		fmt.Fprintf(stderr, "ontime: serve: %v\n", err)
		return 1
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		fmt.Fprintf(stderr, "ontime: serve: listen: %v\n", err)
		_ = node.Stop(context.Background())
		return 1
	}
	if err := node.Start(ctx); err != nil {
		fmt.Fprintf(stderr, "ontime: serve: %v\n", err)
		ln.Close()
		_ = node.Stop(context.Background())
		return 1
	}
	srv := newHTTPServer(node.HTTPHandler(), cfg.HTTP)
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(netutil.LimitListener(ln, cfg.HTTP.MaxConnections)) }()
	log.Info("ontime serving", "listen", ln.Addr().String(), "store", cfg.Store.Driver, "hot", cfg.Hot.Tier, "node", cfg.NodeID)
	fmt.Fprintf(stdout, "ontime listening on http://%s\n", ln.Addr())

	code := 0
	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case err := <-serveErr:
		fmt.Fprintf(stderr, "ontime: serve: %v\n", err)
		code = 1
	}
	// Stop accepting API calls first, then drain the pipeline.
	sctx, cancel := context.WithTimeout(context.Background(), time.Duration(cfg.Delivery.ShutdownGrace)+10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Warn("http shutdown", "err", err)
	}
	if err := node.Stop(sctx); err != nil {
		fmt.Fprintf(stderr, "ontime: serve: stop: %v\n", err)
		code = 1
	}
	return code
}

// newHTTPServer bounds the time a client may hold a connection: without
// these, a client trickling a body (or headers) a byte a second, or one
// idling on a keep-alive connection, holds it forever, and enough of them
// exhaust the node's file descriptors. The number of connections is
// bounded by the listener (netutil.LimitListener): past it, new ones wait
// in the kernel's backlog instead of costing a goroutine and buffers each.
func newHTTPServer(h http.Handler, c ontime.HTTPConfig) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: time.Duration(c.ReadHeaderTimeout),
		ReadTimeout:       time.Duration(c.ReadTimeout),
		WriteTimeout:      time.Duration(c.WriteTimeout),
		IdleTimeout:       time.Duration(c.IdleTimeout),
	}
}
