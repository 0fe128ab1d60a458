package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/net/netutil"

	"github.com/ontimehq/ontime"
)

func newServeCmd(g *globals) *cobra.Command {
	var cfgPath string
	var check bool
	cmd := &cobra.Command{
		Use:   "serve [--config ontime.yaml]",
		Short: "Run a node (API, scanner, delivery)",
		Long: `Run a node until SIGINT or SIGTERM. With no config it is a complete single
node: SQLite under ./ontime-data, the in-process hot tier and the API on
127.0.0.1:7070. Everything else comes from the config file, with ONTIME_*
environment variables overriding its keys (ONTIME_STORE_DRIVER for
store.driver). With --json the line saying where it listens is JSON.

With --check it validates the config and its connections and exits: 0
when the node could start, else non-zero with the error. It reads the
config and its secret files, opens the store as serve does (migrating an
older schema), reaches the hot tier and the coordinator and registers the
scan jobs and outboxes; it does not bind the listen address (a running
node may hold it) nor dial the brokers.`,
		Example: `  ontime serve
  ontime serve --config /etc/ontime/ontime.yaml
  ontime serve --config /etc/ontime/ontime.yaml --check
  ONTIME_LISTEN=0.0.0.0:7070 ontime serve --config ontime.yaml`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("server") {
				return usagef("--server is for the client verbs; serve listens on the config's listen (ONTIME_LISTEN)")
			}
			if check {
				return checkConfig(cmd.Context(), g, cfgPath, cmd.OutOrStdout(), cmd.ErrOrStderr())
			}
			return serve(cmd.Context(), g, cfgPath, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "", "path to ontime.yaml (default: built-in defaults)")
	cmd.Flags().BoolVar(&check, "check", false, "validate the config and its connections, then exit")
	return cmd
}

// checkConfig is serve --check: the config and what it connects to, then
// exit (nothing is started, nothing listens).
func checkConfig(ctx context.Context, g *globals, cfgPath string, stdout, stderr io.Writer) error {
	cfg, err := ontime.LoadConfig(cfgPath, os.Environ())
	if err != nil {
		return err
	}
	if _, _, err := net.SplitHostPort(cfg.Listen); err != nil {
		return fmt.Errorf("listen: %q is not host:port: %w", cfg.Listen, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	node, err := ontime.NewNode(ctx, cfg, ontime.WithLogger(cfg.Logger(stderr)))
	if err != nil {
		return err
	}
	checkErr := node.Check(ctx)
	if err := node.Stop(context.Background()); err != nil && checkErr == nil {
		checkErr = fmt.Errorf("stop: %w", err)
	}
	if checkErr != nil {
		return checkErr
	}
	c := node.Config()
	if g.json {
		return json.NewEncoder(stdout).Encode(map[string]any{"ok": true, "store": c.Store.Driver, "hot": c.Hot.Tier, "coordinator": c.Cluster.Coordinator})
	}
	_, err = fmt.Fprintf(stdout, "config ok: store %s (%d database(s)), hot tier %s, coordinator %s\n",
		c.Store.Driver, max(1, len(c.Store.Databases)), c.Hot.Tier, c.Cluster.Coordinator)
	return err
}

// serve runs a node until ctx ends: the API is served only once the node
// started, and on the way out it stops taking calls before draining.
func serve(ctx context.Context, g *globals, cfgPath string, stdout, stderr io.Writer) error {
	cfg, err := ontime.LoadConfig(cfgPath, os.Environ())
	if err != nil {
		return err
	}
	// The port first: a taken one is reported at once, not after the
	// store's connections and migrations.
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		var oe *net.OpError
		if errors.As(err, &oe) {
			err = oe.Err
		}
		return fmt.Errorf("listen: cannot listen on %s: %w", cfg.Listen, err)
	}
	log := cfg.Logger(stderr)
	if cfg.Debug.PprofListen != "" {
		stopPprof, _, err := servePprof(cfg.Debug.PprofListen, log)
		if err != nil {
			ln.Close()
			return err
		}
		defer stopPprof()
	}
	// The expander of POST /v1/store:expand outlives the nodes an
	// online cutover switches between.
	exp := ontime.NewExpander(cfg, log)
	if err := exp.Start(ctx); err != nil {
		ln.Close()
		return err
	}
	defer exp.Stop()
	node, err := ontime.NewNode(ctx, cfg, ontime.WithLogger(log), ontime.WithExpander(exp))
	if err != nil {
		ln.Close()
		return err
	}
	ln, scheme, stopTLS, err := serveTLS(ctx, cfg, ln, log)
	if err != nil {
		_ = node.Stop(context.Background())
		return err
	}
	defer stopTLS()
	if err := node.Start(ctx); err != nil {
		ln.Close()
		_ = node.Stop(context.Background())
		return err
	}
	g2 := newGate(node.HTTPHandler())
	srv := newHTTPServer(g2, cfg.HTTP)
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(netutil.LimitListener(ln, cfg.HTTP.MaxConnections)) }()
	log.Info("ontime serving", "listen", ln.Addr().String(), "store", cfg.Store.Driver, "hot", cfg.Hot.Tier, "node", cfg.NodeID)
	if g.json {
		_ = json.NewEncoder(stdout).Encode(map[string]string{"listening": scheme + "://" + ln.Addr().String()})
	} else {
		fmt.Fprintf(stdout, "ontime listening on %s://%s\n", scheme, ln.Addr())
	}

	var failed error
serving:
	for {
		select {
		case <-ctx.Done():
			log.Info("shutting down")
			break serving
		case err := <-serveErr:
			failed = err
			break serving
		case <-node.TopologyChanged():
			// An expansion's online cutover: calls wait at the gate
			// while the node stops, the cutover runs, and a node on
			// the grown store starts.
			next, nextCfg, err := switchTopology(ctx, cfg, node, g2, log, ontime.WithExpander(exp))
			if err != nil {
				if ctx.Err() != nil {
					break serving
				}
				_ = srv.Close()
				return err
			}
			node, cfg = next, nextCfg
		}
	}
	// Stop accepting API calls first, then drain the pipeline.
	sctx, cancel := context.WithTimeout(context.Background(), time.Duration(cfg.Delivery.ShutdownGrace)+10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Warn("http shutdown", "err", err)
	}
	if err := node.Stop(sctx); err != nil {
		return errors.Join(failed, fmt.Errorf("stop: %w", err))
	}
	return failed
}

// newHTTPServer bounds the time a client may hold a connection: without
// these, a client trickling a body (or headers) a byte a second, or one
// idling on a keep-alive connection, holds it forever, and enough of them
// exhaust the node's file descriptors. The number of connections is
// bounded by the listener (netutil.LimitListener): past it, new ones wait
// in the kernel's backlog instead of costing a goroutine and buffers each.
//
// HTTP/1.1 with keep-alive is served, and beside it HTTP/2 cleartext (h2c
// with prior knowledge) for clients that speak it (client.WithHTTP2Cleartext):
// their concurrent calls share one connection. An HTTP/1.1 client is
// unaffected: the server tells the two apart by the HTTP/2 preface.
func newHTTPServer(h http.Handler, c ontime.HTTPConfig) *http.Server {
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetHTTP2(true)
	p.SetUnencryptedHTTP2(true)
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: time.Duration(c.ReadHeaderTimeout),
		ReadTimeout:       time.Duration(c.ReadTimeout),
		WriteTimeout:      time.Duration(c.WriteTimeout),
		IdleTimeout:       time.Duration(c.IdleTimeout),
		Protocols:         &p,
	}
}
