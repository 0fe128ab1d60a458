package halves

import (
	"sync/atomic"
	"testing"
)

// TestDoCoversEachItemOnce: every index of [0, n) is given to f exactly
// once, in ranges that do not overlap, small and large n alike.
func TestDoCoversEachItemOnce(t *testing.T) {
	for _, n := range []int{0, 1, From - 1, From, From + 1, 1000, 1001} {
		seen := make([]atomic.Int32, n)
		var calls atomic.Int32
		Do(n, func(lo, hi int) {
			calls.Add(1)
			if lo < 0 || hi > n || lo > hi {
				t.Errorf("n %d: range [%d, %d)", n, lo, hi)
				return
			}
			for i := lo; i < hi; i++ {
				seen[i].Add(1)
			}
		})
		for i := range seen {
			if c := seen[i].Load(); c != 1 {
				t.Fatalf("n %d: item %d given %d times", n, i, c)
			}
		}
		if want := map[bool]int32{true: 2, false: 1}[n >= From]; calls.Load() != want {
			t.Errorf("n %d: %d calls of f, want %d", n, calls.Load(), want)
		}
	}
}
