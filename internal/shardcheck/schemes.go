package shardcheck

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"iter"
	"math"
	"math/rand/v2"

	"github.com/ontimehq/ontime/internal/router"
)

// Schemes: ontime's layout and the ones that look as good on paper but are
// not, measured on the same keys so a user sees the difference on their
// own data.
//
//	standard        slot = h mod M·N, db = slot / N, table = slot mod N (ontime)
//	db-count-table  slot = h mod M·N, db = slot mod M, table = slot / M
//	non-coprime     db = h mod M, table = h mod N
//	genes           db = hash(first 4 characters) mod M, table = h mod N
//
// Two properties decide a layout: how evenly it spreads keys (the skew
// rate (max − min) / min over tables, and over databases), and whether
// doubling the databases keeps every row in a table of the same index,
// moving it at most to the new twin database (db + M), which is what lets a
// store grow by copying half of each table and deleting what moved away.

// Scheme is a way to place a key in M × N tables.
type Scheme struct {
	Name string
	// Why says what the scheme does and what follows, in a sentence.
	Why   string
	place func(key []byte, h uint32, t router.Topology) (db, table int)
}

// SchemeNames lists the schemes in the order they are compared.
var SchemeNames = []string{"standard", "db-count-table", "non-coprime", "genes"}

// Hashes lists the key hashes a comparison can use: ontime's router hash,
// or Java's String.hashCode (what the layouts are usually written with,
// and weak on short prefixes).
var Hashes = []string{"xxhash", "java"}

// GenePrefix is how many leading characters the genes scheme routes a
// database by.
const GenePrefix = 4

// SchemeByName returns a scheme of SchemeNames, hashing keys with hash (a
// name of Hashes).
func SchemeByName(name, hash string) (Scheme, error) {
	hf, err := hashFunc(hash)
	if err != nil {
		return Scheme{}, err
	}
	mod := func(h uint32, n int) int {
		if hash == "java" {
			// Math.abs(hash % n) on a signed 32-bit hash.
			r := int32(h) % int32(n)
			if r < 0 {
				r = -r
			}
			return int(r)
		}
		return int(uint64(h) % uint64(n))
	}
	switch name {
	case "standard":
		return Scheme{Name: name, Why: "slot = hash mod M·N, database = slot / N, table = slot mod N: even, and doubling the databases keeps each row's table and moves it at most to database db + M",
			place: func(_ []byte, h uint32, t router.Topology) (int, int) {
				s := mod(h, t.Slots())
				return s / t.Tables, s % t.Tables
			}}, nil
	case "db-count-table":
		return Scheme{Name: name, Why: "table = slot / M depends on the number of databases: even, but doubling the databases moves rows to tables of another index, so growing means rewriting every table instead of copying half of each",
			place: func(_ []byte, h uint32, t router.Topology) (int, int) {
				s := mod(h, t.Slots())
				return s % t.Databases, s / t.Databases
			}}, nil
	case "non-coprime":
		return Scheme{Name: name, Why: "database = hash mod M and table = hash mod N: when M and N share a factor, the table index fixes part of the database index, so some (database, table) pairs never get a row",
			place: func(_ []byte, h uint32, t router.Topology) (int, int) {
				return mod(h, t.Databases), mod(h, t.Tables)
			}}, nil
	case "genes":
		return Scheme{Name: name, Why: fmt.Sprintf("database = hash(first %d characters) mod M: keys that share a prefix share a database, and a short prefix hashes unevenly, so databases fill at different rates", GenePrefix),
			place: func(key []byte, h uint32, t router.Topology) (int, int) {
				return mod(hf(key[:min(len(key), GenePrefix)]), t.Databases), mod(h, t.Tables)
			}}, nil
	}
	return Scheme{}, fmt.Errorf("--scheme: %q is not one of standard, db-count-table, non-coprime, genes, all", name)
}

func hashFunc(name string) (func([]byte) uint32, error) {
	switch name {
	case "xxhash", "":
		return router.HashKeyBytes, nil
	case "java":
		return javaHash, nil
	}
	return nil, fmt.Errorf("--hash: %q is not one of xxhash, java", name)
}

// javaHash is Java's String.hashCode of an ASCII key: h = 31·h + c.
func javaHash(b []byte) uint32 {
	var h int32
	for _, c := range b {
		h = 31*h + int32(c)
	}
	return uint32(h)
}

// SchemeResult is one scheme's measure on a set of keys.
type SchemeResult struct {
	Scheme string
	Why    string
	Tables Result // per (database, table)
	// DBCounts and DBSkew are the rows per database and their skew rate.
	DBCounts []int64
	DBSkew   float64
	// EmptyTables counts the tables that got no key.
	EmptyTables int
	// Restable is the share of keys that would land in a table of another
	// index, or in a database other than db and db + M, if the databases
	// doubled: rows a doubling cannot move by copying to the twin.
	Restable float64
}

// Keys yields the keys of a source; the slice is reused between keys.
type Keys = iter.Seq[[]byte]

// ReadKeys yields one key per line of r (without the line end; empty
// lines skipped); a read error ends the sequence and is reported by the
// returned func.
func ReadKeys(r io.Reader) (Keys, func() error) {
	var err error
	seq := func(yield func([]byte) bool) {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		for sc.Scan() {
			k := bytes.TrimRight(sc.Bytes(), "\r")
			if len(k) == 0 {
				continue
			}
			if !yield(k) {
				return
			}
		}
		err = sc.Err()
	}
	return seq, func() error { return err }
}

// GeneratedKeys yields p.Sample keys of p.Kind, the ones Run hashes with
// one worker.
func GeneratedKeys(p Params) Keys {
	return func(yield func([]byte) bool) {
		rng := rand.New(rand.NewPCG(p.Seed, 1))
		buf := make([]byte, 0, 64)
		for i := range p.Sample {
			buf = genKey(buf[:0], p.Kind, rng, i)
			if !yield(buf) {
				return
			}
		}
	}
}

// Compare places every key of keys by each scheme of names over t,
// hashing with hash, and measures each.
func Compare(ctx context.Context, keys Keys, t router.Topology, names []string, hash string) ([]SchemeResult, int64, error) {
	if err := t.Validate(); err != nil {
		return nil, 0, fmt.Errorf("--dbs/--tables: %w", err)
	}
	hf, err := hashFunc(hash)
	if err != nil {
		return nil, 0, err
	}
	grown := router.Topology{Databases: 2 * t.Databases, Tables: t.Tables}
	schemes := make([]Scheme, len(names))
	tables := make([][]int64, len(names))
	dbs := make([][]int64, len(names))
	moved := make([]int64, len(names))
	for i, n := range names {
		if schemes[i], err = SchemeByName(n, hash); err != nil {
			return nil, 0, err
		}
		tables[i] = make([]int64, t.Slots())
		dbs[i] = make([]int64, t.Databases)
	}
	var n int64
	for key := range keys {
		if n&0xffff == 0 && ctx.Err() != nil {
			return nil, n, ctx.Err()
		}
		n++
		h := hf(key)
		for i, sc := range schemes {
			db, tb := sc.place(key, h, t)
			tables[i][db*t.Tables+tb]++
			dbs[i][db]++
			db2, tb2 := sc.place(key, h, grown)
			if tb2 != tb || (db2 != db && db2 != db+t.Databases) {
				moved[i]++
			}
		}
	}
	out := make([]SchemeResult, len(names))
	for i, sc := range schemes {
		r := SchemeResult{Scheme: sc.Name, Why: sc.Why, Tables: summarize(tables[i]), DBCounts: dbs[i]}
		r.DBSkew = summarize(dbs[i]).Skew
		for _, c := range tables[i] {
			if c == 0 {
				r.EmptyTables++
			}
		}
		if n > 0 {
			r.Restable = float64(moved[i]) / float64(n)
		}
		out[i] = r
	}
	return out, n, nil
}

// summarize gives min, max, mean and skew of counts.
func summarize(counts []int64) Result {
	res := Result{Counts: counts, Min: math.MaxInt64}
	var sum int64
	for _, c := range counts {
		sum += c
		res.Min, res.Max = min(res.Min, c), max(res.Max, c)
	}
	if len(counts) > 0 {
		res.Mean = float64(sum) / float64(len(counts))
	}
	if res.Min == 0 {
		res.Skew = math.Inf(1)
	} else {
		res.Skew = float64(res.Max-res.Min) / float64(res.Min)
	}
	return res
}
