package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/ontimehq/ontime/internal/router"
	"github.com/ontimehq/ontime/internal/shardcheck"
)

// runShard: `ontime shard check --dbs M --tables N --sample K [--keys kind] [--json]`.
func runShard(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "check" {
		fmt.Fprintln(stderr, "ontime: shard: usage: ontime shard check --dbs M --tables N --sample K [--keys random16|sequential|uuid] [--seed S] [--json]")
		return 2
	}
	fs := flag.NewFlagSet("shard check", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	dbs := fs.Int("dbs", 8, "databases (M)")
	tables := fs.Int("tables", 100, "tables per database (N)")
	sample := fs.Int64("sample", 1_000_000, "keys to hash (K)")
	kind := fs.String("keys", "random16", "key kind: random16 | sequential | uuid")
	seed := fs.Uint64("seed", 1, "random seed")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := fs.Parse(args[1:]); err != nil {
		fmt.Fprintf(stderr, "ontime: shard check: %v\n", err)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "ontime: shard check: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *dbs < 1 {
		fmt.Fprintf(stderr, "ontime: shard check: --dbs: %d; at least 1\n", *dbs)
		return 2
	}
	if *tables < 1 {
		fmt.Fprintf(stderr, "ontime: shard check: --tables: %d; at least 1\n", *tables)
		return 2
	}
	p := shardcheck.Params{Topology: router.Topology{Databases: *dbs, Tables: *tables}, Sample: *sample, Kind: *kind, Seed: *seed}
	if err := p.Validate(); err != nil {
		fmt.Fprintf(stderr, "ontime: shard check: %v\n", err)
		return 2
	}
	start := time.Now()
	res, err := shardcheck.Run(ctx, p)
	if err != nil {
		fmt.Fprintf(stderr, "ontime: shard check: %v\n", err)
		return 1
	}
	elapsed := time.Since(start)
	if *asJSON {
		skew := res.Skew
		if math.IsInf(skew, 1) {
			skew = -1 // JSON has no infinity: -1 means some table got no key
		}
		out := map[string]any{"dbs": *dbs, "tables": *tables, "slots": p.Topology.Slots(), "sample": *sample, "keys": *kind,
			"min": res.Min, "max": res.Max, "mean": res.Mean, "skew": skew, "seconds": elapsed.Seconds()}
		if err := json.NewEncoder(stdout).Encode(out); err != nil {
			fmt.Fprintf(stderr, "ontime: shard check: %v\n", err)
			return 1
		}
		return 0
	}
	fmt.Fprintf(stdout, "topology  %d databases × %d tables = %d tables\n", *dbs, *tables, p.Topology.Slots())
	fmt.Fprintf(stdout, "keys      %d %s keys in %s (%.0f M keys/s)\n", *sample, *kind, elapsed.Round(time.Millisecond), float64(*sample)/elapsed.Seconds()/1e6)
	fmt.Fprintf(stdout, "rows      min %d  max %d  mean %.1f\n", res.Min, res.Max, res.Mean)
	verdict := "ok (≤ 5 %)"
	if res.Skew > 0.05 {
		verdict = "TOO SKEWED (> 5 %)"
	}
	fmt.Fprintf(stdout, "skew      %.2f %% — %s\n\n", 100*res.Skew, verdict)
	histogram(stdout, res)
	return 0
}

// histogram draws how many tables deviate from the mean by how much.
func histogram(w io.Writer, res shardcheck.Result) {
	const bins = 11
	var hist [bins]int
	width := 0.0
	for _, n := range res.Counts {
		width = math.Max(width, math.Abs(float64(n)-res.Mean))
	}
	if width == 0 {
		width = 1
	}
	for _, n := range res.Counts {
		d := (float64(n) - res.Mean) / width // -1 .. 1
		b := int(math.Round((d + 1) / 2 * (bins - 1)))
		hist[b]++
	}
	top := 0
	for _, h := range hist {
		top = max(top, h)
	}
	fmt.Fprintln(w, "tables by deviation from the mean")
	for i, h := range hist {
		lo := (float64(i)/(bins-1)*2 - 1) * width / res.Mean * 100
		bar := strings.Repeat("█", int(math.Round(float64(h)/float64(top)*40)))
		fmt.Fprintf(w, "  %+6.2f %% │%-40s %d\n", lo, bar, h)
	}
}
