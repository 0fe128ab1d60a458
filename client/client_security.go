package client

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// WithToken sends token as the bearer token of every call
// (Authorization: Bearer …); the CLI takes it from --token or ONTIME_TOKEN.
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithCAFile trusts the CA certificates in the PEM file caFile (in place
// of the system's) for an https:// server, such as a node whose
// certificate a private CA signed. Give it after WithHTTPClient, which
// replaces the whole client.
func WithCAFile(caFile string) Option {
	return func(c *Client) {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			c.err = fmt.Errorf("ca file: %w", err)
			return
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			c.err = fmt.Errorf("ca file: %s holds no PEM certificate", caFile)
			return
		}
		tr := c.transport()
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		c.setTransport(tr)
	}
}
