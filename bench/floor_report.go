package main

import (
	"fmt"
	"strings"
	"time"
)

// Issue 12's goals, which the floor section holds against the floor.
const (
	goalSubmit16   = 1.5    // × asynq's single enqueue by 16 clients, over HTTP
	goalSubmit1    = 0.5    // × asynq's sequential single enqueue, over HTTP
	goalDrain      = 20000. // tasks/s, a burst by webhook one task per call
	goalBurstP99   = time.Second
	goalBurstShare = 0.99 // the share of the burst delivered by the p99
)

// times is v/floor as "0.42×" (— when either is missing).
func times(v, floor float64) string {
	if v <= 0 || floor <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f×", v/floor)
}

// floorSection renders the floor's figures and every system's against
// them; "" when the floor did not run.
// floorSection is the floor's figures and the ratios to it; brief keeps
// only the goals' lines (the benchmarks page), not one line per system.
func (ri reportInfo) floorSection(brief bool) string {
	f := ri.floor
	if f == nil {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n### net/http floor (no store, no scheduler)\n\n")
	b.WriteString("The ceiling Go's net/http over loopback puts on any HTTP service on this machine, measured in this run (its settings: the floor's row in the whole report's knobs table): " +
		"the same submit calls and webhook calls as the service path, answered and sent with no store and no scheduler behind them.\n\n")
	if f.Enq.Single > 0 {
		b.WriteString("| floor | 1-by-1, 1 client | 1-by-1, 4 clients | 1-by-1, 16 clients |\n|---|---|---|---|\n")
		fmt.Fprintf(&b, "| submit: `POST /v1/tasks`, canned 201 answer | %s | %s | %s |\n\n", rate(f.Enq.Single), rate(f.Enq.Single4), rate(f.Enq.Single16))
	}
	if h := f.Hook; h != nil {
		b.WriteString("| floor | calls | in flight | drain | p50 | p99 | p99.9 | max | lost | dup | failed |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
		fmt.Fprintf(&b, "| webhook: one task per call, all due at one instant | %s | %d | %s | %s | %s | %s | %s | %d | %d | %d |\n\n",
			thousands(h.N), f.Concurr, rate(h.DrainPerSec), ms(h.P50), ms(h.P99), ms(h.P999), ms(h.Mx), h.Lost, h.Dup, f.Failed)
		if h.Note != "" {
			fmt.Fprintf(&b, "- webhook floor: %s\n\n", h.Note)
		}
	}
	b.WriteString("Ratios to the floor (1 is the floor; an HTTP system cannot pass it by much, an in-process one is not bound by it):\n\n")
	if f.Enq.Single > 0 {
		seen := map[string]bool{}
		for _, r := range ri.results {
			if brief || seen[r.System] || r.Skipped || r.Enq.Single <= 0 || (isOntime(&r) && !isService(&r)) {
				continue
			}
			seen[r.System] = true
			fmt.Fprintf(&b, "- submits, %s (%s) / floor: 1 client %s (%s), 4 clients %s (%s), 16 clients %s (%s)\n", r.System, r.Path,
				times(r.Enq.Single, f.Enq.Single), rate(r.Enq.Single), times(r.Enq.Single4, f.Enq.Single4), rate(r.Enq.Single4),
				times(r.Enq.Single16, f.Enq.Single16), rate(r.Enq.Single16))
		}
		a1 := ri.bestAsynq(func(r *result) float64 { return r.Enq.Single })
		a16 := ri.bestAsynq(func(r *result) float64 { return r.Enq.Single16 })
		if a1 != nil && a16 != nil {
			g16, g1 := goalSubmit16*a16.Enq.Single16, goalSubmit1*a1.Enq.Single
			fmt.Fprintf(&b, "- submit goals against the floor (above 1: more than net/http alone does here): "+
				"16 clients ≥ %.1f× %s's %s = %s is **%s** the floor's %s; 1 client ≥ %.1f× %s's %s = %s is **%s** the floor's %s\n",
				goalSubmit16, a16.System, rate(a16.Enq.Single16), rate(g16), times(g16, f.Enq.Single16), rate(f.Enq.Single16),
				goalSubmit1, a1.System, rate(a1.Enq.Single), rate(g1), times(g1, f.Enq.Single), rate(f.Enq.Single))
		}
	}
	if h := f.Hook; h != nil && h.DrainPerSec > 0 {
		for _, r := range ri.results {
			// One task per call, as the floor: batch delivery is another
			// measure.
			if brief || r.Workload != "burst" || r.Skipped || !isOntime(&r) || r.PerCall <= 0 || r.PerCall >= 1.5 {
				continue
			}
			fmt.Fprintf(&b, "- webhook burst, %s (%s) / floor: drain %s (%s), p99 %s (%s; above 1: slower than the floor)\n", r.System, r.Path,
				times(r.DrainPerSec, h.DrainPerSec), rate(r.DrainPerSec), times(float64(r.P99), float64(h.P99)), ms(r.P99))
		}
		need := goalBurstShare * float64(h.N) / goalBurstP99.Seconds()
		fmt.Fprintf(&b, "- burst goals against the floor: drain ≥ %s is **%s** the floor's %s; "+
			"p99 ≤ %s needs %.0f%% of %s calls within %s of the due instant, ≥ %s, **%s** the floor's drain; the floor's own p99 is %s\n",
			rate(goalDrain), times(goalDrain, h.DrainPerSec), rate(h.DrainPerSec),
			goalBurstP99, goalBurstShare*100, thousands(h.N), goalBurstP99, rate(need), times(need, h.DrainPerSec), ms(h.P99))
	}
	return b.String()
}

// bestAsynq is the asynq result with the highest value of v.
func (ri reportInfo) bestAsynq(v func(*result) float64) *result {
	var out *result
	for i := range ri.results {
		r := &ri.results[i]
		if r.Skipped || !strings.HasPrefix(r.System, "asynq") || v(r) <= 0 {
			continue
		}
		if out == nil || v(r) > v(out) {
			out = r
		}
	}
	return out
}
