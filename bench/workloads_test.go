package main

import (
	"strings"
	"testing"
	"time"
)

func TestParseWorkloads(t *testing.T) {
	known := []string{"enqueue", "burst", "steady 1000/s", "steady 5000/s", "keyed16 5000/s", "keyed16 40000/s", "sequential", "batch"}
	for _, c := range []struct {
		list string
		want []string
	}{
		{"", known},
		{"steady1000", []string{"steady 1000/s"}},                     // the names that worked before
		{" Steady 5000/s ,burst", []string{"steady 5000/s", "burst"}}, // spaces, case, "/s"
		{"keyed16", []string{"keyed16 5000/s", "keyed16 40000/s"}},    // a group
		{"keyed16-40000", []string{"keyed16 40000/s"}},                // one of its rates
		{"steady,sequential", []string{"steady 1000/s", "steady 5000/s", "sequential"}},
		{"batch,", []string{"batch"}},
	} {
		wanted, err := parseWorkloads(c.list, known)
		if err != nil {
			t.Fatalf("%q: %v", c.list, err)
		}
		for _, k := range known {
			if got, want := wanted(k), strings.Contains("|"+strings.Join(c.want, "|")+"|", "|"+k+"|"); got != want {
				t.Errorf("%q: wanted(%q) = %t, want %t", c.list, k, got, want)
			}
		}
	}
	for _, bad := range []string{"steady2000", "keyed", "keyed16-1", "batches"} {
		if _, err := parseWorkloads(bad, known); err == nil || !strings.Contains(err.Error(), "-workloads") {
			t.Errorf("%q: error %v, want one naming -workloads", bad, err)
		}
	}
}

func TestSteadySpecNames(t *testing.T) {
	if n := (steadySpec{rate: 1000, submitters: 4}).name(); n != "steady 1000/s" {
		t.Errorf("steady name %q", n)
	}
	if n := keyedSpecs[1].name(); n != "keyed16 40000/s" || normWorkload(n) != normWorkload("keyed16-40000") {
		t.Errorf("keyed name %q", n)
	}
}

func TestIssueSectionRenders(t *testing.T) {
	if s := (reportInfo{}).issueSection(); s != "" {
		t.Fatalf("nothing ran, section %q", s)
	}
	ri := reportInfo{
		floor: &floorFigures{Enq: enqRates{Single: 5000, Single16: 20000}},
		sizes: sizes{single: 2000, steadyFor: 30 * time.Second, batches: 20},
		results: []result{
			{System: "ontime service (SQLite)", Path: "service (HTTP + webhook)", Workload: "keyed16 5000/s", AskedPerSec: 5000, AcceptedPerSec: 5000, P99: 12 * time.Millisecond},
			{System: "ontime service (PostgreSQL)", Path: "service (HTTP + webhook)", Workload: "keyed16 5000/s", AskedPerSec: 5000, AcceptedPerSec: 1000, P99: 30 * time.Millisecond, Early: 1},
			{System: "River tuned", Path: "Go client + Go handler", Workload: "keyed16 5000/s", AskedPerSec: 5000, AcceptedPerSec: 2000},
			{System: "ontime service (SQLite)", Workload: "steady 1000/s"}, // not issue 24's
			{System: "ontime service (MariaDB)", Path: "service (HTTP + webhook)", Workload: "now16 2000/s", AskedPerSec: 2000, AcceptedPerSec: 1965, P50: 6800 * time.Microsecond, P99: 28500 * time.Microsecond},
		},
		intake: []intakeResult{
			{System: "ontime service (PostgreSQL)", Sequential: 3000, BatchKeyless: 50000, BatchKeyed: 40000, Durability: "PostgreSQL synchronous_commit=on"},
			{System: "ontime service (SQLite)", Sequential: 4500, BatchKeyless: 60000, BatchKeyed: 60000},
			{System: "River tuned", Sequential: 1500, BatchKeyless: 100000, BatchKeyed: 80000, Batch: "`InsertManyFast` of 1,000 (COPY FROM)"},
			{System: "asynq tuned", Sequential: 9000, BatchKeyless: 30000, BatchKeyed: 30000},
		},
	}
	s := ri.issueSection()
	for _, want := range []string{
		"keyed16 5000/s, ontime service (SQLite): accepted / River tuned 2.50× (≥ 2.0×: met); accepted / floor 16 clients (20,000/s) 0.25× (≥ 0.3×: **not met**); p99 12.0 ms (≤ 20ms: met); early 0 (0: met)",
		"keyed16 5000/s, ontime service (PostgreSQL): accepted / River tuned 0.50× (≥ 2.0×: **not met**)",
		"p99 30.0 ms (≤ 20ms: **not met**); early 1 (0: **not met**)",
		"| net/http floor | 5,000/s | nothing (no store) |",
		"sequential, ontime service (PostgreSQL): / floor 1 client 0.60× (≥ 0.8×: **not met**); / River `Insert` 2.00× (≥ 1.5×: met)",
		"sequential, ontime service (SQLite): / floor 1 client 0.90× (≥ 0.8×: met); / asynq tuned 0.50×",
		"batch, ontime service (PostgreSQL) / River tuned: keyless 0.50×, keyed 0.50× (≥ 1.0×: **not met**)",
		"batch, ontime service (SQLite) / asynq tuned: keyless 2.00×, keyed 2.00× (≥ 1.5×: met)",
		"20,000 tasks keyless then as many keyed",
		"**now16**: 16 clients",
		"| now16 2000/s | ontime service (MariaDB) | 2,000/s | 1,965/s |",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("section lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "steady 1000/s") {
		t.Errorf("section shows a workload not its own:\n%s", s)
	}
	if strings.Contains(s, "/ bare") || strings.Contains(s, "out of reach") {
		t.Errorf("no bare engine ran, yet the section compares with one:\n%s", s)
	}
}

func TestIssueSectionBare(t *testing.T) {
	ri := reportInfo{
		floor: &floorFigures{Enq: enqRates{Single: 5000}},
		sizes: sizes{single: 2000, batches: 20},
		intake: []intakeResult{
			{System: "ontime service (PostgreSQL)", Sequential: 1500, BatchKeyless: 50000, BatchKeyed: 40000},
			{System: "ontime service (MariaDB)", Sequential: 1000, BatchKeyless: 30000, BatchKeyed: 20000},
			{System: "ontime service (SQLite)", Sequential: 3000, BatchKeyless: 60000, BatchKeyed: 60000},
			{System: "River tuned", Sequential: 2000, BatchKeyless: 100000, BatchKeyed: 80000},
			{System: "bare PostgreSQL", Sequential: 3500, BatchKeyless: 200000, BatchKeyed: 160000, Durability: "PostgreSQL synchronous_commit=on, fsync=on", Batch: "`CopyFrom` of 1,000 (COPY FROM)"},
			{System: "bare MariaDB", Sequential: 1250, BatchKeyless: 60000, BatchKeyed: 40000},
			{System: "bare SQLite", Sequential: 40000, BatchKeyless: 300000, BatchKeyed: 150000, Batch: "one transaction of 1,000 prepared INSERTs"},
		},
	}
	s := ri.issueSection()
	for _, want := range []string{
		"| bare PostgreSQL | 3,500/s | PostgreSQL synchronous_commit=on, fsync=on |",
		"| bare SQLite | 40,000/s |",
		// Both PostgreSQL goals unmet, and out of reach: the floor's call
		// (5,000/s) and then the engine's commit (3,500/s) allow 2,059/s,
		// below 0.8 × 5,000 and below 1.5 × 2,000.
		"sequential, ontime service (PostgreSQL): / floor 1 client 0.30× (≥ 0.8×: **not met**); / River `Insert` 0.75× (≥ 1.5×: **not met**); / bare PostgreSQL 0.43×; / that bound 0.73×; " +
			"out of reach: a submit is the floor's call and then a commit of PostgreSQL alone (3,500/s), one after the other: at most 2,059/s, below 0.8× the floor's 5,000/s; " +
			"out of reach: a submit is the floor's call and then a commit of PostgreSQL alone (3,500/s), one after the other: at most 2,059/s, below 1.5× River `Insert`'s 2,000/s\n",
		"sequential, ontime service (MariaDB): / floor 1 client 0.20× (≥ 0.8×: **not met**); / bare MariaDB 0.80×; / that bound 1.00×; " +
			"out of reach: a submit is the floor's call and then a commit of MariaDB alone (1,250/s), one after the other: at most 1,000/s, below 0.8× the floor's 5,000/s\n",
		// SQLite: the bound (4,444/s) is above the goal (4,000/s):
		// reachable, no such line.
		"sequential, ontime service (SQLite): / floor 1 client 0.60× (≥ 0.8×: **not met**); / bare SQLite 0.07×; / that bound 0.68×\n",
		"| bare PostgreSQL | `CopyFrom` of 1,000 (COPY FROM) | 200,000/s | 160,000/s |",
		"| bare SQLite | one transaction of 1,000 prepared INSERTs | 300,000/s | 150,000/s |",
		"batch, ontime service (PostgreSQL) / River tuned: keyless 0.50×, keyed 0.50× (≥ 1.0×: **not met**); / bare PostgreSQL: keyless 0.25×, keyed 0.25×\n",
		"batch, ontime service (MariaDB) / River tuned: keyless 0.30×, keyed 0.25× (≥ 0.8×: **not met**); / bare MariaDB: keyless 0.50×, keyed 0.50×\n",
		// No asynq in this run: the bare engine's ratio alone.
		"batch, ontime service (SQLite) / bare SQLite: keyless 0.20×, keyed 0.40×\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("section lacks %q:\n%s", want, s)
		}
	}
	if n := strings.Count(s, "out of reach"); n != 3 {
		t.Errorf("%d out-of-reach lines, want 3:\n%s", n, s)
	}
	if strings.Contains(s, "- sequential, bare") || strings.Contains(s, "- batch, bare") {
		t.Errorf("a bare engine has goal lines of its own:\n%s", s)
	}

	// The bound above both goals, a goal met, or a run whose ontime
	// passed the bound (which disproves it): not out of reach.
	ri.intake = []intakeResult{
		{System: "ontime service (PostgreSQL)", Sequential: 4200},
		{System: "River tuned", Sequential: 2000},
		{System: "bare PostgreSQL", Sequential: 3900}, // the bound 2,191/s: ontime passed it
		{System: "ontime service (MariaDB)", Sequential: 1000},
		{System: "bare MariaDB", Sequential: 30000}, // the bound 4,286/s ≥ 0.8 × 5,000: reachable
	}
	s = ri.issueSection()
	for _, want := range []string{
		"sequential, ontime service (PostgreSQL): / floor 1 client 0.84× (≥ 0.8×: met); / River `Insert` 2.10× (≥ 1.5×: met); / bare PostgreSQL 1.08×; / that bound 1.92×\n",
		"sequential, ontime service (MariaDB): / floor 1 client 0.20× (≥ 0.8×: **not met**); / bare MariaDB 0.03×; / that bound 0.23×\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("section lacks %q:\n%s", want, s)
		}
	}
	ri.intake[0].Sequential = 2500 // neither goal met, and yet above the bound (2,191/s)
	s = ri.issueSection()
	if strings.Contains(s, "out of reach") {
		t.Errorf("a reachable goal called out of reach:\n%s", s)
	}
}

// keyed16 beside the engines alone from 16 clients: a goal the engine
// alone cannot reach (it commits less than 0.3× the floor with nothing
// delivered) is called out of reach; one it can is not.
func TestIssueSectionBareKeyed16(t *testing.T) {
	ri := reportInfo{
		floor: &floorFigures{Enq: enqRates{Single: 5000, Single16: 30000}},
		sizes: sizes{single: 2000, steadyFor: 15 * time.Second},
		results: []result{
			{System: "ontime service (PostgreSQL)", Path: "service (HTTP + webhook)", Workload: "keyed16 5000/s", AskedPerSec: 5000, AcceptedPerSec: 2000, P99: 9 * time.Millisecond},
			{System: "ontime service (SQLite)", Path: "service (HTTP + webhook)", Workload: "keyed16 5000/s", AskedPerSec: 5000, AcceptedPerSec: 3000, P99: 13 * time.Millisecond},
		},
		intake: []intakeResult{
			{System: "bare PostgreSQL", Concurrent16: 8000},
			{System: "bare SQLite", Concurrent16: 25000},
		},
	}
	s := ri.issueSection()
	for _, want := range []string{
		"keyed16 5000/s, ontime service (PostgreSQL): accepted / floor 16 clients (30,000/s) 0.07× (≥ 0.3×: **not met**); " +
			"/ bare PostgreSQL from 16 clients (8,000/s, nothing delivered) 0.25×; " +
			"out of reach: PostgreSQL alone commits 8,000/s keyed inserts from 16 clients, below 0.3× the floor's 30,000/s; p99 9.0 ms",
		"keyed16 5000/s, ontime service (SQLite): accepted / floor 16 clients (30,000/s) 0.10× (≥ 0.3×: **not met**); " +
			"/ bare SQLite from 16 clients (25,000/s, nothing delivered) 0.12×; p99 13.0 ms",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("section lacks %q:\n%s", want, s)
		}
	}
	if n := strings.Count(s, "out of reach"); n != 1 {
		t.Errorf("%d out-of-reach lines, want 1 (PostgreSQL's):\n%s", n, s)
	}
}

func TestBareSystemsSelection(t *testing.T) {
	var names []string
	for _, sys := range allSystems(nil) {
		if intakeOnly(sys) {
			names = append(names, sys.name())
			if issueSystem(sys) {
				t.Errorf("%s runs keyed16", sys.name())
			}
		} else if _, ok := sys.(*bareSys); ok {
			t.Errorf("%s is a bare system not intake-only", sys.name())
		}
	}
	if got := strings.Join(names, ", "); got != "bare PostgreSQL, bare MariaDB, bare SQLite" {
		t.Errorf("bare systems %q", got)
	}
	if got := bareInsert("postgres", 2); got != "INSERT INTO bare_tasks (id, topic, task_key, due, payload, status, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7), ($8, $9, $10, $11, $12, $13, $14)" {
		t.Errorf("postgres insert %q", got)
	}
	if got := bareInsert("mysql", 1); got != "INSERT INTO bare_tasks (id, topic, task_key, due, payload, status, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)" {
		t.Errorf("mysql insert %q", got)
	}
}

func TestSlowReport(t *testing.T) {
	first := time.Unix(1000, 0)
	slow := []time.Time{first.Add(100 * time.Millisecond), first.Add(3200 * time.Millisecond), first.Add(3900 * time.Millisecond)}
	got := slowReport(slow, first)
	want := "3 deliveries later than 5ms, by second of due time: +0s:1 +3s:2"
	if got != want {
		t.Fatalf("slowReport = %q, want %q", got, want)
	}
}
