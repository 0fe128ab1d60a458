// Package tlsreload serves a certificate and key from files and reads
// them again on SIGHUP or when they change on disk, so a certificate
// renewed by an ACME client or a secret mount rotates without a restart.
// A pair that fails to load (half written, mismatched) is logged and the
// previous one kept: a bad renewal never takes the API down.
package tlsreload

import (
	"context"
	"crypto/sha256"
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

// DefaultPoll is how often the files are read to see whether they changed.
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
	stamp   [sha256.Size]byte // digest of the files at the last load tried
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

// read returns the files' contents and a digest of them. The digest, not
// modification times, says whether they changed: a file replaced within
// the file system's timestamp granularity, with the same size, is seen.
func (r *Reloader) read() (certPEM, keyPEM []byte, stamp [sha256.Size]byte, err error) {
	if certPEM, err = os.ReadFile(r.certFile); err != nil {
		return nil, nil, stamp, fmt.Errorf("tls.cert_file: %w", err)
	}
	if keyPEM, err = os.ReadFile(r.keyFile); err != nil {
		return nil, nil, stamp, fmt.Errorf("tls.key_file: %w", err)
	}
	h := sha256.New()
	h.Write(certPEM)
	h.Write([]byte{0})
	h.Write(keyPEM)
	copy(stamp[:], h.Sum(nil))
	return certPEM, keyPEM, stamp, nil
}

func (r *Reloader) load() error {
	certPEM, keyPEM, stamp, err := r.read()
	if err != nil {
		return err
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	// Remembered even when it fails, so a broken pair is reported once,
	// not every poll; the next change of the files is tried again.
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stamp = stamp
	if err != nil {
		return fmt.Errorf("tls.cert_file, tls.key_file: %w", err)
	}
	r.cert = &c
	r.reloads++
	return nil
}

// changed reports whether the files differ from the last pair tried.
func (r *Reloader) changed() bool {
	_, _, stamp, err := r.read()
	if err != nil {
		return false // half replaced, or gone: wait for the next look
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return stamp != r.stamp
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
				if r.changed() {
					_ = r.Reload()
				}
			}
		}
	}()
	return nil
}
