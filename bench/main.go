// Command bench runs the same delayed-task workloads against ontime, asynq
// and River in one run and writes BENCHMARKS-style results with plots.
//
//	go run . [-quick] [-out out] [-benchmarks ../BENCHMARKS.md] [-only substring]
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
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
	last  time.Time // latest first delivery
	early int
}

// recorderRoom is more than the largest workload: recording never grows a
// slice or a map (copying under the lock) while handlers wait for it.
const recorderRoom = 160000

func newRecorder() *recorder {
	return &recorder{seen: make(map[string]int, recorderRoom), late: make([]time.Duration, 0, recorderRoom)}
}

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

// state answers the number of distinct tasks delivered and the latest
// first delivery.
func (r *recorder) state() (int, time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen), r.last
}

// result is one (system, workload) run.
type result struct {
	System, Workload   string
	N                  int
	SinglePerSec       float64 // enqueue 1-by-1 (its own pass; reported on the burst row)
	EnqueuePerSec      float64 // enqueue in batches of 1,000
	DrainPerSec        float64 // burst only
	P50, P99, P999, Mx time.Duration
	Lost, Dup, Early   int
	Late               []time.Duration // sorted
	Note               string
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

// Waiting for the last deliveries: at most maxWait after the last due time
// of a burst (River's defaults drain 50,000 tasks in about a minute) or
// steadyWait after that of a steady run (a system that is still delivering
// then has fallen behind the rate for good), and no longer than idleWait
// with nothing arriving past the last due time.
const (
	maxWait    = 2 * time.Minute
	steadyWait = 45 * time.Second
	idleWait   = 10 * time.Second
	dupWait    = 500 * time.Millisecond // after the last one, for duplicates to show
	batch      = 1000
)

// workload is a set of due times, planned once the system has started.
type workload struct {
	name  string
	paced bool // steady: each batch is enqueued a second before it is due
	plan  func(sys system) []time.Time
}

// run drives one workload: jobs due at the planned times (sorted), enqueued
// in batches of 1,000, ahead of time (paced: each a second before it is due).
func run(ctx context.Context, sys system, w workload) (result, error) {
	rec := newRecorder()
	if err := sys.start(ctx, rec.rec); err != nil {
		sys.stop()
		return result{}, fmt.Errorf("%s start: %w", sys.name(), err)
	}
	defer sys.stop()
	dues := w.plan(sys)
	names := ids(strings.ReplaceAll(w.name, " ", ""), len(dues))
	var enqueued time.Duration
	for i := 0; i < len(dues); i += batch {
		b := make([]job, 0, batch)
		for j := i; j < min(i+batch, len(dues)); j++ {
			b = append(b, job{ID: names[j], Due: dues[j]})
		}
		if w.paced {
			if wait := time.Until(b[0].Due.Add(-time.Second)); wait > 0 {
				time.Sleep(wait)
			}
		}
		t0 := time.Now()
		if err := sys.enqueue(ctx, b); err != nil {
			return result{}, fmt.Errorf("%s enqueue: %w", sys.name(), err)
		}
		enqueued += time.Since(t0)
	}
	res := result{System: sys.name(), Workload: w.name, N: len(dues),
		EnqueuePerSec: float64(len(dues)) / enqueued.Seconds()}
	if !w.paced {
		if slack := time.Until(dues[0]); slack < 0 {
			res.Note = fmt.Sprintf("enqueueing ended %s after the due time", (-slack).Round(time.Millisecond))
			log.Printf("%s: %s", sys.name(), res.Note)
		}
	}
	last := dues[len(dues)-1]
	wait := maxWait
	if w.paced {
		wait = steadyWait
	}
	for {
		n, arrived := rec.state()
		now := time.Now()
		if n >= len(dues) {
			break
		}
		if now.After(last.Add(wait)) {
			// Counted as lost, but say so when the system was still
			// delivering: those tasks are later than the wait, not dropped.
			if now.Sub(arrived) < idleWait {
				note := fmt.Sprintf("%d tasks were still undelivered when the wait ended %s after the last due time, while deliveries were still arriving: counted as lost, though late rather than dropped",
					len(dues)-n, wait)
				res.Note = strings.TrimPrefix(res.Note+"; "+note, "; ")
				log.Printf("%s: %s", sys.name(), note)
			}
			break
		}
		if ref := later(last, arrived); now.Sub(ref) > idleWait {
			log.Printf("%s: nothing delivered for %s; %d of %d arrived", sys.name(), idleWait, n, len(dues))
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(dupWait)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	slices.Sort(rec.late)
	res.Late = rec.late
	res.P50, res.P99, res.P999, res.Mx = pct(rec.late, .5), pct(rec.late, .99), pct(rec.late, .999), pct(rec.late, 1)
	res.Lost, res.Early = len(dues)-len(rec.seen), rec.early
	for _, c := range rec.seen {
		if c > 1 {
			res.Dup++
		}
	}
	if !w.paced && len(rec.seen) > 0 {
		res.DrainPerSec = float64(len(rec.seen)) / rec.last.Sub(dues[0]).Seconds()
	}
	return res, nil
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// enqueueRates is the 1-by-1 pass: n single enqueues one after the other,
// then calibration batches (for planning the burst), all due in an hour so
// nothing fires meanwhile. It answers tasks/s for both.
func enqueueRates(ctx context.Context, sys system, n, batches int) (single, batched float64, err error) {
	rec := newRecorder()
	if err := sys.start(ctx, rec.rec); err != nil {
		sys.stop()
		return 0, 0, fmt.Errorf("%s start: %w", sys.name(), err)
	}
	defer sys.stop()
	due := time.Now().Add(time.Hour)
	t0 := time.Now()
	for i, id := range ids("single", n) {
		if err := sys.enqueueOne(ctx, job{ID: id, Due: due.Add(time.Duration(i) * time.Millisecond)}); err != nil {
			return 0, 0, fmt.Errorf("%s enqueue one: %w", sys.name(), err)
		}
	}
	single = float64(n) / time.Since(t0).Seconds()
	names := ids("calib", batches*batch)
	t0 = time.Now()
	for i := 0; i < len(names); i += batch {
		b := make([]job, 0, batch)
		for _, id := range names[i : i+batch] {
			b = append(b, job{ID: id, Due: due})
		}
		if err := sys.enqueue(ctx, b); err != nil {
			return 0, 0, fmt.Errorf("%s enqueue: %w", sys.name(), err)
		}
	}
	batched = float64(len(names)) / time.Since(t0).Seconds()
	if got, _ := rec.state(); got > 0 {
		return 0, 0, fmt.Errorf("%s: %d tasks due in an hour were delivered", sys.name(), got)
	}
	return single, batched, nil
}

// burstLead is the least time between the planned end of the burst's
// enqueueing and its due instant.
const burstLead = 3 * time.Second

// burstDue plans a burst of n tasks on a system that enqueues batches at
// rate tasks/s: due burstLead after 1.5× the expected enqueueing time, on
// a quarter past a whole second (asynq stores due times in whole seconds).
func burstDue(n int, rate float64) time.Time {
	if rate <= 0 {
		rate = 5000
	}
	est := time.Duration(1.5 * float64(n) / rate * float64(time.Second))
	t := time.Now().Add(est + burstLead)
	due := t.Truncate(time.Second).Add(250 * time.Millisecond)
	if due.Before(t) {
		due = due.Add(time.Second)
	}
	return due
}

func allSystems() []system {
	return []system{
		&ontimeSys{label: "ontime (SQLite)", driver: "sqlite"},
		&ontimeSys{label: "ontime (SQLite, webhook)", driver: "sqlite", webhook: true},
		&ontimeSys{label: "ontime (MariaDB)", driver: "mysql"},
		&ontimeSys{label: "ontime (PostgreSQL)", driver: "postgres"},
		&ontimeSys{label: "ontime (Redis tier)", driver: "sqlite", redis: true},
		&asynqSys{}, &asynqSys{tuned: true},
		&riverSys{}, &riverSys{tuned: true},
	}
}

func main() {
	began := time.Now()
	quick := flag.Bool("quick", false, "a short smoke run with small workloads (default -out out-quick)")
	out := flag.String("out", "out", "directory for results.md and the plots")
	page := flag.String("benchmarks", "../BENCHMARKS.md", "page whose <!-- bench:begin/end --> section is replaced with the results (empty: none)")
	only := flag.String("only", "", "run only the systems whose name contains this (case-insensitive)")
	flag.Parse()
	outSet := false
	flag.Visit(func(f *flag.Flag) { outSet = outSet || f.Name == "out" })
	singleN, calib, burstN, rates, steadyFor := 2000, 3, 50000, []int{1000, 5000}, 30*time.Second
	if *quick {
		singleN, calib, burstN, rates, steadyFor = 200, 1, 5000, []int{500, 2000}, 4*time.Second
		if !outSet {
			*out = "out-quick"
		}
	}
	if *only != "" {
		*page = "" // a partial run does not replace the page's section
	}
	systems := func() []system {
		var out []system
		for _, s := range allSystems() {
			if strings.Contains(strings.ToLower(s.name()), strings.ToLower(*only)) {
				out = append(out, s)
			}
		}
		return out
	}
	if len(systems()) == 0 {
		log.Fatalf("-only %q matches no system", *only)
	}
	ctx := context.Background()
	m := machine(ctx)
	log.Print(m)

	// Enqueue one at a time (and calibrate the batch rate for the burst).
	single, batched := map[string]float64{}, map[string]float64{}
	for _, sys := range systems() {
		log.Printf("%s: %d single enqueues", sys.name(), singleN)
		s, b, err := enqueueRates(ctx, sys, singleN, calib)
		if err != nil {
			log.Fatal(err)
		}
		single[sys.name()], batched[sys.name()] = s, b
	}
	workloads := []workload{{name: "burst", plan: func(sys system) []time.Time {
		dues := make([]time.Time, burstN)
		due := burstDue(burstN, batched[sys.name()])
		for i := range dues {
			dues[i] = due
		}
		return dues
	}}}
	for _, rate := range rates {
		workloads = append(workloads, workload{name: fmt.Sprintf("steady %d/s", rate), paced: true, plan: func(system) []time.Time {
			n := int(steadyFor.Seconds()) * rate
			start := time.Now().Add(1200 * time.Millisecond)
			dues := make([]time.Time, n)
			for i := range dues {
				dues[i] = start.Add(time.Duration(i) * time.Second / time.Duration(rate))
			}
			return dues
		}})
	}
	var results []result
	for _, w := range workloads {
		for _, sys := range systems() {
			log.Printf("%s: %s", sys.name(), w.name)
			r, err := run(ctx, sys, w)
			if err != nil {
				log.Fatal(err)
			}
			if w.name == "burst" {
				r.SinglePerSec = single[sys.name()]
			}
			log.Printf("%s: %s: p50 %s p99 %s max %s lost %d dup %d early %d", r.System, r.Workload, ms(r.P50), ms(r.P99), ms(r.Mx), r.Lost, r.Dup, r.Early)
			results = append(results, r)
		}
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		log.Fatal(err)
	}
	var plots []string
	for _, w := range workloads {
		name := "lateness_cdf_" + strings.NewReplacer(" ", "", "/s", "").Replace(w.name) + ".png"
		if err := plotCDF(filepath.Join(*out, name), w.name, results); err != nil {
			log.Fatal(err)
		}
		plots = append(plots, name)
	}
	if err := plotDrain(filepath.Join(*out, "drain.png"), results); err != nil {
		log.Fatal(err)
	}
	plots = append(plots, "drain.png")
	rep := reportInfo{results: results, systems: systems(), quick: *quick, machine: m, wall: time.Since(began), plots: plots,
		sizes: sizes{single: singleN, burst: burstN, rates: rates, steadyFor: steadyFor}}
	md := rep.render("")
	if err := os.WriteFile(filepath.Join(*out, "results.md"), []byte(md), 0o644); err != nil {
		log.Fatal(err)
	}
	fmt.Print(md)
	if *page != "" {
		rel := filepath.ToSlash(filepath.Join("bench", *out)) + "/"
		if err := writeSection(*page, rep.render(rel)); err != nil {
			log.Fatal(err)
		}
	}
	log.Printf("whole run: %s", time.Since(began).Round(time.Second))
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
