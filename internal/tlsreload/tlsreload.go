// Package tlsreload serves a certificate and key from files and reads
// them again on SIGHUP or when they change on disk, so a certificate
// renewed by an ACME client or a secret mount rotates without a restart.
// A pair that fails to load (half written, mismatched) is logged and the
// previous one kept: a bad renewal never takes the API down.
package tlsreload

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/ontimehq/ontime/internal/startstop"
)

// DefaultPoll is how often the files' modification times are read.
const DefaultPoll = 2 * time.Second

// Reloader holds the current certificate. Between Start and Stop it
// watches SIGHUP and the files.
type Reloader struct {
	startstop.Base
	certFile, keyFile string
	poll              time.Duration
	log               *slog.Logger

	mu      sync.RWMutex
	cert    *tls.Certificate
	stamp   string // the files' sizes and modification times at the last load
	reloads int
}

// New loads the pair once; an error names the file keys.
func New(certFile, keyFile string, poll time.Duration, log *slog.Logger) (*Reloader, error) {
	if poll <= 0 {
		poll = DefaultPoll
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Reloader{certFile: certFile, keyFile: keyFile, poll: poll, log: log}
	if err := r.load(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Reloader) fileStamp() string {
	var s string
	for _, f := range []string{r.certFile, r.keyFile} {
		if fi, err := os.Stat(f); err == nil {
			s += fmt.Sprintf("%d/%d;", fi.Size(), fi.ModTime().UnixNano())
		}
	}
	return s
}

func (r *Reloader) load() error {
	stamp := r.fileStamp()
	c, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		// Remembered, so a broken pair is reported once, not every poll;
		// the next change of the files is tried again.
		r.mu.Lock()
		r.stamp = stamp
		r.mu.Unlock()
		return fmt.Errorf("tls.cert_file, tls.key_file: %w", err)
	}
	r.mu.Lock()
	r.cert, r.stamp = &c, stamp
	r.reloads++
	r.mu.Unlock()
	return nil
}

// Reload reads the files again now; on error the previous pair stays.
func (r *Reloader) Reload() error {
	if err := r.load(); err != nil {
		r.log.Warn("tls: reload failed; serving the previous certificate", "err", err)
		return err
	}
	r.log.Info("tls: certificate reloaded", "cert_file", r.certFile)
	return nil
}

// Loads is how many times a pair was loaded (1 after New).
func (r *Reloader) Loads() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.reloads
}

// GetCertificate is for tls.Config.GetCertificate.
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.cert, nil
}

// TLSConfig is a server config serving the current pair.
func (r *Reloader) TLSConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.GetCertificate}
}

// Start watches SIGHUP and the files until Stop.
func (r *Reloader) Start(ctx context.Context) error {
	ctx, ok, started, stopped := r.StartInit(ctx)
	if !ok {
		return nil
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	started()
	go func() {
		defer stopped()
		defer signal.Stop(hup)
		t := time.NewTicker(r.poll)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				_ = r.Reload()
			case <-t.C:
				r.mu.RLock()
				last := r.stamp
				r.mu.RUnlock()
				if r.fileStamp() != last {
					_ = r.Reload()
				}
			}
		}
	}()
	return nil
}
