package ontime

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/ontimehq/ontime/internal/api"
	"github.com/ontimehq/ontime/internal/startstop"
)

// openAudit builds the node's auditor (internal/api/audit.go): its lines
// go to audit.file as JSON lines when set, else to the node's log. Either
// way through the node's redactor, so a secret in a path or an error
// never reaches them. The file stays open until closeResources, and is
// opened again on SIGHUP (auditReopener) or ReopenAudit.
func (n *Node) openAudit() error {
	if n.cfg.Audit.File == "" {
		n.audit = api.NewAuditor(n.log)
		n.audit.Submits = n.cfg.Audit.Submits
		return nil
	}
	f := &auditFile{path: n.cfg.Audit.File}
	if err := f.Reopen(); err != nil {
		return err
	}
	n.auditFile = f
	h := slog.NewJSONHandler(f, &slog.HandlerOptions{Level: slog.LevelInfo})
	n.audit = api.NewAuditor(slog.New(n.sec.redactor().Handler(h)).With("node", n.cfg.NodeID))
	n.audit.Submits = n.cfg.Audit.Submits
	return nil
}

// ReopenAudit closes audit.file and opens its path again (created if
// missing), so lines after it go to a new file once logrotate (or an
// operator) has moved the old one away. ontime serve does it on SIGHUP;
// an embedding program calls it from its own rotation. Nothing to do
// without audit.file.
func (n *Node) ReopenAudit() error {
	if n.auditFile == nil {
		return nil
	}
	return n.auditFile.Reopen()
}

// closeAudit closes audit.file, if open. n.auditFile stays set (a
// ReopenAudit racing the close reads it): closed, it refuses to reopen.
func (n *Node) closeAudit() error {
	if n.auditFile == nil {
		return nil
	}
	return n.auditFile.Close()
}

// auditFile is audit.file: the JSON handler's writer, reopened in place
// under rotation. Each audit line is one Write (slog's JSON handler
// writes a record at once), so a line is never split between two files.
type auditFile struct {
	path   string
	mu     sync.Mutex
	f      *os.File
	closed bool // by the node's close: no reopening after it
}

func (a *auditFile) Write(p []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f == nil {
		return 0, fmt.Errorf("audit.file %s: %w", a.path, os.ErrClosed)
	}
	return a.f.Write(p)
}

// Reopen opens the path and only then closes the old file: when the open
// fails (a directory gone, a permission changed), lines keep going to the
// old file and the error says why.
func (a *auditFile) Reopen() error {
	f, err := os.OpenFile(a.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("audit.file: %w", err)
	}
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		f.Close()
		return fmt.Errorf("audit.file %s: %w", a.path, os.ErrClosed)
	}
	old := a.f
	a.f = f
	a.mu.Unlock()
	if old != nil {
		if err := old.Close(); err != nil {
			return fmt.Errorf("audit.file: closing the old file: %w", err)
		}
	}
	return nil
}

func (a *auditFile) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
	if a.f == nil {
		return nil
	}
	err := a.f.Close()
	a.f = nil
	return err
}

// auditReopener reopens audit.file on each SIGHUP while the node runs
// (the signal logrotate's postrotate sends; the TLS reloader takes the
// same signal for its certificates).
type auditReopener struct {
	startstop.Base
	n *Node
}

func (r *auditReopener) Start(ctx context.Context) error {
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
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if err := r.n.ReopenAudit(); err != nil {
					r.n.log.Error("reopening the audit file on SIGHUP", "err", err)
				} else {
					r.n.log.Info("audit file reopened (SIGHUP)", "path", r.n.cfg.Audit.File)
				}
			}
		}
	}()
	return nil
}

// auditServices is the reopener when audit.file is set.
func (n *Node) auditServices() []startstop.Service {
	if n.auditFile == nil {
		return nil
	}
	return []startstop.Service{&auditReopener{n: n}}
}
