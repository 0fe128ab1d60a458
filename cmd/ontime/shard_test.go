package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

func TestShardCheck(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"shard", "check", "--dbs", "2", "--tables", "8", "--sample", "200000", "--json"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var res struct {
		Skew        float64
		Min, Max    int64
		Sample      int64
		Dbs, Tables int
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if res.Sample != 200000 || res.Dbs != 2 || res.Tables != 8 || res.Skew <= 0 || res.Skew > 0.1 || res.Min > res.Max {
		t.Fatalf("result %+v", res)
	}
	out.Reset()
	if code := run(context.Background(), []string{"shard", "check", "--dbs", "2", "--tables", "4", "--sample", "10000"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "skew") {
		t.Fatalf("human output (exit %d): %s", code, out.String())
	}
	for _, args := range [][]string{
		{"shard"},
		{"shard", "check", "--dbs", "0"},
		{"shard", "check", "--tables", "-1"},
		{"shard", "check", "--keys", "gene"},
		{"shard", "check", "--sample", "x"},
		{"shard", "check", "extra"},
	} {
		errb.Reset()
		if code := run(context.Background(), args, &out, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
		if lines := strings.Split(strings.TrimSpace(errb.String()), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], "ontime: shard") {
			t.Errorf("%v: stderr %q, want one line", args, errb.String())
		}
	}
}
