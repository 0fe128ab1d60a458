package shardcheck

import (
	"context"
	"math"
	"testing"

	"github.com/ontimehq/ontime/internal/router"
)

func TestRunCountsEveryKeyAndIsDeterministic(t *testing.T) {
	for _, kind := range Kinds {
		p := Params{Topology: router.Topology{Databases: 4, Tables: 10}, Sample: 400_000, Kind: kind, Seed: 7, Workers: 3}
		a, err := Run(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		var sum int64
		for _, n := range a.Counts {
			sum += n
		}
		if sum != p.Sample || len(a.Counts) != 40 {
			t.Fatalf("%s: counted %d keys in %d tables", kind, sum, len(a.Counts))
		}
		// 10,000 keys per table: 5 % skew is ~5σ; a broken hash is far worse.
		if a.Skew > 0.08 || math.Abs(a.Mean-10000) > 1e-9 {
			t.Fatalf("%s: skew %.3f mean %.1f", kind, a.Skew, a.Mean)
		}
		b, _ := Run(context.Background(), p)
		for i := range a.Counts {
			if kind != "sequential" && a.Counts[i] != b.Counts[i] {
				t.Fatalf("%s: same seed, different counts", kind)
			}
		}
	}
}

func TestValidate(t *testing.T) {
	good := Params{Topology: router.Topology{Databases: 1, Tables: 1}, Sample: 1, Kind: "uuid"}
	for _, bad := range []Params{
		{Topology: router.Topology{}, Sample: 1, Kind: "uuid"},
		{Topology: good.Topology, Sample: 0, Kind: "uuid"},
		{Topology: good.Topology, Sample: 1, Kind: "gene"},
	} {
		if bad.Validate() == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	if good.Validate() != nil {
		t.Error("good params rejected")
	}
}

func BenchmarkRun(b *testing.B) {
	p := Params{Topology: router.Topology{Databases: 8, Tables: 100}, Sample: 10_000_000, Kind: "random16", Seed: 1}
	for b.Loop() {
		if _, err := Run(context.Background(), p); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(p.Sample)*float64(b.N)/b.Elapsed().Seconds(), "keys/s")
}
