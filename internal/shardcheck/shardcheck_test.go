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

func TestNoiseModel(t *testing.T) {
	// E[max of 2 standard normals] = 1/√π.
	if g := expectedMaxNormal(2); math.Abs(g-1/math.Sqrt(math.Pi)) > 1e-6 {
		t.Fatalf("expectedMaxNormal(2) = %v", g)
	}
	// The keys a verdict needs give at most half the threshold of noise,
	// and fewer give more.
	for _, slots := range []int{2, 16, 800, 4096} {
		k := KeysForVerdict(slots, 0.05)
		if n := NoiseSkew(slots, k); n > 0.025 {
			t.Errorf("%d tables: noise %.4f at %d keys", slots, n, k)
		}
		if n := NoiseSkew(slots, k*9/10); n <= 0.0235 {
			t.Errorf("%d tables: noise %.4f at 90 %% of %d keys; the estimate is not tight", slots, n, k)
		}
	}
	if KeysForVerdict(800, 0.05) != 53_000_000 || KeysForVerdict(1, 0.05) != 1 || NoiseSkew(1, 10) != 0 {
		t.Fatal("KeysForVerdict(800) or the one-table case moved")
	}
	// Measured: random16 keys over 40 tables at several samples show the
	// noise the model predicts, within a third.
	for _, sample := range []int64{40_000, 400_000, 2_000_000} {
		p := Params{Topology: router.Topology{Databases: 4, Tables: 10}, Sample: sample, Kind: "random16", Seed: 3, Workers: 2}
		var sum float64
		const runs = 8
		for i := range runs {
			p.Seed = uint64(i + 1)
			r, err := Run(context.Background(), p)
			if err != nil {
				t.Fatal(err)
			}
			sum += r.Skew
		}
		got, want := sum/runs, NoiseSkew(40, sample)
		if got < want*2/3 || got > want*4/3 {
			t.Errorf("%d keys: mean skew %.4f over %d runs; the model says %.4f", sample, got, runs, want)
		}
	}
}
