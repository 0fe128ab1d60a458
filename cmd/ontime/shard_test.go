package main

import (
	"encoding/json"
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
