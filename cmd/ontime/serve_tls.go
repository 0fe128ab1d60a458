package main

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"

	"github.com/ontimehq/ontime"
)

// serveTLS wraps ln in TLS when tls.cert_file is set, with the pair read
// again on SIGHUP or when the files change; stop ends that watch. scheme
// is what clients dial: http or https.
func serveTLS(ctx context.Context, cfg ontime.Config, ln net.Listener, log *slog.Logger) (_ net.Listener, scheme string, stop func(), err error) {
	r, err := cfg.NewTLSReloader(log)
	if err == nil && r != nil {
		err = r.Start(context.WithoutCancel(ctx))
	}
	if err != nil {
		ln.Close()
		return nil, "", nil, err
	}
	if r == nil {
		return ln, "http", func() {}, nil
	}
	return tls.NewListener(ln, r.TLSConfig()), "https", r.Stop, nil
}
