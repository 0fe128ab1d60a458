package ontime

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/ontimehq/ontime/internal/api"
)

// openAudit builds the node's auditor (internal/api/audit.go): its lines
// go to audit.file as JSON lines when set, else to the node's log. Either
// way through the node's redactor, so a secret in a path or an error
// never reaches them. The file stays open until closeResources.
func (n *Node) openAudit() error {
	if n.cfg.Audit.File == "" {
		n.audit = api.NewAuditor(n.log)
		n.audit.Submits = n.cfg.Audit.Submits
		return nil
	}
	f, err := os.OpenFile(n.cfg.Audit.File, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("audit.file: %w", err)
	}
	n.auditFile = f
	h := slog.NewJSONHandler(f, &slog.HandlerOptions{Level: slog.LevelInfo})
	n.audit = api.NewAuditor(slog.New(n.sec.redactor().Handler(h)).With("node", n.cfg.NodeID))
	n.audit.Submits = n.cfg.Audit.Submits
	return nil
}

// closeAudit closes audit.file, if open.
func (n *Node) closeAudit() error {
	if n.auditFile == nil {
		return nil
	}
	err := n.auditFile.Close()
	n.auditFile = nil
	return err
}
