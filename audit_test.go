package ontime

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestReopenAuditAfterClose: ReopenAudit moves audit.file to a new file at
// its path; once the node has stopped (its file closed) it refuses with
// os.ErrClosed instead of opening a file nobody closes.
func TestReopenAuditAfterClose(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.DataDir = dir
	cfg.Store.Tables = 2
	cfg.Audit.File = filepath.Join(dir, "audit.jsonl")
	ctx := context.Background()
	n, err := NewNode(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(cfg.Audit.File, cfg.Audit.File+".1"); err != nil {
		t.Fatal(err)
	}
	if err := n.ReopenAudit(); err != nil {
		t.Fatalf("ReopenAudit: %v", err)
	}
	if _, err := os.Stat(cfg.Audit.File); err != nil {
		t.Fatalf("no new audit file: %v", err)
	}
	if err := n.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := n.ReopenAudit(); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("ReopenAudit after Stop: %v, want os.ErrClosed", err)
	}
}
