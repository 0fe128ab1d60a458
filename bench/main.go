// Command bench runs the same delayed-task workloads against ontime, asynq
// and River in one run and writes BENCHMARKS-style results with plots.
//
//	go run . [-quick] [-out out] [-benchmarks ../BENCHMARKS.md] [-only substring] [-workloads list] [-steady-for d] [-server-src dir]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"maps"
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
	// slow: the due times of the deliveries later than slowLate (at most
	// slowRoom), to say when in a run the late ones fell (slowReport).
	slow []time.Time
}

const (
	slowLate = 5 * time.Millisecond
	slowRoom = 20000
)

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
	if d > slowLate && len(r.slow) < slowRoom {
		r.slow = append(r.slow, due)
	}
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
	System, Path, Workload string
	N                      int      // tasks to deliver (steady: those accepted)
	Enq                    enqRates // its own pass (reported once per system)
	EnqueuePerSec          float64  // burst: its batches of 1,000 in this run
	// steady: the submitters' schedule and what the system answered.
	Submitters             int
	AskedPerSec            float64       // the schedule: tasks per second asked for
	AcceptedPerSec         float64       // submits answered OK per second, from the start to the last answer
	Rejected, NotSubmitted int           // submits that failed; tasks the submitters had no time for
	Behind                 time.Duration // how late the most delayed submit call started against its plan
	CallP99, CallMax       time.Duration // steady: a submit call's time, from its start to its answer
	DrainPerSec            float64       // burst only
	PerCall                float64       // webhook: tasks per call received (batch delivery shows here)
	P50, P99, P999, Mx     time.Duration
	Lost, Dup, Early       int
	Late                   []time.Duration // sorted
	Skipped                bool            // the system could not run (Note says why)
	Note                   string
}

// enqRates is the enqueue pass: single enqueue calls by 1, 4 and 16
// concurrent clients, and batches of 1,000 one after the other.
type enqRates struct {
	Single, Single4, Single16, Batch float64 // tasks/s
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

// runBurst drives the burst: n jobs due at one instant, enqueued in
// batches of 1,000 ahead of it.
func runBurst(ctx context.Context, sys system, n int, batchRate float64) (result, error) {
	rec := newRecorder()
	if err := sys.start(ctx, rec.rec); err != nil {
		sys.stop()
		return result{}, fmt.Errorf("%s start: %w", sys.name(), err)
	}
	defer sys.stop()
	due := burstDue(n, batchRate)
	names := ids("burst", n)
	var enqueued time.Duration
	for i := 0; i < n; i += batch {
		b := make([]job, 0, batch)
		for j := i; j < min(i+batch, n); j++ {
			b = append(b, job{ID: names[j], Due: due})
		}
		t0 := time.Now()
		if err := sys.enqueue(ctx, b); err != nil {
			return result{}, fmt.Errorf("%s enqueue: %w", sys.name(), err)
		}
		enqueued += time.Since(t0)
	}
	res := result{System: sys.name(), Path: sys.path(), Workload: "burst", N: n,
		EnqueuePerSec: float64(n) / enqueued.Seconds()}
	if slack := time.Until(due); slack < 0 {
		res.Note = fmt.Sprintf("enqueueing ended %s after the due time", (-slack).Round(time.Millisecond))
		log.Printf("%s: %s", sys.name(), res.Note)
	}
	collect(sys, rec, &res, due, due, maxWait)
	return res, nil
}

// steadyLead is how far ahead of its submit call each steady task is due.
const steadyLead = time.Second

// runSteady drives a steady run: spec.submitters goroutines make single
// enqueue calls on a schedule of spec.rate tasks/s for dur, each task due
// spec.lead (steadyLead when 0) after its call starts (as a user
// computing "in a second" would); keyed specs give each task a key and
// submit one call per task where the system can. A submitter behind its
// schedule calls at once, without sleeping, and stops when dur is over:
// what it had no time for is counted, not hidden, and the accepted rate
// falls below the asked one.
func runSteady(ctx context.Context, sys system, spec steadySpec, dur time.Duration) (result, error) {
	rate, submitters, lead := float64(spec.rate), spec.submitters, spec.lead
	if lead <= 0 {
		lead = steadyLead
	}
	if spec.atOnce {
		lead = 0
	}
	one := sys.enqueueOne
	if s, ok := sys.(singleSubmitter); ok && spec.keyed {
		one = s.enqueueSingle
	}
	rec := newRecorder()
	if err := sys.start(ctx, rec.rec); err != nil {
		sys.stop()
		return result{}, fmt.Errorf("%s start: %w", sys.name(), err)
	}
	defer sys.stop()
	n := int(dur.Seconds() * rate)
	start := time.Now().Add(200 * time.Millisecond)
	// A little grace past dur, so that a submitter that is on time but
	// woke a millisecond late for its last call does not count it as
	// never submitted.
	end := start.Add(dur + 250*time.Millisecond)
	var (
		mu                  sync.Mutex
		ok, failed, skipped int
		firstDue, lastDue   time.Time
		lastAnswer          time.Time
		behind              time.Duration
		calls               = make([]time.Duration, 0, min(n, recorderRoom))
		firstErr            error
		wg                  sync.WaitGroup
	)
	for s := range submitters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := s; k < n; k += submitters {
				planned := start.Add(time.Duration(float64(k) / rate * float64(time.Second)))
				if wait := time.Until(planned); wait > 0 {
					time.Sleep(wait)
				}
				now := time.Now()
				if !now.Before(end) {
					mu.Lock()
					skipped += (n - k + submitters - 1) / submitters
					mu.Unlock()
					return
				}
				due := now.Add(lead)
				err := one(ctx, job{ID: fmt.Sprintf("steady-%d", k), Due: due, Keyed: spec.keyed})
				answered := time.Now()
				mu.Lock()
				behind = max(behind, now.Sub(planned))
				// A task is due lead after its call starts: a call slower
				// than that makes it late before ontime has it.
				calls = append(calls, answered.Sub(now))
				if err != nil {
					failed++
					if firstErr == nil {
						firstErr = err
					}
				} else {
					ok++
					if firstDue.IsZero() || due.Before(firstDue) {
						firstDue = due
					}
					lastDue = later(lastDue, due)
				}
				lastAnswer = later(lastAnswer, answered)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	res := result{System: sys.name(), Path: sys.path(), Workload: spec.name(), N: ok,
		Submitters: submitters, AskedPerSec: rate, Rejected: failed, NotSubmitted: skipped, Behind: behind}
	slices.Sort(calls)
	res.CallP99, res.CallMax = pct(calls, .99), pct(calls, 1)
	if ok > 0 {
		res.AcceptedPerSec = float64(ok) / lastAnswer.Sub(start).Seconds()
	}
	if failed > 0 {
		res.Note = fmt.Sprintf("%d submits failed, the first: %v", failed, firstErr)
		log.Printf("%s: %s", sys.name(), res.Note)
	}
	if skipped > 0 {
		note := fmt.Sprintf("the submitters fell behind: %d of %d tasks were never submitted in the %s", skipped, n, dur)
		res.Note = strings.TrimPrefix(res.Note+"; "+note, "; ")
		log.Printf("%s: %s", sys.name(), note)
	}
	if ok == 0 {
		return res, nil
	}
	collect(sys, rec, &res, firstDue, lastDue, steadyWait)
	return res, nil
}

// seq answers k, k+step, … below n.
func seq(k, n, step int) []int {
	var out []int
	for ; k < n; k += step {
		out = append(out, k)
	}
	return out
}

// webhooked is a system delivering to the bench's webhook receiver.
type webhooked interface{ perCall() float64 }

// collect waits for res.N deliveries (at most wait after the last due
// time, or idleWait with nothing arriving) and fills in the lateness.
func collect(sys system, rec *recorder, res *result, first, last time.Time, wait time.Duration) {
	for {
		n, arrived := rec.state()
		now := time.Now()
		if n >= res.N {
			break
		}
		if now.After(last.Add(wait)) {
			// Counted as lost, but say so when the system was still
			// delivering: those tasks are later than the wait, not dropped.
			if now.Sub(arrived) < idleWait {
				note := fmt.Sprintf("%d tasks were still undelivered when the wait ended %s after the last due time, while deliveries were still arriving: counted as lost, though late rather than dropped",
					res.N-n, wait)
				res.Note = strings.TrimPrefix(res.Note+"; "+note, "; ")
				log.Printf("%s: %s", sys.name(), note)
			}
			break
		}
		if ref := later(last, arrived); now.Sub(ref) > idleWait {
			log.Printf("%s: nothing delivered for %s; %d of %d arrived", sys.name(), idleWait, n, res.N)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(dupWait)
	if w, ok := sys.(webhooked); ok {
		res.PerCall = w.perCall()
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.slow) > 0 && res.Workload != "burst" {
		log.Printf("%s: %s: %s", sys.name(), res.Workload, slowReport(rec.slow, first))
	}
	slices.Sort(rec.late)
	res.Late = rec.late
	res.P50, res.P99, res.P999, res.Mx = pct(rec.late, .5), pct(rec.late, .99), pct(rec.late, .999), pct(rec.late, 1)
	res.Lost, res.Early = max(0, res.N-len(rec.seen)), rec.early
	for _, c := range rec.seen {
		if c > 1 {
			res.Dup++
		}
	}
	if res.Workload == "burst" && len(rec.seen) > 0 {
		res.DrainPerSec = float64(len(rec.seen)) / rec.last.Sub(first).Seconds()
	}
}

// slowReport says when the deliveries later than slowLate were due: how
// many per second of the run (from first, the first due time), the
// seconds with none left out. A stall shows as one second holding most.
func slowReport(slow []time.Time, first time.Time) string {
	per := map[int]int{}
	for _, d := range slow {
		per[int(d.Sub(first)/time.Second)]++
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d deliveries later than %s, by second of due time:", len(slow), slowLate)
	for _, sec := range slices.Sorted(maps.Keys(per)) {
		fmt.Fprintf(&b, " +%ds:%d", sec, per[sec])
	}
	return b.String()
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// enqueueRates is the enqueue pass: n single enqueues by 1, then 4, then
// 16 concurrent clients, then batches of 1,000 (which also plan the
// burst), all due in an hour so nothing fires meanwhile.
func enqueueRates(ctx context.Context, sys system, n, batches int) (enqRates, error) {
	var out enqRates
	rec := newRecorder()
	if err := sys.start(ctx, rec.rec); err != nil {
		sys.stop()
		return out, fmt.Errorf("%s start: %w", sys.name(), err)
	}
	defer sys.stop()
	due := time.Now().Add(time.Hour)
	if err := singles(ctx, sys, n, due, false, &out); err != nil {
		return out, err
	}
	names := ids("calib", batches*batch)
	t0 := time.Now()
	for i := 0; i < len(names); i += batch {
		b := make([]job, 0, batch)
		for _, id := range names[i : i+batch] {
			b = append(b, job{ID: id, Due: due})
		}
		if err := sys.enqueue(ctx, b); err != nil {
			return out, fmt.Errorf("%s enqueue: %w", sys.name(), err)
		}
	}
	out.Batch = float64(len(names)) / time.Since(t0).Seconds()
	if got, _ := rec.state(); got > 0 {
		return out, fmt.Errorf("%s: %d tasks due in an hour were delivered", sys.name(), got)
	}
	return out, nil
}

// singles makes n single enqueue calls by 1, then 4, then 16 concurrent
// clients, each task due after due (keyed: with a key), and fills in
// their rates.
func singles(ctx context.Context, sys system, n int, due time.Time, keyed bool, out *enqRates) error {
	for _, c := range []struct {
		clients int
		rate    *float64
	}{{1, &out.Single}, {4, &out.Single4}, {16, &out.Single16}} {
		names := ids(fmt.Sprintf("single%d", c.clients), n)
		var wg sync.WaitGroup
		errs := make([]error, c.clients)
		t0 := time.Now()
		for w := range c.clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for _, i := range seq(w, n, c.clients) {
					if err := sys.enqueueOne(ctx, job{ID: names[i], Due: due.Add(time.Duration(i) * time.Millisecond), Keyed: keyed}); err != nil {
						errs[w] = err
						return
					}
				}
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("%s enqueue one (%d clients): %w", sys.name(), c.clients, err)
		}
		*c.rate = float64(n) / time.Since(t0).Seconds()
	}
	return nil
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

// allSystems lists every system of a run, ontime's in-process and
// service configurations first; bin is the server the service ones run.
func allSystems(bin *serverBinary) []system {
	return []system{
		&ontimeSys{label: "ontime (SQLite)", driver: "sqlite"},
		&ontimeSys{label: "ontime (SQLite, webhook)", driver: "sqlite", webhook: true},
		&ontimeSys{label: "ontime (MariaDB)", driver: "mysql"},
		&ontimeSys{label: "ontime (PostgreSQL)", driver: "postgres"},
		&ontimeSys{label: "ontime (Redis tier)", driver: "sqlite", redis: true},
		&serviceSys{label: "ontime service (SQLite)", driver: "sqlite", bin: bin},
		&serviceSys{label: "ontime service (SQLite, batch 100)", driver: "sqlite", batch: 100, bin: bin},
		&serviceSys{label: "ontime service (SQLite, tracing)", driver: "sqlite", tracing: true, bin: bin},
		&serviceSys{label: "ontime service (MariaDB)", driver: "mysql", bin: bin},
		&serviceSys{label: "ontime service (PostgreSQL)", driver: "postgres", bin: bin},
		&serviceSys{label: "ontime service (Redis tier)", driver: "sqlite", redis: true, bin: bin},
		// Batch delivery on the other stores and tiers: the burst is what
		// it is for (a steady run at these rates makes batches of 1–2).
		&serviceSys{label: "ontime service (MariaDB, batch 100)", driver: "mysql", batch: 100, bin: bin, burstOnly: true},
		&serviceSys{label: "ontime service (PostgreSQL, batch 100)", driver: "postgres", batch: 100, bin: bin, burstOnly: true},
		&serviceSys{label: "ontime service (Redis tier, batch 100)", driver: "sqlite", redis: true, batch: 100, bin: bin, burstOnly: true},
		&asynqSys{}, &asynqSys{tuned: true},
		&riverSys{}, &riverSys{tuned: true},
		// The engines alone, for the intake workloads only (intakeOnly):
		// the floor of what each commits, beside ontime's service on it.
		&bareSys{driver: "postgres"}, &bareSys{driver: "mysql"}, &bareSys{driver: "sqlite"},
	}
}

// steadySpec is one steady workload: a rate and the submitters asking for
// it; keyed ones (keyed16) give every task a key, due lead ahead.
type steadySpec struct {
	rate       int
	submitters int
	lead       time.Duration // 0: steadyLead
	keyed      bool
	// atOnce: each task is due when its call starts (no lead), so its
	// lateness is the time from the submit to its delivery.
	atOnce bool
}

// name is the workload's name in the report and in -workloads.
func (s steadySpec) name() string {
	if s.atOnce {
		return fmt.Sprintf("now%d %d/s", s.submitters, s.rate)
	}
	if s.keyed {
		return fmt.Sprintf("keyed%d %d/s", s.submitters, s.rate)
	}
	return fmt.Sprintf("steady %d/s", s.rate)
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == floorChildArg {
		os.Exit(floorChild())
	}
	began := time.Now()
	quick := flag.Bool("quick", false, "a short smoke run with small workloads (default -out out-quick)")
	out := flag.String("out", "out", "directory for results.md and the plots")
	page := flag.String("benchmarks", "../BENCHMARKS.md", "page whose <!-- bench:begin/end --> section is replaced with the results (empty: none)")
	only := flag.String("only", "", "run only the systems whose name contains this, or one of these comma-separated (case-insensitive; \"=NAME\" matches NAME whole): \"service\" for ontime's service path, \"floor\" for the net/http floor, \"bare\" for the database engines alone (sequential and batch only)")
	only2 := flag.String("workloads", "", "run only these comma-separated workloads (case-insensitive, spaces, \"-\" and \"/s\" ignored): enqueue, burst, steady1000, steady5000 (-quick: steady500, steady2000), keyed16-5000, keyed16-40000, sequential, batch; \"steady\" and \"keyed16\" select each of their rates; the enqueue pass runs when enqueue or burst is asked for (the burst is planned on its batch rate)")
	steadyDur := flag.Duration("steady-for", 0, "length of each steady run (default 30s, -quick 4s)")
	batchCalls := flag.Int("batches", 0, "calls of 1,000 per batch run, keyless and again keyed (default 100, -quick 3: 20 took under a second, too short to measure)")
	serverSrc := flag.String("server-src", "", "build `ontime serve` for the service path from this checkout (default: the module go.mod replaces, ..)")
	flag.Parse()
	outSet := false
	flag.Visit(func(f *flag.Flag) { outSet = outSet || f.Name == "out" })
	singleN, calib, burstN, steadyFor, batches := 2000, 3, 50000, 30*time.Second, 100
	steadies := []steadySpec{{rate: 1000, submitters: 4}, {rate: 5000, submitters: 16}}
	if *quick {
		singleN, calib, burstN, steadyFor, batches = 200, 1, 5000, 4*time.Second, 3
		steadies = []steadySpec{{rate: 500, submitters: 4}, {rate: 2000, submitters: 16}}
		if !outSet {
			*out = "out-quick"
		}
	}
	if *batchCalls > 0 {
		batches = *batchCalls
	}
	if *steadyDur > 0 {
		steadyFor = *steadyDur
	}
	known := []string{"enqueue", "burst"}
	for _, st := range steadies {
		known = append(known, st.name())
	}
	for _, st := range keyedSpecs {
		known = append(known, st.name())
	}
	known = append(known, "sequential", "batch")
	// wanted says whether workload w is one -workloads asks for.
	wanted, err := parseWorkloads(*only2, known)
	if err != nil {
		log.Fatal(err)
	}
	wantedKeyed := slices.ContainsFunc(keyedSpecs, func(s steadySpec) bool { return wanted(s.name()) })
	if *only != "" || *only2 != "" || *steadyDur > 0 {
		*page = "" // a partial run does not replace the page's section
	}
	ctx := context.Background()
	var bin *serverBinary
	chosen := func(name string) bool {
		for _, sub := range strings.Split(*only, ",") {
			if exact, ok := strings.CutPrefix(sub, "="); ok {
				if strings.EqualFold(name, exact) {
					return true
				}
				continue
			}
			if strings.Contains(strings.ToLower(name), strings.ToLower(sub)) {
				return true
			}
		}
		return false
	}
	systems := func() []system {
		var out []system
		for _, s := range allSystems(bin) {
			if chosen(s.name()) {
				out = append(out, s)
			}
		}
		return out
	}
	floorOn := chosen(floorName)
	if len(systems()) == 0 && !floorOn {
		log.Fatalf("-only %q matches no system", *only)
	}
	if slices.ContainsFunc(systems(), func(s system) bool { _, ok := s.(*serviceSys); return ok }) {
		log.Print("building ontime serve")
		b, err := buildServer(ctx, *serverSrc)
		if err != nil {
			log.Fatal(err)
		}
		defer b.remove()
		bin = b
	}
	m := machine(ctx)
	log.Print(m)

	// skipped names the systems that cannot run on this build, and why.
	skipped := map[string]string{}
	skip := func(sys system, workload string, err error) (result, bool) {
		if !errors.Is(err, errSkip) {
			return result{}, false
		}
		_, why, _ := strings.Cut(err.Error(), errSkip.Error()+": ")
		skipped[sys.name()] = why
		log.Printf("%s: skipped: %s", sys.name(), why)
		return result{System: sys.name(), Path: sys.path(), Workload: workload, Skipped: true, Note: why}, true
	}
	var results []result

	// The enqueue pass (and the batch rate that plans the burst).
	enq := map[string]enqRates{}
	for _, sys := range systems() {
		if !wanted("enqueue") && !wanted("burst") {
			break
		}
		if intakeOnly(sys) {
			continue
		}
		log.Printf("%s: %d single enqueues by 1, 4 and 16 clients", sys.name(), singleN)
		e, err := enqueueRates(ctx, sys, singleN, calib)
		if r, ok := skip(sys, "enqueue", err); ok {
			results = append(results, r)
			continue
		}
		if err != nil {
			log.Fatal(err)
		}
		enq[sys.name()] = e
		log.Printf("%s: 1-by-1 %s, 4 clients %s, 16 clients %s, batches %s", sys.name(), rate(e.Single), rate(e.Single4), rate(e.Single16), rate(e.Batch))
	}
	var floor *floorFigures
	if floorOn && (wanted("enqueue") || wantedKeyed || wanted("sequential")) {
		// Keyed when a keyed workload compares against it: the same bytes.
		keyed := wantedKeyed || wanted("sequential")
		log.Printf("%s: %d single submits by 1, 4 and 16 clients (keyed %t)", floorName, singleN, keyed)
		e, err := floorSubmits(ctx, singleN, keyed)
		if err != nil {
			log.Fatal(err)
		}
		floor = &floorFigures{Enq: e}
		log.Printf("%s: 1-by-1 %s, 4 clients %s, 16 clients %s", floorName, rate(e.Single), rate(e.Single4), rate(e.Single16))
	}
	workloads := []string{"burst"}
	for _, st := range steadies {
		workloads = append(workloads, fmt.Sprintf("steady %d/s", st.rate))
	}
	for i, w := range workloads {
		if !wanted(w) {
			continue
		}
		if i == 0 && floorOn {
			// Before the systems' bursts: a ceiling is measured on the
			// machine as fresh as it gets in the run (after River, whose
			// dropped databases PostgreSQL is still cleaning, the same
			// calls ran at half the rate). The best of floorRounds.
			for range floorRounds {
				log.Printf("%s: %d webhook calls", floorName, burstN)
				fig := &floorFigures{}
				if err := floorWebhooks(ctx, burstN, fig); err != nil {
					log.Fatal(err)
				}
				r := fig.Hook
				log.Printf("%s: webhook: p50 %s p99 %s max %s lost %d dup %d drain %s", floorName, ms(r.P50), ms(r.P99), ms(r.Mx), r.Lost, r.Dup, rate(r.DrainPerSec))
				if floor == nil {
					floor = &floorFigures{}
				}
				if floor.Hook == nil || r.DrainPerSec > floor.Hook.DrainPerSec {
					floor.Hook, floor.Concurr, floor.Failed = fig.Hook, fig.Concurr, fig.Failed
				}
			}
		}
		for _, sys := range systems() {
			if _, ok := skipped[sys.name()]; ok {
				continue
			}
			if s, ok := sys.(*serviceSys); ok && s.burstOnly && i != 0 {
				continue
			}
			if intakeOnly(sys) {
				continue
			}
			log.Printf("%s: %s", sys.name(), w)
			var r result
			var err error
			if i == 0 {
				r, err = runBurst(ctx, sys, burstN, enq[sys.name()].Batch)
			} else {
				r, err = runSteady(ctx, sys, steadies[i-1], steadyFor)
			}
			if sr, ok := skip(sys, w, err); ok {
				results = append(results, sr)
				continue
			}
			if err != nil {
				log.Fatal(err)
			}
			r.Enq = enq[sys.name()]
			if r.AskedPerSec > 0 {
				log.Printf("%s: %s: asked %s accepted %s (%d submitters, %d not submitted, %d failed; submit call p99 %s max %s)", r.System, r.Workload, rate(r.AskedPerSec), rate(r.AcceptedPerSec), r.Submitters, r.NotSubmitted, r.Rejected, ms(r.CallP99), ms(r.CallMax))
			}
			log.Printf("%s: %s: p50 %s p99 %s max %s lost %d dup %d early %d drain %s", r.System, r.Workload, ms(r.P50), ms(r.P99), ms(r.Mx), r.Lost, r.Dup, r.Early, rate(r.DrainPerSec))
			results = append(results, r)
		}
	}
	// Issue 24's workloads, on its systems only.
	for _, spec := range keyedSpecs {
		w := spec.name()
		if !wanted(w) {
			continue
		}
		workloads = append(workloads, w) // its lateness plot
		for _, sys := range systems() {
			if _, ok := skipped[sys.name()]; ok || !issueSystem(sys) {
				continue
			}
			log.Printf("%s: %s", sys.name(), w)
			r, err := runSteady(ctx, sys, spec, steadyFor)
			if sr, ok := skip(sys, w, err); ok {
				results = append(results, sr)
				continue
			}
			if err != nil {
				log.Fatal(err)
			}
			log.Printf("%s: %s: asked %s accepted %s (%d submitters, %d not submitted, %d failed; submit call p99 %s max %s)", r.System, r.Workload, rate(r.AskedPerSec), rate(r.AcceptedPerSec), r.Submitters, r.NotSubmitted, r.Rejected, ms(r.CallP99), ms(r.CallMax))
			log.Printf("%s: %s: p50 %s p99 %s max %s lost %d dup %d early %d", r.System, r.Workload, ms(r.P50), ms(r.P99), ms(r.Mx), r.Lost, r.Dup, r.Early)
			results = append(results, r)
		}
	}
	var intake []intakeResult
	if wanted("sequential") || wanted("batch") || wantedKeyed {
		nb := 0
		if wanted("batch") {
			nb = batches
		}
		for _, sys := range systems() {
			if _, ok := skipped[sys.name()]; ok || !issueSystem(sys) && !intakeOnly(sys) {
				continue
			}
			// keyed16 alone asks the engines alone for their 16-client
			// floor, nothing of the others.
			if !wanted("sequential") && !wanted("batch") && !intakeOnly(sys) {
				continue
			}
			conc := wantedKeyed && intakeOnly(sys)
			log.Printf("%s: intake (sequential %t, batches %d, 16 clients %t)", sys.name(), wanted("sequential"), nb, conc)
			r, err := runIntake(ctx, sys, singleN, wanted("sequential"), nb, conc)
			if _, ok := skip(sys, "intake", err); ok {
				continue
			}
			if err != nil {
				log.Fatal(err)
			}
			log.Printf("%s: sequential %s, 16 clients %s, batch keyless %s, keyed %s; %s", r.System, rate(r.Sequential), rate(r.Concurrent16), rate(r.BatchKeyless), rate(r.BatchKeyed), r.Durability)
			intake = append(intake, r)
		}
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		log.Fatal(err)
	}
	var plots []string
	if len(results) > 0 && slices.ContainsFunc(results, func(r result) bool { return len(r.Late) > 0 }) { // the floor alone has nothing to plot
		for _, w := range workloads {
			if !wanted(w) {
				continue
			}
			name := "lateness_cdf_" + strings.NewReplacer("keyed16 ", "keyed16-", " ", "", "/s", "").Replace(w) + ".png"
			if err := plotCDF(filepath.Join(*out, name), w, results); err != nil {
				log.Fatal(err)
			}
			plots = append(plots, name)
		}
		if wanted("burst") {
			if err := plotDrain(filepath.Join(*out, "drain.png"), results); err != nil {
				log.Fatal(err)
			}
			plots = append(plots, "drain.png")
		}
		if err := plotAccepted(filepath.Join(*out, "accepted.png"), results); err != nil {
			log.Fatal(err)
		}
		plots = append(plots, "accepted.png")
	}
	rep := reportInfo{results: results, intake: intake, systems: systems(), floor: floor, skipped: skipped, quick: *quick, machine: m, wall: time.Since(began), plots: plots,
		sizes: sizes{single: singleN, burst: burstN, steadies: steadies, steadyFor: steadyFor, batches: batches}}
	md := rep.render("", true, "")
	if err := os.WriteFile(filepath.Join(*out, "results.md"), []byte(md), 0o644); err != nil {
		log.Fatal(err)
	}
	fmt.Print(md)
	if *page != "" {
		rel := filepath.ToSlash(filepath.Join("bench", *out)) + "/"
		if err := writeSection(*page, rep.render(rel, false, rel+"results.md")); err != nil {
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
