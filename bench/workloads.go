package main

// Issue 24's workloads, measured the way users run a scheduler: every task
// with a business key, submitted one per call by concurrent HTTP clients
// while deliveries run (keyed16), by one client one after the other
// (sequential), and in calls of 1,000 (batch). They run on ontime's service
// path per engine, asynq tuned and River tuned, beside the net/http floor.

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// keyedLead is how far ahead of its submit call a keyed16 task is due.
const keyedLead = 2 * time.Second

// keyedSpecs are the keyed16 workloads (16 clients asking for each rate)
// and now16, keyed tasks due at once.
var keyedSpecs = []steadySpec{
	{rate: 5000, submitters: 16, lead: keyedLead, keyed: true},
	{rate: 40000, submitters: 16, lead: keyedLead, keyed: true},
	// Due at once (a webhook to send now, with retries): lateness is the
	// time from the submit to the delivery.
	{rate: 2000, submitters: 16, keyed: true, atOnce: true},
}

// workloadGroups are the names -workloads takes for several workloads:
// each selects the workloads whose name starts with it and a space.
var workloadGroups = []string{"steady", "keyed16", "now16"}

// normWorkload is a workload's name as -workloads compares it: lower case,
// without spaces, "/s", "-", "_" or "@" ("keyed16 5000/s" = "keyed16-5000").
func normWorkload(s string) string {
	return strings.NewReplacer(" ", "", "/s", "", "-", "", "_", "", "@", "").Replace(strings.ToLower(strings.TrimSpace(s)))
}

// parseWorkloads reads -workloads against the run's workload names:
// empty selects every one; an unknown name is an error naming the known
// ones, so a typo does not silently run nothing.
func parseWorkloads(list string, known []string) (func(string) bool, error) {
	if strings.TrimSpace(list) == "" {
		return func(string) bool { return true }, nil
	}
	want := map[string]bool{}
	for _, x := range strings.Split(list, ",") {
		n := normWorkload(x)
		if n == "" {
			continue
		}
		ok := slices.ContainsFunc(known, func(k string) bool { return normWorkload(k) == n })
		for _, g := range workloadGroups {
			if n == g {
				for _, k := range known {
					if strings.HasPrefix(k, g+" ") {
						want[normWorkload(k)], ok = true, true
					}
				}
			}
		}
		if !ok {
			return nil, fmt.Errorf("-workloads: unknown workload %q (known: %s, or a group: %s)", strings.TrimSpace(x),
				strings.Join(known, ", "), strings.Join(workloadGroups, ", "))
		}
		want[n] = true
	}
	return func(w string) bool { return want[normWorkload(w)] }, nil
}

// issueSystem says whether sys runs issue 24's workloads: ontime's plain
// service path per engine (memory tier, one task per webhook call), asynq
// tuned and River tuned.
func issueSystem(sys system) bool {
	switch s := sys.(type) {
	case *serviceSys:
		return !s.redis && s.batch == 0 && !s.tracing && !s.burstOnly
	case *asynqSys:
		return s.tuned
	case *riverSys:
		return s.tuned
	}
	return false
}

// singleSubmitter makes each submit its own call (no client-side
// coalescing), as the floor is called.
type singleSubmitter interface {
	enqueueSingle(ctx context.Context, j job) error
}

// copier is a system's fastest batch insert when it differs from enqueue
// (River: InsertManyFast, COPY FROM).
type copier interface {
	enqueueCopy(ctx context.Context, jobs []job) error
}

// intakeResult is one system's intake figures: keyed single submits one
// after the other, and calls of 1,000 keyless and keyed (due in an hour,
// nothing fires meanwhile).
type intakeResult struct {
	System, Path string
	Durability   string // what a commit waits for: synchronous_commit, fsync …
	Sequential   float64
	// Concurrent16: single keyed submits from 16 clients at once, as
	// fast as they go (the engines alone: keyed16's floor).
	Concurrent16 float64
	BatchKeyless float64
	BatchKeyed   float64
	Batch        string // the call a batch is
}

// runIntake measures sys's sequential keyed submits (n of them, when seq),
// n keyed submits from 16 clients at once (when conc) and batches of 1,000
// (batches calls keyless, then as many keyed, when batches > 0), on one
// freshly started system.
func runIntake(ctx context.Context, sys system, n int, seq bool, batches int, conc bool) (intakeResult, error) {
	out := intakeResult{System: sys.name(), Path: sys.path(), Batch: "enqueue of 1,000"}
	rec := newRecorder()
	if err := sys.start(ctx, rec.rec); err != nil {
		sys.stop()
		return out, fmt.Errorf("%s start: %w", sys.name(), err)
	}
	defer sys.stop()
	out.Durability = durability(ctx, sys)
	due := time.Now().Add(time.Hour)
	if seq {
		one := sys.enqueueOne
		if s, ok := sys.(singleSubmitter); ok {
			one = s.enqueueSingle
		}
		t0 := time.Now()
		for i := range n {
			if err := one(ctx, job{ID: fmt.Sprintf("seq-%d", i), Due: due.Add(time.Duration(i) * time.Millisecond), Keyed: true}); err != nil {
				return out, fmt.Errorf("%s sequential submit: %w", sys.name(), err)
			}
		}
		out.Sequential = float64(n) / time.Since(t0).Seconds()
	}
	if conc {
		one := sys.enqueueOne
		if s, ok := sys.(singleSubmitter); ok {
			one = s.enqueueSingle
		}
		var next atomic.Int64
		errs := make(chan error, 16)
		t0 := time.Now()
		for range 16 {
			go func() {
				for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
					if err := one(ctx, job{ID: fmt.Sprintf("conc-%d", i), Due: due.Add(time.Duration(i) * time.Millisecond), Keyed: true}); err != nil {
						errs <- err
						return
					}
				}
				errs <- nil
			}()
		}
		var first error
		for range 16 {
			if err := <-errs; err != nil && first == nil {
				first = err
			}
		}
		if first != nil {
			return out, fmt.Errorf("%s submit from 16 clients: %w", sys.name(), first)
		}
		out.Concurrent16 = float64(n) / time.Since(t0).Seconds()
	}
	if batches > 0 {
		call := sys.enqueue
		if c, ok := sys.(copier); ok {
			call = c.enqueueCopy
		}
		switch s := sys.(type) {
		case *serviceSys:
			out.Batch = "`client.SubmitBatchMinimal` (POST /v1/tasks:batch, Prefer: return=minimal) of 1,000"
		case *asynqSys:
			out.Batch = "1,000 `Enqueue` calls by 32 goroutines (asynq has no batch call)"
		case *riverSys:
			out.Batch = "`InsertManyFast` of 1,000 (COPY FROM)"
		case *bareSys:
			out.Batch = map[string]string{
				"postgres": "`CopyFrom` of 1,000 (COPY FROM)",
				"mysql":    "one multi-row INSERT of 1,000",
				"sqlite":   "one transaction of 1,000 prepared INSERTs",
			}[s.driver]
		}
		for _, keyed := range []bool{false, true} {
			t0 := time.Now()
			for b := range batches {
				jobs := make([]job, batch)
				for i := range jobs {
					jobs[i] = job{ID: fmt.Sprintf("batch-%t-%d-%d", keyed, b, i), Due: due, Keyed: keyed}
				}
				if err := call(ctx, jobs); err != nil {
					return out, fmt.Errorf("%s batch (keyed %t): %w", sys.name(), keyed, err)
				}
			}
			r := float64(batches*batch) / time.Since(t0).Seconds()
			if keyed {
				out.BatchKeyed = r
			} else {
				out.BatchKeyless = r
			}
		}
	}
	if got, _ := rec.state(); got > 0 {
		return out, fmt.Errorf("%s: %d tasks due in an hour were delivered", sys.name(), got)
	}
	return out, nil
}

// durability says what a commit of sys waits for, asked of the servers
// live: ontime sets no synchronous_commit, so PostgreSQL's is the
// server's for ontime and River alike.
func durability(ctx context.Context, sys system) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	query := func(driver, dsn, q string) string {
		db, err := sql.Open(driver, dsn)
		if err != nil {
			return "?"
		}
		defer db.Close()
		var v string
		if err := db.QueryRowContext(ctx, q).Scan(&v); err != nil {
			return "? (" + err.Error() + ")"
		}
		return v
	}
	pg := func() string {
		return "PostgreSQL synchronous_commit=" + query("pgx", pgAdmin, "SHOW synchronous_commit") +
			", fsync=" + query("pgx", pgAdmin, "SHOW fsync")
	}
	engine := func(driver string) string {
		switch driver {
		case "sqlite":
			return "SQLite WAL, synchronous=NORMAL (a commit is not fsynced; a checkpoint is)"
		case "mysql":
			return "MariaDB innodb_flush_log_at_trx_commit=" + query("mysql", mysqlAdmin, "SELECT @@innodb_flush_log_at_trx_commit") +
				", sync_binlog=" + query("mysql", mysqlAdmin, "SELECT @@sync_binlog")
		case "postgres":
			return pg()
		}
		return "—"
	}
	switch s := sys.(type) {
	case *serviceSys:
		return engine(s.driver)
	case *bareSys:
		// The same engine as ontime's service on it, the same settings.
		return engine(s.driver)
	case *riverSys:
		return pg()
	case *asynqSys:
		rdb := goredis.NewClient(&goredis.Options{Addr: redisAddr})
		defer rdb.Close()
		get := func(k string) string {
			m, err := rdb.ConfigGet(ctx, k).Result()
			if err != nil {
				return "?"
			}
			return m[k]
		}
		return "Redis appendonly=" + get("appendonly") + ", appendfsync=" + get("appendfsync")
	}
	return "—"
}

// keyedGoals are issue 24's goal 1 against the same run's anchors.
const (
	goalKeyedRiver = 2.0 // × River tuned's accepted rate
	goalKeyedFloor = 0.3 // × the floor's 16-client single submits
	goalKeyedP99   = 20 * time.Millisecond
	goalSeqFloor   = 0.8 // sequential × the floor's 1 client
	goalSeqRiver   = 1.5 // PostgreSQL sequential × River Insert
	goalBatchPG    = 1.0 // PostgreSQL batch × River COPY
	goalBatchMaria = 0.8 // MariaDB batch × River COPY
	goalBatchLite  = 1.5 // SQLite batch × asynq
)

// met marks a goal's ratio: "met" or "not met".
func met(ok bool) string {
	if ok {
		return "met"
	}
	return "**not met**"
}

// lateTable renders results of single submits with their lateness.
func lateTable(b *strings.Builder, rs []result) {
	b.WriteString("| workload | system | asked | accepted | submit call p99 | p50 | p99 | max | early | lost | dup |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s | %d | %d | %d |\n", r.Workload, r.System, rate(r.AskedPerSec), rate(r.AcceptedPerSec),
			ms(r.CallP99), ms(r.P50), ms(r.P99), ms(r.Mx), r.Early, r.Lost, r.Dup)
	}
	b.WriteString("\n")
}

// issueSection renders issue 24's workloads: keyed16 and now16 (from the results),
// sequential and batch (intake), with the goals' ratios; "" when none ran.
func (ri reportInfo) issueSection() string {
	var keyed, now []result
	for _, r := range ri.results {
		switch {
		case r.Skipped:
		case strings.HasPrefix(r.Workload, "keyed16 "):
			keyed = append(keyed, r)
		case strings.HasPrefix(r.Workload, "now16 "):
			now = append(now, r)
		}
	}
	if len(keyed) == 0 && len(now) == 0 && len(ri.intake) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n### Workloads users run (issue 24)\n\n")
	var floor16, floor1 float64
	if ri.floor != nil {
		floor16, floor1 = ri.floor.Enq.Single16, ri.floor.Enq.Single
	}
	find := func(name string) *intakeResult {
		for i := range ri.intake {
			if ri.intake[i].System == name {
				return &ri.intake[i]
			}
		}
		return nil
	}
	river, asynqT := find("River tuned"), find("asynq tuned")
	// bareOf is the engine an ontime system stores in, by its name, and
	// that engine alone's figures (nil: it did not run).
	bareOf := func(system string) (string, *intakeResult) {
		for _, e := range []string{"PostgreSQL", "MariaDB", "SQLite"} {
			if strings.Contains(system, e) {
				return e, find(bareName(e))
			}
		}
		return "", nil
	}
	if len(keyed) > 0 {
		fmt.Fprintf(&b, "**keyed16**: 16 clients each submitting single tasks, each with a business key (its ID, unique per task), due %s after the call, "+
			"on the steady schedule for %s, deliveries running meanwhile (ontime by webhook to the bench's receiver, one `POST /v1/tasks` per submit with the Go client's coalescing off, as the floor is called; asynq with `TaskID`, River with unique args, to their Go handlers).\n\n",
			keyedLead, ri.sizes.steadyFor)
		lateTable(&b, keyed)
		for _, w := range uniqueWorkloads(keyed) {
			var river *result
			for i := range keyed {
				if keyed[i].Workload == w && keyed[i].System == "River tuned" {
					river = &keyed[i]
				}
			}
			for _, r := range keyed {
				if r.Workload != w || !isService(&r) {
					continue
				}
				var parts []string
				if river != nil && river.AcceptedPerSec > 0 {
					x := r.AcceptedPerSec / river.AcceptedPerSec
					parts = append(parts, fmt.Sprintf("accepted / River tuned %s (≥ %.1f×: %s)", times(r.AcceptedPerSec, river.AcceptedPerSec), goalKeyedRiver, met(x >= goalKeyedRiver)))
				}
				if floor16 > 0 {
					x := r.AcceptedPerSec / floor16
					parts = append(parts, fmt.Sprintf("accepted / floor 16 clients (%s) %s (≥ %.1f×: %s)", rate(floor16), times(r.AcceptedPerSec, floor16), goalKeyedFloor, met(x >= goalKeyedFloor)))
				}
				if engine, bare := bareOf(r.System); bare != nil && bare.Concurrent16 > 0 {
					parts = append(parts, fmt.Sprintf("/ %s from 16 clients (%s, nothing delivered) %s", bare.System, rate(bare.Concurrent16), times(r.AcceptedPerSec, bare.Concurrent16)))
					if floor16 > 0 && goalKeyedFloor*floor16 > bare.Concurrent16 && r.AcceptedPerSec/floor16 < goalKeyedFloor {
						parts = append(parts, fmt.Sprintf("out of reach: %s alone commits %s keyed inserts from 16 clients, below %.1f× the floor's %s",
							engine, rate(bare.Concurrent16), goalKeyedFloor, rate(floor16)))
					}
				}
				parts = append(parts, fmt.Sprintf("p99 %s (≤ %s: %s)", ms(r.P99), goalKeyedP99, met(r.P99 <= goalKeyedP99)),
					fmt.Sprintf("early %d (0: %s)", r.Early, met(r.Early == 0)))
				fmt.Fprintf(&b, "- %s, %s: %s\n", w, r.System, strings.Join(parts, "; "))
			}
		}
	}
	if len(now) > 0 {
		fmt.Fprintf(&b, "\n**now16**: 16 clients each submitting single keyed tasks due at once (no due time) on the steady schedule for %s, deliveries running meanwhile; "+
			"lateness here is the time from the submit call to the delivery (ontime inserts such a task running and delivers it from the node that took the submit).\n\n", ri.sizes.steadyFor)
		lateTable(&b, now)
	}
	if len(ri.intake) == 0 {
		return b.String()
	}
	if slices.ContainsFunc(ri.intake, func(r intakeResult) bool { return r.Sequential > 0 }) {
		fmt.Fprintf(&b, "\n**sequential**: one client, %s keyed single submits one after the other (ontime: `POST /v1/tasks` each; River `Insert`; asynq `Enqueue`; a bare engine: one INSERT of one row in autocommit), due in an hour.\n\n", thousands(ri.sizes.single))
		b.WriteString("| system | submits/s | a commit waits for |\n|---|---|---|\n")
		if floor1 > 0 {
			fmt.Fprintf(&b, "| %s | %s | nothing (no store) |\n", floorName, rate(floor1))
		}
		for _, r := range ri.intake {
			if r.Sequential > 0 {
				fmt.Fprintf(&b, "| %s | %s | %s |\n", r.System, rate(r.Sequential), r.Durability)
			}
		}
		b.WriteString("\n")
		for _, r := range ri.intake {
			if r.Sequential <= 0 || !strings.HasPrefix(r.System, "ontime") {
				continue
			}
			var parts []string
			if floor1 > 0 {
				parts = append(parts, fmt.Sprintf("/ floor 1 client %s (≥ %.1f×: %s)", times(r.Sequential, floor1), goalSeqFloor, met(r.Sequential/floor1 >= goalSeqFloor)))
			}
			if strings.Contains(r.System, "PostgreSQL") && river != nil && river.Sequential > 0 {
				parts = append(parts, fmt.Sprintf("/ River `Insert` %s (≥ %.1f×: %s)", times(r.Sequential, river.Sequential), goalSeqRiver, met(r.Sequential/river.Sequential >= goalSeqRiver)))
			}
			if asynqT != nil && asynqT.Sequential > 0 {
				parts = append(parts, "/ asynq tuned "+times(r.Sequential, asynqT.Sequential))
			}
			// The engine alone, and the bound of a sequential submit: at
			// least the floor's call (the same client; a server that
			// decodes the submit and answers) and then one commit of the
			// engine alone, one after the other, since the answer waits
			// for the commit. A goal above that bound is out of reach in
			// this run.
			if engine, bare := bareOf(r.System); bare != nil && bare.Sequential > 0 {
				parts = append(parts, fmt.Sprintf("/ %s %s", bare.System, times(r.Sequential, bare.Sequential)))
				bound, what := bare.Sequential, fmt.Sprintf("%s alone commits %s one at a time", engine, rate(bare.Sequential))
				if floor1 > 0 {
					bound = 1 / (1/floor1 + 1/bare.Sequential)
					what = fmt.Sprintf("a submit is the floor's call and then a commit of %s alone (%s), one after the other: at most %s", engine, rate(bare.Sequential), rate(bound))
					parts = append(parts, fmt.Sprintf("/ that bound %s", times(r.Sequential, bound)))
				}
				// A run in which ontime passed the bound disproves it:
				// then nothing is called out of reach.
				if r.Sequential <= bound {
					if floor1 > 0 && goalSeqFloor*floor1 > bound && r.Sequential/floor1 < goalSeqFloor {
						parts = append(parts, fmt.Sprintf("out of reach: %s, below %.1f× the floor's %s", what, goalSeqFloor, rate(floor1)))
					}
					if engine == "PostgreSQL" && river != nil && river.Sequential > 0 && goalSeqRiver*river.Sequential > bound && r.Sequential/river.Sequential < goalSeqRiver {
						parts = append(parts, fmt.Sprintf("out of reach: %s, below %.1f× River `Insert`'s %s", what, goalSeqRiver, rate(river.Sequential)))
					}
				}
			}
			if len(parts) > 0 {
				fmt.Fprintf(&b, "- sequential, %s: %s\n", r.System, strings.Join(parts, "; "))
			}
		}
	}
	if slices.ContainsFunc(ri.intake, func(r intakeResult) bool { return r.BatchKeyless > 0 }) {
		fmt.Fprintf(&b, "\n**batch**: calls of 1,000 one after the other, %s tasks keyless then as many keyed, due in an hour.\n\n", thousands(ri.sizes.batches*batch))
		b.WriteString("| system | call | keyless | keyed |\n|---|---|---|---|\n")
		for _, r := range ri.intake {
			if r.BatchKeyless > 0 {
				fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", r.System, r.Batch, rate(r.BatchKeyless), rate(r.BatchKeyed))
			}
		}
		b.WriteString("\n")
		for _, r := range ri.intake {
			if r.BatchKeyless <= 0 || !strings.HasPrefix(r.System, "ontime") {
				continue
			}
			anchor, goal := river, goalBatchPG
			switch {
			case strings.Contains(r.System, "MariaDB"):
				goal = goalBatchMaria
			case strings.Contains(r.System, "SQLite"):
				anchor, goal = asynqT, goalBatchLite
			}
			var parts []string
			if anchor != nil && anchor.BatchKeyless > 0 {
				parts = append(parts, fmt.Sprintf("/ %s: keyless %s, keyed %s (≥ %.1f×: %s)", anchor.System,
					times(r.BatchKeyless, anchor.BatchKeyless), times(r.BatchKeyed, anchor.BatchKeyed), goal,
					met(r.BatchKeyless/anchor.BatchKeyless >= goal && anchor.BatchKeyed > 0 && r.BatchKeyed/anchor.BatchKeyed >= goal)))
			}
			if _, bare := bareOf(r.System); bare != nil && bare.BatchKeyless > 0 {
				parts = append(parts, fmt.Sprintf("/ %s: keyless %s, keyed %s", bare.System,
					times(r.BatchKeyless, bare.BatchKeyless), times(r.BatchKeyed, bare.BatchKeyed)))
			}
			if len(parts) > 0 {
				fmt.Fprintf(&b, "- batch, %s %s\n", r.System, strings.Join(parts, "; "))
			}
		}
	}
	return b.String()
}

// uniqueWorkloads lists the workloads of rs in their order.
func uniqueWorkloads(rs []result) []string {
	var out []string
	for _, r := range rs {
		if !slices.Contains(out, r.Workload) {
			out = append(out, r.Workload)
		}
	}
	return out
}
