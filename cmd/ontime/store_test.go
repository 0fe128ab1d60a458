package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ontimehq/ontime/apiv1"
)

// TestStoreVerbs walks an expansion of a SQLite store through the CLI:
// status, a copy, an abort, a copy again, the cutover and cleanup, and
// the old config refused afterwards.
func TestStoreVerbs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.db"), filepath.Join(dir, "b.db")
	cfg := filepath.Join(dir, "ontime.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("data_dir: %s\nstore: {driver: sqlite, databases: [%q], tables: 4, segments: 1}\n", dir, a)), 0o644); err != nil {
		t.Fatal(err)
	}
	status := func() apiv1.StoreStatus {
		t.Helper()
		code, out, errs := runCLI("store", "status", "--config", cfg, "--json")
		var v apiv1.StoreStatus
		if err := json.Unmarshal([]byte(out), &v); code != 0 || err != nil {
			t.Fatalf("status: exit %d %v %s %s", code, err, out, errs)
		}
		return v
	}
	if v := status(); v.Databases != 1 || v.Tables != 4 || v.Expansion != nil {
		t.Fatalf("%+v", v)
	}
	if code, _, errs := runCLI("store", "expand", "--config", cfg); code != exitUsage || !strings.Contains(errs, "--databases: name 1 new databases") {
		t.Fatalf("no --databases: exit %d %s", code, errs)
	}
	if code, out, errs := runCLI("store", "expand", "--config", cfg, "--databases", b); code != 0 || !strings.Contains(out, "next: run this command again with --cutover") {
		t.Fatalf("copy: exit %d %s %s", code, out, errs)
	}
	if v := status(); v.Expansion == nil || v.Expansion.Phase != "copy" || v.Expansion.TablesCopied != 4 || v.Expansion.To != 2 {
		t.Fatalf("%+v", v.Expansion)
	}
	if code, out, _ := runCLI("store", "abort", "--config", cfg); code != 0 || !strings.Contains(out, "as it was") {
		t.Fatalf("abort: %d %s", code, out)
	}
	if v := status(); v.Expansion != nil {
		t.Fatalf("after abort %+v", v.Expansion)
	}
	if code, out, errs := runCLI("store", "expand", "--config", cfg, "--databases", b, "--cutover"); code != 0 || !strings.Contains(out, "cut over") || !strings.Contains(out, "cleaned up") ||
		!strings.Contains(out, "until they stopped writing") || !strings.Contains(out, "the last catch-up") {
		t.Fatalf("cutover: exit %d %s %s", code, out, errs)
	}
	code, _, errs := runCLI("store", "status", "--config", cfg)
	if code != exitError || !strings.Contains(errs, "is missing from store.databases") {
		t.Fatalf("old config after cutover: exit %d %s", code, errs)
	}
	oneLine(t, errs)
	if code, _, errs := runCLI("store", "expand", "--config", cfg, "--databases", b, "--page", "-1"); code != exitUsage || !strings.Contains(errs, "--page") {
		t.Fatalf("--page -1: exit %d %s", code, errs)
	}
	for flag, v := range map[string]string{"--nice": "101", "--rate": "-5"} {
		if code, _, errs := runCLI("store", "expand", "--config", cfg, "--databases", b, flag, v); code != exitUsage || !strings.Contains(errs, flag+": ") {
			t.Fatalf("%s %s: exit %d %s", flag, v, code, errs)
		}
	}

	// And again, 2 → 4, with the grown config.
	c, d := filepath.Join(dir, "c.db"), filepath.Join(dir, "d.db")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("data_dir: %s\nstore: {driver: sqlite, databases: [%q, %q], tables: 4, segments: 1}\n", dir, a, b)), 0o644); err != nil {
		t.Fatal(err)
	}
	if v := status(); v.Databases != 2 || v.Expansion != nil || v.Epoch != 2 {
		t.Fatalf("grown: %+v", v)
	}
	if code, _, errs := runCLI("store", "expand", "--config", cfg, "--databases", c); code != exitError || !strings.Contains(errs, "needs 2 new ones, got 1") {
		t.Fatalf("one database for two: exit %d %s", code, errs)
	}
	// The new databases from the config (store.expand_databases), each
	// refusal naming the key.
	grow := func(expand ...string) {
		t.Helper()
		if err := os.WriteFile(cfg, []byte(fmt.Sprintf("data_dir: %s\nstore: {driver: sqlite, databases: [%q, %q], expand_databases: [\"%s\"], tables: 4, segments: 1}\n", dir, a, b, strings.Join(expand, `", "`))), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	grow(c)
	if code, _, errs := runCLI("store", "expand", "--config", cfg); code != exitError || !strings.Contains(errs, "store.expand_databases: the store has 2 databases; doubling it needs 2 new ones, got 1") {
		t.Fatalf("one database for two in the config: exit %d %s", code, errs)
	}
	grow(c, a)
	if code, _, errs := runCLI("store", "expand", "--config", cfg); code != exitError || !strings.Contains(errs, "store.expand_databases[1] is store.databases[0]") {
		t.Fatalf("a database of the store in the config: exit %d %s", code, errs)
	}
	grow(c, "")
	if code, _, errs := runCLI("store", "expand", "--config", cfg); code != exitUsage || !strings.Contains(errs, "store.expand_databases[1]: empty DSN") {
		t.Fatalf("an empty DSN in the config: exit %d %s", code, errs)
	}
	grow(c, d)
	if code, out, errs := runCLI("store", "expand", "--config", cfg, "--cutover"); code != 0 || !strings.Contains(out, "the store has 4 databases") {
		t.Fatalf("2 → 4 from the config: exit %d %s %s", code, out, errs)
	}
	// Grown, the config keeps expand_databases listed: nothing to do, a
	// refusal that says why.
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("data_dir: %s\nstore: {driver: sqlite, databases: [%q, %q, %q, %q], expand_databases: [%q, %q], tables: 4, segments: 1}\n", dir, a, b, c, d, c, d)), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runCLI("store", "expand", "--config", cfg); code != exitError || !strings.Contains(errs, "store.expand_databases: the store has 4 databases") {
		t.Fatalf("expand_databases left after the cutover: exit %d %s", code, errs)
	}
}

// TestServeRefusesCopiedDatabase is the case: a one-database
// SQLite store copied with cp and started with [a.db, b.db]. The node
// refuses with one line that says what differs and what to run instead.
func TestServeRefusesCopiedDatabase(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.db"), filepath.Join(dir, "b.db")
	write := func(dbs ...string) string {
		path := filepath.Join(dir, fmt.Sprintf("ontime-%d.yaml", len(dbs)))
		if err := os.WriteFile(path, []byte(fmt.Sprintf("data_dir: %s\nlisten: 127.0.0.1:0\nstore: {driver: sqlite, databases: [\"%s\"], tables: 4, segments: 1}\n", dir, strings.Join(dbs, `", "`))), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	if code, _, errs := runCLI("store", "status", "--config", write(a)); code != 0 {
		t.Fatalf("exit %d %s", code, errs)
	}
	raw, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := runCLI("serve", "--config", write(a, b))
	if code != exitError || !strings.Contains(errs, "store.databases[1] is the same database as store.databases[0], or a copy of it") ||
		!strings.Contains(errs, "ontime store expand --databases") {
		t.Fatalf("serve on a copy: exit %d %s", code, errs)
	}
	oneLine(t, errs)
}
