package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ontimehq/ontime/internal/shardcheck"
)

// maxDefaultSample caps the keys hashed when --sample is left out (~20 s
// at the 23 M keys/s measured on 2 cores, BenchmarkRun): past it, a
// topology needs an explicit --sample for a verdict.
const maxDefaultSample = 500_000_000

func newShardCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "shard",
		Short:   "Local tools for the shard layout",
		Long:    `Local tools for the shard layout; they need no server.`,
		Example: `  ontime shard check --dbs 8 --tables 100`,
		Args:    noArgs,
		RunE: func(*cobra.Command, []string) error {
			return usagef("which tool? ontime shard check")
		},
	}
	cmd.AddCommand(newShardCheckCmd(g))
	return cmd
}

func newShardCheckCmd(g *globals) *cobra.Command {
	p := shardcheck.Params{Kind: "random16"}
	var maxSkewPct float64
	var keysFile, scheme, hash string
	cmd := &cobra.Command{
		Use:   "check [--dbs M] [--tables N] [--sample K] [--keys KIND | --keys-file FILE|-] [--scheme NAME|all]",
		Short: "Measure how evenly keys spread over M × N tables",
		Long: `Hash generated keys with the router and count rows per table, then judge the
skew rate (max − min) / min against --max-skew (default 5 %: within it, the
fullest table holds at most 5 % more rows than the emptiest, a spread that
sharding layouts generally accept).

Even a perfect hash shows some skew in a sample: each table's count is random.
A verdict needs enough keys that this sampling noise is at most half of
--max-skew; with --sample left out, that many are hashed (53,000,000 for
8 × 100 tables, a few seconds). A smaller --sample gives "inconclusive".

--keys-file measures your own keys instead (one per line; - reads stdin):
export the shard keys you would submit, e.g. order IDs, and see how they
spread.

--scheme compares ways to lay out M × N tables on the same keys:
  standard        slot = hash mod M·N, database = slot / N, table = slot mod N
                  (ontime's: even, and doubling the databases keeps every row's
                  table, moving it at most to the twin database)
  db-count-table  table = slot / M: even, but doubling the databases moves rows
                  to tables of another index
  non-coprime     database = hash mod M, table = hash mod N: when M and N share
                  a factor, some tables never get a row
  genes           database from the key's first 4 characters: keys sharing a
                  prefix share a database
  all             the four side by side (the verdict is the standard one's)
--hash java hashes with Java's String.hashCode, how these layouts are often
written, to see what a weak hash adds.

Exit code 0 when the skew is within --max-skew, 1 when it is too skewed or
the sample too small for a verdict.`,
		Example: `  ontime shard check
  ontime shard check --dbs 4 --tables 64 --keys uuid
  ontime shard check --dbs 2 --tables 8 --sample 1000000 --json
  ontime shard check --dbs 8 --tables 100 --keys-file order-ids.txt
  psql -Atc 'SELECT order_no FROM orders' | ontime shard check --keys-file - --scheme all
  ontime shard check --dbs 16 --tables 100 --keys uuid --scheme all --hash java --sample 2000000`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if p.Topology.Databases < 1 {
				return usagef("--dbs: %d; at least 1", p.Topology.Databases)
			}
			if p.Topology.Tables < 1 {
				return usagef("--tables: %d; at least 1", p.Topology.Tables)
			}
			if maxSkewPct <= 0 || maxSkewPct >= 100 {
				return usagef("--max-skew: %g; a percentage above 0 and below 100", maxSkewPct)
			}
			maxSkew := maxSkewPct / 100
			slots := p.Topology.Slots()
			needed := shardcheck.KeysForVerdict(slots, maxSkew)
			if keysFile != "" && (cmd.Flags().Changed("keys") || cmd.Flags().Changed("sample") || cmd.Flags().Changed("seed")) {
				return usagef("--keys-file: the keys come from the file; --keys, --sample and --seed are for generated keys")
			}
			if !cmd.Flags().Changed("sample") {
				p.Sample = min(needed, maxDefaultSample)
			}
			if err := p.Validate(); err != nil {
				return &exitErr{code: exitUsage, err: err}
			}
			names := []string{scheme}
			if scheme == "all" {
				names = shardcheck.SchemeNames
			}
			for _, n := range names {
				if _, err := shardcheck.SchemeByName(n, hash); err != nil {
					return &exitErr{code: exitUsage, err: err}
				}
			}
			if keysFile == "" && scheme == "standard" && hash == "xxhash" {
				return shardCheck(cmd, g, p, maxSkew, needed)
			}
			return shardCompare(cmd, g, p, names, hash, keysFile, maxSkew, needed)
		},
	}
	f := cmd.Flags()
	f.IntVar(&p.Topology.Databases, "dbs", 8, "databases (M)")
	f.IntVar(&p.Topology.Tables, "tables", 100, "tables per database (N)")
	f.Int64Var(&p.Sample, "sample", 0, "keys to hash (default: as many as a verdict needs)")
	f.StringVar(&p.Kind, "keys", "random16", "key kind: random16 | sequential | uuid")
	f.Uint64Var(&p.Seed, "seed", 1, "random seed")
	f.Float64Var(&maxSkewPct, "max-skew", 5, "acceptable skew rate, percent")
	f.StringVar(&keysFile, "keys-file", "", "measure these keys, one per line (- for stdin), instead of generated ones")
	f.StringVar(&scheme, "scheme", "standard", "layout: standard | db-count-table | non-coprime | genes | all")
	f.StringVar(&hash, "hash", "xxhash", "key hash for --scheme: xxhash (ontime's) | java (String.hashCode)")
	_ = cmd.RegisterFlagCompletionFunc("scheme", cobra.FixedCompletions(append(append([]string{}, shardcheck.SchemeNames...), "all"), cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("hash", cobra.FixedCompletions(shardcheck.Hashes, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("keys", cobra.FixedCompletions(shardcheck.Kinds, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func shardCheck(cmd *cobra.Command, g *globals, p shardcheck.Params, maxSkew float64, needed int64) error {
	start := time.Now()
	res, err := shardcheck.Run(cmd.Context(), p)
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	noise := shardcheck.NoiseSkew(p.Topology.Slots(), p.Sample)
	verdict, failure := judge(res.Skew, noise, maxSkew, p.Sample, needed)
	if g.json {
		skew := res.Skew
		if math.IsInf(skew, 1) {
			skew = -1 // JSON has no infinity: -1 means some table got no key
		}
		out := map[string]any{"dbs": p.Topology.Databases, "tables": p.Topology.Tables, "slots": p.Topology.Slots(), "sample": p.Sample, "keys": p.Kind,
			"min": res.Min, "max": res.Max, "mean": res.Mean, "skew": skew, "max_skew": maxSkew, "noise": noise,
			"sample_needed": needed, "verdict": verdict, "seconds": elapsed.Seconds()}
		if err := g.printJSON(cmd, out); err != nil {
			return err
		}
		return failure
	}
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "topology  %d databases × %d tables = %d tables\n", p.Topology.Databases, p.Topology.Tables, p.Topology.Slots())
	fmt.Fprintf(w, "keys      %d %s keys in %s (%.0f M keys/s)\n", p.Sample, p.Kind, elapsed.Round(time.Millisecond), float64(p.Sample)/elapsed.Seconds()/1e6)
	fmt.Fprintf(w, "rows      min %d  max %d  mean %.1f\n", res.Min, res.Max, res.Mean)
	fmt.Fprintf(w, "noise     a perfect hash shows ~%.2f %% skew at this sample; a verdict needs %d keys\n", 100*noise, needed)
	switch verdict {
	case "ok":
		fmt.Fprintf(w, "skew      %.2f %% — ok (≤ %g %%)\n\n", 100*res.Skew, 100*maxSkew)
	case "too_skewed":
		fmt.Fprintf(w, "skew      %.2f %% — TOO SKEWED (> %g %%)\n\n", 100*res.Skew, 100*maxSkew)
	default:
		fmt.Fprintf(w, "skew      %.2f %% — inconclusive (too few keys to judge %g %%)\n\n", 100*res.Skew, 100*maxSkew)
	}
	histogram(w, res)
	return failure
}

// judge gives the verdict on a measured skew: "ok", "too_skewed", or
// "inconclusive" when the sample is too small for sampling noise to be
// told apart from the hash's own skew; every verdict but ok is an error.
func judge(skew, noise, maxSkew float64, sample, needed int64) (string, error) {
	switch {
	case sample < needed:
		return "inconclusive", failf(exitError, "inconclusive: at %d keys a perfect hash shows ~%.1f %% skew by chance; a verdict needs %d keys (--sample %d, or leave --sample out)",
			sample, 100*noise, needed, needed)
	case skew > maxSkew:
		return "too_skewed", failf(exitError, "too skewed: %.2f %% > %g %% (sampling noise ~%.2f %%)", 100*skew, 100*maxSkew, 100*noise)
	}
	return "ok", nil
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

// shardCompare measures the schemes of names on the same keys (generated,
// or read from keysFile) and judges the first one (standard with all).
func shardCompare(cmd *cobra.Command, g *globals, p shardcheck.Params, names []string, hash, keysFile string, maxSkew float64, needed int64) error {
	keys := shardcheck.GeneratedKeys(p)
	source := fmt.Sprintf("%s keys", p.Kind)
	readErr := func() error { return nil }
	if keysFile != "" {
		var r io.Reader = cmd.InOrStdin()
		source = "keys from stdin"
		if keysFile != "-" {
			f, err := os.Open(keysFile)
			if err != nil {
				return usagef("--keys-file: %v", err)
			}
			defer f.Close()
			r, source = f, "keys from "+keysFile
		}
		keys, readErr = shardcheck.ReadKeys(r)
	}
	start := time.Now()
	res, n, err := shardcheck.Compare(cmd.Context(), keys, p.Topology, names, hash)
	if err == nil {
		err = readErr()
	}
	if err != nil {
		return fmt.Errorf("--keys-file: %w", err)
	}
	if n == 0 {
		return usagef("--keys-file: no keys (one per line)")
	}
	elapsed := time.Since(start)
	noise := shardcheck.NoiseSkew(p.Topology.Slots(), n)
	verdict, failure := judge(res[0].Tables.Skew, noise, maxSkew, n, needed)
	if verdict == "inconclusive" && keysFile != "" {
		failure = failf(exitError, "inconclusive: at %d keys a perfect hash shows ~%.1f %% skew by chance; a verdict on %d tables needs %d keys (or fewer tables, or a larger --max-skew)",
			n, 100*noise, p.Topology.Slots(), needed)
	}
	inf := func(v float64) float64 {
		if math.IsInf(v, 1) {
			return -1 // JSON has no infinity: -1 means some table got no key
		}
		return v
	}
	if g.json {
		var schemes []map[string]any
		for _, r := range res {
			schemes = append(schemes, map[string]any{"scheme": r.Scheme, "skew": inf(r.Tables.Skew), "db_skew": inf(r.DBSkew),
				"min": r.Tables.Min, "max": r.Tables.Max, "empty_tables": r.EmptyTables, "retabled_on_doubling": r.Restable, "why": r.Why})
		}
		out := map[string]any{"dbs": p.Topology.Databases, "tables": p.Topology.Tables, "slots": p.Topology.Slots(), "sample": n, "hash": hash,
			"source": source, "noise": noise, "max_skew": maxSkew, "sample_needed": needed, "verdict": verdict, "scheme": res[0].Scheme,
			"skew": inf(res[0].Tables.Skew), "schemes": schemes, "seconds": elapsed.Seconds()}
		if err := g.printJSON(cmd, out); err != nil {
			return err
		}
		return failure
	}
	w := cmd.OutOrStdout()
	pct := func(v float64) string {
		if math.IsInf(v, 1) {
			return "∞"
		}
		return fmt.Sprintf("%.2f %%", 100*v)
	}
	fmt.Fprintf(w, "topology  %d databases × %d tables = %d tables\n", p.Topology.Databases, p.Topology.Tables, p.Topology.Slots())
	fmt.Fprintf(w, "keys      %d %s, hashed with %s, in %s\n", n, source, hash, elapsed.Round(time.Millisecond))
	fmt.Fprintf(w, "noise     a perfect hash shows ~%.2f %% table skew at this sample; a verdict needs %d keys\n\n", 100*noise, needed)
	fmt.Fprintf(w, "%-16s %12s %12s %8s %10s\n", "scheme", "table skew", "db skew", "empty", "re-tabled")
	for _, r := range res {
		fmt.Fprintf(w, "%-16s %12s %12s %8d %9.1f%%\n", r.Scheme, pct(r.Tables.Skew), pct(r.DBSkew), r.EmptyTables, 100*r.Restable)
	}
	fmt.Fprintln(w, "\n(re-tabled: keys that would change table, or not go to the twin database, when the databases double)")
	for _, r := range res {
		fmt.Fprintf(w, "%-16s %s\n", r.Scheme, r.Why)
	}
	fmt.Fprintln(w)
	switch verdict {
	case "ok":
		fmt.Fprintf(w, "%s: %s — ok (≤ %g %%)\n", res[0].Scheme, pct(res[0].Tables.Skew), 100*maxSkew)
	case "too_skewed":
		fmt.Fprintf(w, "%s: %s — TOO SKEWED (> %g %%)\n", res[0].Scheme, pct(res[0].Tables.Skew), 100*maxSkew)
	default:
		fmt.Fprintf(w, "%s: %s — inconclusive (too few keys to judge %g %%)\n", res[0].Scheme, pct(res[0].Tables.Skew), 100*maxSkew)
	}
	if len(res) == 1 {
		fmt.Fprintln(w)
		histogram(w, res[0].Tables)
	}
	return failure
}
