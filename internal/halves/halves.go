// Package halves runs a batch's per-item work on two cores. A batch call's
// per-task steps (the client encoding a request, the node checking,
// decoding and preparing its tasks) run while nothing else of the call
// can: the store waits for the tasks and the client for the answer, so on
// a machine of two cores or more a second one is free for them.
package halves

import "sync"

// From is the smallest batch Do splits: below it, starting a goroutine
// and waiting for it costs more than half the work saves.
const From = 128

// Do runs f over [0, n): for n ≥ From its first half on a goroutine of its
// own and the second on the caller's, and returns when both are done. f
// must be safe to run on two disjoint ranges at once.
func Do(n int, f func(lo, hi int)) {
	if n < From {
		f(0, n)
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { f(0, n/2) })
	f(n/2, n)
	wg.Wait()
}
