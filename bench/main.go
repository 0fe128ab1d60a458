// Command bench runs the same delayed-task workloads against ontime, asynq
// and River in one run and writes BENCHMARKS-style results with plots.
//
//	go run . [-quick] [-out out]
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
)

// recorder is the handler side of a run: it notes each delivery's lateness.
type recorder struct {
	mu    sync.Mutex
	late  []time.Duration
	seen  map[string]int
	last  time.Time
	early int
}

func newRecorder() *recorder { return &recorder{seen: map[string]int{}} }

func (r *recorder) rec(id string, due time.Time) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen[id]++
	if r.seen[id] > 1 {
		return // a duplicate: counted, not a lateness sample
	}
	d := now.Sub(due)
	if d < 0 {
		r.early++
	}
	r.late = append(r.late, d)
	if now.After(r.last) {
		r.last = now
	}
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen)
}

// result is one (system, workload) run.
type result struct {
	System, Workload   string
	N                  int
	EnqueuePerSec      float64
	DrainPerSec        float64
	P50, P99, P999, Mx time.Duration
	Lost, Dup, Early   int
	Late               []time.Duration // sorted
}

func pct(s []time.Duration, p float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	return s[int(p*float64(len(s)-1))]
}

func ids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

// run drives one workload: jobs due at dues (sorted), enqueued ahead in
// batches of 1,000 (steady: each batch a second before it is due).
func run(ctx context.Context, sys system, workload string, dues []time.Time, paced bool) (result, error) {
	rec := newRecorder()
	if err := sys.start(ctx, rec.rec); err != nil {
		return result{}, fmt.Errorf("%s start: %w", sys.name(), err)
	}
	defer sys.stop()
	names := ids(workload, len(dues))
	var enqueued time.Duration
	for i := 0; i < len(dues); i += 1000 {
		batch := make([]job, 0, 1000)
		for j := i; j < min(i+1000, len(dues)); j++ {
			batch = append(batch, job{ID: names[j], Due: dues[j]})
		}
		if paced {
			if wait := time.Until(batch[0].Due.Add(-time.Second)); wait > 0 {
				time.Sleep(wait)
			}
		}
		t0 := time.Now()
		if err := sys.enqueue(ctx, batch); err != nil {
			return result{}, fmt.Errorf("%s enqueue: %w", sys.name(), err)
		}
		enqueued += time.Since(t0)
	}
	last := dues[len(dues)-1]
	deadline := last.Add(60 * time.Second)
	for rec.count() < len(dues) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // let duplicates show
	rec.mu.Lock()
	defer rec.mu.Unlock()
	slices.Sort(rec.late)
	res := result{System: sys.name(), Workload: workload, N: len(dues), Late: rec.late,
		EnqueuePerSec: float64(len(dues)) / enqueued.Seconds(),
		P50:           pct(rec.late, .5), P99: pct(rec.late, .99), P999: pct(rec.late, .999), Mx: pct(rec.late, 1),
		Lost: len(dues) - len(rec.seen), Early: rec.early}
	for _, c := range rec.seen {
		if c > 1 {
			res.Dup++
		}
	}
	if !paced && len(rec.seen) > 0 {
		res.DrainPerSec = float64(len(rec.seen)) / rec.last.Sub(dues[0]).Seconds()
	}
	return res, nil
}

func main() {
	quick := flag.Bool("quick", false, "a one-minute smoke run with small workloads")
	out := flag.String("out", "out", "directory for results.md and the plots")
	page := flag.String("benchmarks", "../BENCHMARKS.md", "page whose <!-- bench:begin/end --> section is replaced with the results (empty: none)")
	flag.Parse()
	burstN, steadyRate, steadyFor := 50000, 1000, 30*time.Second
	if *quick {
		burstN, steadyRate, steadyFor = 5000, 500, 5*time.Second
	}
	systems := func() []system {
		return []system{
			&ontimeSys{label: "ontime (SQLite)", driver: "sqlite"},
			&ontimeSys{label: "ontime (PostgreSQL)", driver: "postgres"},
			&asynqSys{}, &asynqSys{tuned: true},
			&riverSys{}, &riverSys{tuned: true},
		}
	}
	ctx := context.Background()
	var results []result
	for _, sys := range systems() {
		due := time.Now().Add(15 * time.Second).Truncate(time.Second).Add(250 * time.Millisecond)
		dues := make([]time.Time, burstN)
		for i := range dues {
			dues[i] = due
		}
		log.Printf("%s: burst of %d", sys.name(), burstN)
		r, err := run(ctx, sys, "burst", dues, false)
		if err != nil {
			log.Fatal(err)
		}
		results = append(results, r)
	}
	for _, sys := range systems() {
		n := int(steadyFor.Seconds()) * steadyRate
		start := time.Now().Add(3 * time.Second)
		dues := make([]time.Time, n)
		for i := range dues {
			dues[i] = start.Add(time.Duration(i) * time.Second / time.Duration(steadyRate))
		}
		log.Printf("%s: steady %d/s for %s", sys.name(), steadyRate, steadyFor)
		r, err := run(ctx, sys, fmt.Sprintf("steady %d/s", steadyRate), dues, true)
		if err != nil {
			log.Fatal(err)
		}
		results = append(results, r)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		log.Fatal(err)
	}
	if err := plotCDF(filepath.Join(*out, "lateness_cdf.png"), results); err != nil {
		log.Fatal(err)
	}
	if err := plotDrain(filepath.Join(*out, "drain.png"), results); err != nil {
		log.Fatal(err)
	}
	md := report(results, systems(), *quick, "")
	if err := os.WriteFile(filepath.Join(*out, "results.md"), []byte(md), 0o644); err != nil {
		log.Fatal(err)
	}
	fmt.Print(md)
	if *page != "" {
		rel := filepath.ToSlash(filepath.Join("bench", *out)) + "/"
		if err := writeSection(*page, report(results, systems(), *quick, rel)); err != nil {
			log.Fatal(err)
		}
	}
}

// writeSection replaces the generated section of the benchmarks page, so
// its numbers are never edited by hand; the rest of the page is kept.
func writeSection(path, md string) error {
	const begin, end = "<!-- bench:begin -->", "<!-- bench:end -->"
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	s := string(old)
	section := begin + "\n" + md + end
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i >= 0 && j > i {
		s = s[:i] + section + s[j+len(end):]
	} else {
		s += "\n" + section + "\n"
	}
	return os.WriteFile(path, []byte(s), 0o644)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

// report renders the results; plots are linked under plotDir.
func report(rs []result, systems []system, quick bool, plotDir string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Generated by `cd bench && go run .%s` on %s, %d cores, %s.\n\n",
		map[bool]string{true: " -quick", false: ""}[quick], time.Now().UTC().Format("2006-01-02 15:04 UTC"), runtime.NumCPU(), runtime.Version())
	b.WriteString("| system | knobs |\n|---|---|\n")
	for _, s := range systems {
		fmt.Fprintf(&b, "| %s | %s |\n", s.name(), s.knobs())
	}
	b.WriteString("\n| workload | system | tasks | enqueue (batches) | drain | p50 | p99 | p99.9 | max | lost | dup | early |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		drain := "—"
		if r.DrainPerSec > 0 {
			drain = fmt.Sprintf("%.0f/s", r.DrainPerSec)
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %.0f/s | %s | %s | %s | %s | %s | %d | %d | %d |\n",
			r.Workload, r.System, r.N, r.EnqueuePerSec, drain, ms(r.P50), ms(r.P99), ms(r.P999), ms(r.Mx), r.Lost, r.Dup, r.Early)
	}
	// Ratios: ontime's best against the best other system, per workload.
	b.WriteString("\nRatios, best ontime configuration vs. the best other system in this run that lost nothing and fired nothing early (p99: other/ontime; rates: ontime/other; above 1 favours ontime):\n\n")
	byWorkload := map[string][]result{}
	var order []string
	for _, r := range rs {
		if _, ok := byWorkload[r.Workload]; !ok {
			order = append(order, r.Workload)
		}
		byWorkload[r.Workload] = append(byWorkload[r.Workload], r)
	}
	for _, w := range order {
		var best, other *result
		for i := range byWorkload[w] {
			r := &byWorkload[w][i]
			if r.Lost > 0 || r.Early > 0 {
				continue
			}
			if strings.HasPrefix(r.System, "ontime") {
				if best == nil || r.P99 < best.P99 {
					best = r
				}
			} else if other == nil || r.P99 < other.P99 {
				other = r
			}
		}
		if best == nil || other == nil {
			continue
		}
		fmt.Fprintf(&b, "- %s: p99 %s (%s) vs %s (%s): %.1f×", w, ms(best.P99), best.System, ms(other.P99), other.System, float64(other.P99)/float64(max(best.P99, time.Microsecond)))
		if best.DrainPerSec > 0 && other.DrainPerSec > 0 {
			fmt.Fprintf(&b, "; drain %.2f×", best.DrainPerSec/other.DrainPerSec)
		}
		fmt.Fprintf(&b, "; enqueue %.2f×\n", best.EnqueuePerSec/other.EnqueuePerSec)
	}
	fmt.Fprintf(&b, "\n![lateness CDF](%slateness_cdf.png)\n\n![drain rate](%sdrain.png)\n", plotDir, plotDir)
	return b.String()
}
