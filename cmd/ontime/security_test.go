package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/internal/api/apitest"
)

// The CLI sends --token (or ONTIME_TOKEN); without it, or with a token of
// too small a role, it fails with one line and exit code 6.
func TestCLIToken(t *testing.T) {
	const writeTok, readTok = "cli-write-token-0123456789", "cli-read-token-01234567890"
	dir := t.TempDir()
	server := apitest.Start(t, func(c *ontime.Config) {
		for name, tok := range map[string]string{"write": writeTok, "read": readTok} {
			f := filepath.Join(dir, name)
			os.WriteFile(f, []byte(tok), 0o600)
			c.Auth.Tokens = append(c.Auth.Tokens, ontime.TokenConfig{Name: name, TokenFile: f, Role: name})
		}
	})
	runTok := func(args ...string) (int, string, string) {
		var o, e bytes.Buffer
		code := run(context.Background(), append(args, "--server", server), &o, &e)
		return code, o.String(), e.String()
	}
	code, _, errs := runTok("submit", "--topic", "cli.auth", "--in", "1h", "--target", "http://127.0.0.1:9/hook")
	if code != exitUnauthorized || !strings.Contains(errs, "unauthorized") {
		t.Fatalf("without a token: %d %q", code, errs)
	}
	oneLine(t, errs)
	code, _, errs = runTok("submit", "--topic", "cli.auth", "--in", "1h", "--token", readTok, "--target", "http://127.0.0.1:9/hook")
	if code != exitUnauthorized || !strings.Contains(errs, "forbidden") || strings.Contains(errs, readTok) {
		t.Fatalf("read token: %d %q", code, errs)
	}
	oneLine(t, errs)
	code, out, errs := runTok("submit", "--topic", "cli.auth", "--in", "1h", "--token", writeTok, "--json", "--target", "http://127.0.0.1:9/hook")
	if code != 0 {
		t.Fatalf("write token: %d %q", code, errs)
	}
	t.Setenv("ONTIME_TOKEN", readTok) // not parallel: the environment is the process's
	if code, out2, errs := runTok("list", "--topic", "cli.auth"); code != 0 || !strings.Contains(out2, "cli.auth") {
		t.Fatalf("ONTIME_TOKEN: %d %q %q (submitted %s)", code, out2, errs, out)
	}
	if code, _, errs := runTok("list", "--ca-file", filepath.Join(dir, "missing.pem")); code != 2 || !strings.Contains(errs, "ca file") {
		t.Fatalf("missing CA file: %d %q", code, errs)
	}
}
