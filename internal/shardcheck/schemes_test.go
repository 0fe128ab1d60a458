package shardcheck

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/ontimehq/ontime/internal/router"
)

func compareT(t *testing.T, keys Keys, topo router.Topology, hash string) map[string]SchemeResult {
	t.Helper()
	res, _, err := Compare(context.Background(), keys, topo, SchemeNames, hash)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]SchemeResult{}
	for _, r := range res {
		out[r.Scheme] = r
	}
	return out
}

// TestSchemesKnownSkews checks each scheme against the skew it is known to
// have: the figures the layouts' usual write-ups measured.
func TestSchemesKnownSkews(t *testing.T) {
	t.Parallel()
	// 10 databases × 100 tables, database and table by separate moduli:
	// gcd 10, so a table index allows one database in ten; 900 tables stay
	// empty whatever the keys.
	r := compareT(t, GeneratedKeys(Params{Kind: "random16", Sample: 300_000, Seed: 1}), router.Topology{Databases: 10, Tables: 100}, "xxhash")
	if nc := r["non-coprime"]; nc.EmptyTables != 900 || !math.IsInf(nc.Tables.Skew, 1) {
		t.Fatalf("non-coprime 10×100: %d empty tables, skew %v", nc.EmptyTables, nc.Tables.Skew)
	}
	if st := r["standard"]; st.EmptyTables != 0 || st.Restable != 0 || st.DBSkew > 0.05 {
		t.Fatalf("standard 10×100: %d empty, %.3f restable, db skew %.3f", st.EmptyTables, st.Restable, st.DBSkew)
	}
	// Table = slot / M: doubling the databases re-tables about every row.
	if dc := r["db-count-table"]; dc.Restable < 0.9 || dc.DBSkew > 0.05 {
		t.Fatalf("db-count-table: %.3f restable, db skew %.3f", dc.Restable, dc.DBSkew)
	}

	// Genes with Java's String.hashCode on hexadecimal keys (UUIDs): 16
	// databases skew by ~60 %, 8 and 20 stay within 5 % — the pattern
	// measured on 200,000,000 random keys in the usual write-up (61.65 %,
	// 1.25 %, 2.93 %): 31^k mod 16 folds a 4-character prefix of a small
	// alphabet onto few residues. Per database the sampling noise of
	// 2,000,000 keys is far below those.
	for _, tc := range []struct {
		dbs    int
		lo, hi float64
	}{{16, 0.4, 0.8}, {8, 0, 0.05}, {20, 0, 0.05}} {
		r := compareT(t, GeneratedKeys(Params{Kind: "uuid", Sample: 2_000_000, Seed: 2}), router.Topology{Databases: tc.dbs, Tables: 100}, "java")
		if g := r["genes"]; g.DBSkew < tc.lo || g.DBSkew > tc.hi {
			t.Errorf("genes %d×100 (java): database skew %.2f %%, want %.0f–%.0f %%", tc.dbs, 100*g.DBSkew, 100*tc.lo, 100*tc.hi)
		}
		if st := r["standard"]; st.DBSkew > 0.05 || st.Restable != 0 {
			t.Errorf("standard %d×100 (java): database skew %.2f %%, %.3f restable", tc.dbs, 100*st.DBSkew, st.Restable)
		}
	}

	// Keys with a common prefix (order-…): genes puts them all in one
	// database; the standard scheme spreads them.
	r = compareT(t, GeneratedKeys(Params{Kind: "sequential", Sample: 200_000, Seed: 1}), router.Topology{Databases: 4, Tables: 8}, "xxhash")
	if g := r["genes"]; !math.IsInf(g.DBSkew, 1) || g.EmptyTables != 24 {
		t.Fatalf("genes on order-… keys: db skew %v, %d empty tables", g.DBSkew, g.EmptyTables)
	}
	if st := r["standard"]; st.Tables.Skew > 0.1 {
		t.Fatalf("standard on order-… keys: table skew %.3f", st.Tables.Skew)
	}
}

func TestReadKeys(t *testing.T) {
	t.Parallel()
	keys, errf := ReadKeys(strings.NewReader("a\r\n\nbb\nccc"))
	var got []string
	for k := range keys {
		got = append(got, string(k))
	}
	if err := errf(); err != nil || strings.Join(got, ",") != "a,bb,ccc" {
		t.Fatalf("keys %q, %v", got, err)
	}
	// The same keys give the same counts as hashing them one by one.
	res, n, err := Compare(context.Background(), func(yield func([]byte) bool) {
		for _, k := range got {
			if !yield([]byte(k)) {
				return
			}
		}
	}, router.Topology{Databases: 2, Tables: 2}, []string{"standard"}, "")
	if err != nil || n != 3 {
		t.Fatal(n, err)
	}
	for _, k := range got {
		db, tb := router.Topology{Databases: 2, Tables: 2}.Locate(router.HashKey(k))
		res[0].Tables.Counts[db*2+tb]--
	}
	for _, c := range res[0].Tables.Counts {
		if c != 0 {
			t.Fatalf("counts differ from the router's: %v", res[0].Tables.Counts)
		}
	}
	if _, err := SchemeByName("nope", ""); err == nil || !strings.Contains(err.Error(), "--scheme") {
		t.Fatal(err)
	}
	if _, _, err := Compare(context.Background(), nil, router.Topology{Databases: 1, Tables: 1}, nil, "md5"); err == nil || !strings.Contains(err.Error(), "--hash") {
		t.Fatal(err)
	}
}
