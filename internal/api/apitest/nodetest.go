// Package apitest starts an embedded-default node with its HTTP API on a
// real loopback socket, for the tests of the API and the CLI.
package apitest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/ontimehq/ontime"
)

// Start runs a node on SQLite in t's temp dir (2 tables, mod adjusts the
// config) and returns its API base URL; everything stops when t ends. Every
// request and answer is checked against the OpenAPI spec (apiv1).
func Start(t testing.TB, mod func(*ontime.Config)) string {
	t.Helper()
	url, _ := StartHandler(t, mod)
	return url
}

// StartHandler is Start that also returns the node's own HTTP handler.
func StartHandler(t testing.TB, mod func(*ontime.Config)) (string, http.Handler) {
	t.Helper()
	cfg := ontime.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Store.Tables = 2
	if mod != nil {
		mod(&cfg)
	}
	ctx := context.Background()
	node, err := ontime.NewNode(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	h := node.HTTPHandler()
	srv := httptest.NewServer(newChecker(t, h))
	t.Cleanup(func() {
		srv.Close()
		if err := node.Stop(context.Background()); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return srv.URL, h
}
