// Package shardcheck measures how evenly the router spreads keys over a
// topology: it generates keys of a kind, routes them, and reports rows per
// table and the skew rate (max − min) / min of seed 002 (≤ 5 % is fine).
package shardcheck

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"

	"github.com/ontimehq/ontime/internal/router"
)

// Kinds of generated keys.
var Kinds = []string{"random16", "sequential", "uuid"}

// Params is one check.
type Params struct {
	Topology router.Topology
	Sample   int64
	Kind     string
	Seed     uint64
	Workers  int // 0: GOMAXPROCS
}

// Result is the distribution found.
type Result struct {
	Counts []int64 // per slot (db·N + table)
	Min    int64
	Max    int64
	Mean   float64
	Skew   float64 // (max − min) / min; +Inf when a table got nothing
}

// Validate checks p, naming the flag at fault.
func (p Params) Validate() error {
	if err := p.Topology.Validate(); err != nil {
		return fmt.Errorf("--dbs/--tables: %w", err)
	}
	if p.Sample < 1 {
		return fmt.Errorf("--sample: %d; at least 1", p.Sample)
	}
	for _, k := range Kinds {
		if k == p.Kind {
			return nil
		}
	}
	return fmt.Errorf("--keys: %q is not one of random16, sequential, uuid", p.Kind)
}

// Run hashes p.Sample keys and counts rows per table, spreading the work
// over all cores; each worker counts privately and reuses one key buffer,
// so the loop allocates nothing per key.
func Run(ctx context.Context, p Params) (Result, error) {
	if err := p.Validate(); err != nil {
		return Result{}, err
	}
	workers := p.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	slots := p.Topology.Slots()
	per := make([][]int64, workers)
	var wg sync.WaitGroup
	chunk := p.Sample / int64(workers)
	for w := range workers {
		from := int64(w) * chunk
		to := from + chunk
		if w == workers-1 {
			to = p.Sample
		}
		per[w] = make([]int64, slots)
		wg.Add(1)
		go func() {
			defer wg.Done()
			count(ctx, p, from, to, uint64(w), per[w])
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	res := Result{Counts: make([]int64, slots), Min: math.MaxInt64}
	for _, c := range per {
		for i, n := range c {
			res.Counts[i] += n
		}
	}
	var sum int64
	for _, n := range res.Counts {
		sum += n
		res.Min, res.Max = min(res.Min, n), max(res.Max, n)
	}
	res.Mean = float64(sum) / float64(slots)
	if res.Min == 0 {
		res.Skew = math.Inf(1)
	} else {
		res.Skew = float64(res.Max-res.Min) / float64(res.Min)
	}
	return res, nil
}

const alnum = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

func count(ctx context.Context, p Params, from, to int64, worker uint64, out []int64) {
	rng := rand.New(rand.NewPCG(p.Seed, worker+1))
	slots := uint64(len(out))
	buf := make([]byte, 0, 64)
	for i := from; i < to; i++ {
		if i&0xfffff == 0 && ctx.Err() != nil {
			return
		}
		buf = genKey(buf[:0], p.Kind, rng, i)
		out[uint64(router.HashKeyBytes(buf))%slots]++
	}
}

// genKey appends the i-th key of kind to buf.
func genKey(buf []byte, kind string, rng *rand.Rand, i int64) []byte {
	const hexd = "0123456789abcdef"
	switch kind {
	case "random16":
		r := rng.Uint64()
		r2 := rng.Uint64()
		for j := 0; j < 16; j++ {
			src := &r
			if j >= 8 {
				src = &r2
			}
			buf = append(buf, alnum[(*src&0xff)%62])
			*src >>= 8
		}
	case "sequential":
		buf = append(buf, "order-"...)
		buf = appendPadded(buf, i, 12)
	case "uuid":
		a, b := rng.Uint64(), rng.Uint64()
		a = a&^(0xf<<12) | 4<<12   // version 4
		b = b&^(0x3<<62) | 0x2<<62 // RFC 4122 variant
		for j, n := range [2]uint64{a, b} {
			for k := 60; k >= 0; k -= 4 {
				pos := j*16 + (60-k)/4
				if pos == 8 || pos == 12 || pos == 16 || pos == 20 {
					buf = append(buf, '-')
				}
				buf = append(buf, hexd[(n>>uint(k))&0xf])
			}
		}
	}
	return buf
}

func appendPadded(b []byte, n int64, width int) []byte {
	var tmp [20]byte
	i := len(tmp)
	for n > 0 || i == len(tmp) {
		i--
		tmp[i] = byte('0' + n%10)
		n /= 10
	}
	for pad := width - (len(tmp) - i); pad > 0; pad-- {
		b = append(b, '0')
	}
	return append(b, tmp[i:]...)
}
