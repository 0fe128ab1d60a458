package main

import (
	"strings"
	"testing"
)

func TestOutboxDDL(t *testing.T) {
	code, out, errs := runCLI("outbox", "ddl", "--driver", "mysql", "--table", "outbox_3")
	if code != 0 || !strings.Contains(out, "CREATE TABLE IF NOT EXISTS `outbox_3`") || !strings.Contains(out, "`outbox_3_key` (msg_key, status, id)") {
		t.Fatalf("exit %d: %s %s", code, out, errs)
	}
	code, out, _ = runCLI("outbox", "ddl", "--driver", "postgres", "--table", "app.outbox")
	if code != 0 || !strings.Contains(out, `"app"."outbox"`) || strings.Count(out, ";\n") != 3 {
		t.Fatalf("exit %d: %s", code, out)
	}
	if code, _, errs := runCLI("outbox", "ddl", "--driver", "oracle", "--table", "outbox"); code != 2 || !strings.Contains(errs, "table.dialect") {
		t.Fatalf("a bad driver: exit %d: %s", code, errs)
	}
	if code, _, errs := runCLI("outbox", "ddl", "--driver", "mysql", "--table", "out box"); code != 2 || !strings.Contains(errs, "table") {
		t.Fatalf("a bad table: exit %d: %s", code, errs)
	}
	if code, _, _ := runCLI("outbox", "ddl"); code != 2 {
		t.Fatalf("no flags: exit %d", code)
	}
}
