package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type shardResult struct {
	Skew, Noise  float64
	Min, Max     int64
	Sample       int64
	SampleNeeded int64 `json:"sample_needed"`
	Dbs, Tables  int
	Verdict      string
}

func TestShardCheck(t *testing.T) {
	t.Parallel()
	// 2 × 8 tables: a verdict needs 310,000 keys; the default hashes them.
	code, out, errs := runCLI("shard", "check", "--dbs", "2", "--tables", "8", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var res shardResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if res.Verdict != "ok" || res.Sample != res.SampleNeeded || res.Sample != 310_000 || res.Dbs != 2 || res.Tables != 8 ||
		res.Skew <= 0 || res.Skew > 0.05 || res.Noise > 0.025 || res.Min > res.Max {
		t.Fatalf("result %+v", res)
	}
	code, out, _ = runCLI("shard", "check", "--dbs", "2", "--tables", "4")
	if code != 0 || !strings.Contains(out, "— ok") || !strings.Contains(out, "a verdict needs") {
		t.Fatalf("human output (exit %d): %s", code, out)
	}

	// Too few keys: the measured skew is noise; no verdict, exit 1.
	code, out, errs = runCLI("shard", "check", "--dbs", "8", "--tables", "100", "--sample", "1000000", "--json")
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != exitError || res.Verdict != "inconclusive" {
		t.Fatalf("1,000,000 keys over 800 tables: exit %d %+v %q", code, res, errs)
	}
	// The noise model is what a perfect hash shows: the measured skew of
	// this sample is within a third of it.
	if res.Skew < res.Noise*2/3 || res.Skew > res.Noise*4/3 {
		t.Fatalf("measured skew %.4f; the model says %.4f", res.Skew, res.Noise)
	}
	if !strings.Contains(errs, "a verdict needs 53000000 keys") {
		t.Fatalf("stderr %q", errs)
	}
	oneLine(t, errs)

	for _, args := range [][]string{
		{"shard", "check", "--dbs", "0"},
		{"shard", "check", "--tables", "-1"},
		{"shard", "check", "--keys", "gene"},
		{"shard", "check", "--sample", "x"},
		{"shard", "check", "--sample", "0"},
		{"shard", "check", "--max-skew", "0"},
		{"shard", "check", "extra"},
		{"shard", "extra"},
	} {
		code, _, errs := runCLI(args...)
		if code != exitUsage {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
		if lines := strings.Split(strings.TrimSpace(errs), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], "ontime: shard") {
			t.Errorf("%v: stderr %q, want one line", args, errs)
		}
	}
}

func TestShardJudge(t *testing.T) {
	for _, tc := range []struct {
		skew            float64
		sample, needed  int64
		verdict, errMsg string
	}{
		{0.02, 100, 100, "ok", ""},
		{0.05, 100, 100, "ok", ""},
		{0.0501, 100, 100, "too_skewed", "too skewed: 5.01 % > 5 %"},
		{0.01, 99, 100, "inconclusive", "a verdict needs 100 keys"},
		{0.30, 99, 100, "inconclusive", "a verdict needs 100 keys"},
	} {
		v, err := judge(tc.skew, 0.02, 0.05, tc.sample, tc.needed)
		if v != tc.verdict || (err == nil) != (tc.errMsg == "") || (err != nil && (!strings.Contains(err.Error(), tc.errMsg) || exitCode(err) != exitError)) {
			t.Errorf("judge(%v, %d of %d) = %q, %v; want %q, %q", tc.skew, tc.sample, tc.needed, v, err, tc.verdict, tc.errMsg)
		}
	}
}

// TestShardCheckKeysFile measures a file of keys and stdin, alone and with
// every scheme: order-… keys share their first characters, so the genes
// scheme puts them all in one database while the standard one spreads
// them.
func TestShardCheckKeysFile(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for i := range 100_000 {
		fmt.Fprintf(&b, "order-%08d\n", i)
	}
	path := filepath.Join(t.TempDir(), "keys.txt")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	type scheme struct {
		Scheme      string
		Skew        float64
		DBSkew      float64 `json:"db_skew"`
		EmptyTables int     `json:"empty_tables"`
		Retabled    float64 `json:"retabled_on_doubling"`
	}
	var res struct {
		shardResult
		Source  string
		Schemes []scheme
	}
	code, out, errs := runCLI("shard", "check", "--dbs", "2", "--tables", "4", "--max-skew", "20", "--keys-file", path, "--scheme", "all", "--json")
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 {
		t.Fatalf("exit %d %v: %s %s", code, err, out, errs)
	}
	if res.Sample != 100_000 || res.Verdict != "ok" || len(res.Schemes) != 4 || res.Source != "keys from "+path {
		t.Fatalf("%+v", res)
	}
	by := map[string]scheme{}
	for _, s := range res.Schemes {
		by[s.Scheme] = s
	}
	if g := by["genes"]; g.DBSkew != -1 || g.EmptyTables != 4 {
		t.Fatalf("genes on order-… keys: %+v", g)
	}
	if s := by["standard"]; s.Skew > 0.2 || s.Retabled != 0 || s.EmptyTables != 0 {
		t.Fatalf("standard: %+v", s)
	}
	if s := by["db-count-table"]; s.Retabled < 0.5 {
		t.Fatalf("db-count-table: %+v", s)
	}
	// 2 × 4 tables share the factor 2: half the tables of non-coprime
	// stay empty.
	if s := by["non-coprime"]; s.EmptyTables != 4 || s.Skew != -1 {
		t.Fatalf("non-coprime: %+v", s)
	}

	// stdin, human output, the genes scheme alone: too skewed, exit 1.
	var o, e bytes.Buffer
	root := newRootCmd(&globals{env: os.Getenv})
	root.SetArgs([]string{"shard", "check", "--dbs", "2", "--tables", "4", "--max-skew", "20", "--keys-file", "-", "--scheme", "genes"})
	root.SetIn(strings.NewReader(b.String()))
	root.SetOut(&o)
	root.SetErr(&e)
	err := root.ExecuteContext(context.Background())
	if exitCode(err) != exitError || !strings.Contains(err.Error(), "too skewed") || !strings.Contains(o.String(), "keys from stdin") ||
		!strings.Contains(o.String(), "keys that share a prefix share a database") || strings.Contains(o.String(), "seed") {
		t.Fatalf("genes from stdin: %v\n%s", err, o.String())
	}

	for _, args := range [][]string{
		{"shard", "check", "--keys-file", path, "--keys", "uuid"},
		{"shard", "check", "--keys-file", path, "--sample", "10"},
		{"shard", "check", "--keys-file", filepath.Join(t.TempDir(), "absent")},
		{"shard", "check", "--scheme", "modulo"},
		{"shard", "check", "--scheme", "all", "--hash", "md5"},
	} {
		code, _, errs := runCLI(args...)
		if code != exitUsage {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, errs)
		}
		oneLine(t, errs)
	}
}
