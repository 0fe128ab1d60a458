package main

import (
	"github.com/spf13/cobra"

	"github.com/ontimehq/ontime/client"
)

// addSecurityFlags registers --token and --ca-file on every verb. The
// token's default comes from ONTIME_TOKEN at call time and is not shown
// in the help, which would print it.
func addSecurityFlags(root *cobra.Command, g *globals) {
	root.PersistentFlags().StringVar(&g.token, "token", "", "API bearer token (env ONTIME_TOKEN)")
	root.PersistentFlags().StringVar(&g.caFile, "ca-file", g.env("ONTIME_CA_FILE"), "PEM CA certificates to trust for an https server (env ONTIME_CA_FILE)")
}

// clientOptions are the token and CA options of the API client.
func (g *globals) clientOptions() []client.Option {
	var opts []client.Option
	token := g.token
	if token == "" {
		token = g.env("ONTIME_TOKEN")
	}
	if token != "" {
		opts = append(opts, client.WithToken(token))
	}
	if g.caFile != "" {
		opts = append(opts, client.WithCAFile(g.caFile))
	}
	return opts
}
