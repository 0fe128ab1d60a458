package scanjob

import (
	"context"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/ontimehq/ontime/internal/metrics"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/testdb"
)

// logRec records what a service logs.
type logRec struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *logRec) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRec) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r.Clone())
	return nil
}
func (l *logRec) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRec) WithGroup(string) slog.Handler      { return l }

// lines lists the records at level as "msg err=…".
func (l *logRec) lines(level slog.Level) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range l.recs {
		if r.Level != level {
			continue
		}
		line := r.Message
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "err" {
				line += " err=" + a.Value.String()
			}
			return true
		})
		out = append(out, line)
	}
	return out
}

// brokenGauge reads ontime_job_broken{job}.
func brokenGauge(t *testing.T, m *metrics.Jobs, job string) float64 {
	t.Helper()
	var d dto.Metric
	if err := m.Broken.WithLabelValues(job).Write(&d); err != nil {
		t.Fatal(err)
	}
	return d.GetGauge().GetValue()
}

// brokenRig is a service on one user database with its log, metrics and
// sender, for the tests of broken jobs.
type brokenRig struct {
	u   *userDB
	st  *memState
	clk *FakeClock
	snd *recSender
	log *logRec
	m   *metrics.Jobs
	s   *Service
}

func newBrokenRig(t *testing.T, engine string, rows int) *brokenRig {
	t.Helper()
	g := &brokenRig{u: newUserDB(t, engine, rows), st: newMemState(), clk: NewFakeClock(sec(5)), snd: &recSender{},
		log: &logRec{}, m: metrics.NewJobs(nil)}
	g.s = newService(t, g.st, g.clk, "n1", func(c *Config) {
		c.Senders = map[string]Sender{"http": g.snd}
		c.Logger = slog.New(g.log)
		c.Metrics = g.m
	})
	return g
}

func (g *brokenRig) add(t *testing.T, sp SQLSpec) {
	t.Helper()
	if err := g.s.AddSQL(context.Background(), sp); err != nil {
		t.Fatalf("a job whose statements fail is still registered (broken): %v", err)
	}
}

// trigger runs every item of the job once, as :trigger does, and waits.
func (g *brokenRig) trigger(job string) {
	for _, it := range g.s.jobs[job].items {
		g.s.trigger(context.Background(), g.s.jobs[job], it, "manual", g.clk.Now())
	}
	g.s.wg.Wait()
}

func (g *brokenRig) sent() int {
	g.snd.mu.Lock()
	defer g.snd.mu.Unlock()
	n := 0
	for _, b := range g.snd.batches {
		n += len(b.Rows)
	}
	return n
}

// assertBroken: the job's view says broken with the database's message,
// the gauge is 1 and one ERROR was logged for it.
func (g *brokenRig) assertBroken(t *testing.T, job string, msgs ...string) {
	t.Helper()
	in := jobInfo(g.s, job)
	if in.State != StateBroken || in.BrokenSince.IsZero() {
		t.Fatalf("state %q since %v, error %q; want broken", in.State, in.BrokenSince, in.Error)
	}
	for _, m := range msgs {
		if !strings.Contains(in.Error, m) {
			t.Fatalf("error %q does not say %q", in.Error, m)
		}
	}
	if v := brokenGauge(t, g.m, job); v != 1 {
		t.Fatalf("ontime_job_broken{job=%q} = %v, want 1", job, v)
	}
	errs := g.log.lines(slog.LevelError)
	if len(errs) == 0 || !strings.HasPrefix(errs[len(errs)-1], "job broken") || !strings.Contains(errs[len(errs)-1], msgs[len(msgs)-1]) {
		t.Fatalf("ERROR log %q", errs)
	}
}

// unknownColumn is how each engine refuses a column that does not exist.
func unknownColumn(engine, col string) string {
	switch engine {
	case "mysql":
		return "Unknown column '" + col + "'"
	case "postgres":
		return `column "` + col + `"`
	}
	return "no such column: " + col
}

// TestTypoInSetBreaksJob: issue 25 item 6. `on_success: {set: {stauts:
// 2}}` is refused by the database when the job is registered (EXPLAIN of
// its UPDATE, nothing written): the job is broken — its view says so with
// the database's message, ontime_job_broken is 1, an ERROR is logged —
// and a trigger delivers nothing, where it used to deliver the same rows
// at every trigger and fail to mark them. Once the table has the column
// the next check (brokenRecheck later) finds it and the job runs.
func TestTypoInSetBreaksJob(t *testing.T) {
	t.Parallel()
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			g := newBrokenRig(t, engine, 4)
			sp := billSpec("typo", g.u)
			sp.Set = map[string]any{"stauts": 2}
			g.add(t, sp)
			g.assertBroken(t, "typo", "on_success on bill_0", unknownColumn(engine, "stauts"))
			if ic := jobInfo(g.s, "typo").Index; ic == nil || !ic.OK {
				t.Fatalf("the fetch runs, its index check too: %+v", ic)
			}
			before := g.u.rows(t)
			for range 3 {
				g.trigger("typo")
				g.clk.Advance(time.Second)
			}
			if n := g.sent(); n != 0 {
				t.Fatalf("a broken job delivered %d rows", n)
			}
			if runs := g.st.allRuns("typo"); len(runs) != 0 {
				t.Fatalf("a broken job ran: %+v", runs)
			}
			if got := g.u.rows(t); !reflect.DeepEqual(got, before) {
				t.Fatalf("rows changed: %v, were %v", got, before)
			}
			if n := len(g.log.lines(slog.LevelError)); n != 1 {
				t.Fatalf("%d ERROR lines, want the one when it broke", n)
			}

			// The table gets the column: the next check repairs the job.
			g.u.exec(t, `ALTER TABLE bill_0 ADD COLUMN stauts INT NOT NULL DEFAULT 0`)
			g.clk.Advance(brokenRecheck)
			g.trigger("typo")
			if in := jobInfo(g.s, "typo"); in.State != StateOK || in.Error != "" || !in.BrokenSince.IsZero() {
				t.Fatalf("after the repair: state %q, error %q", in.State, in.Error)
			}
			if v := brokenGauge(t, g.m, "typo"); v != 0 {
				t.Fatalf("ontime_job_broken = %v after the repair", v)
			}
			if n := g.sent(); n != 4 {
				t.Fatalf("the repaired job delivered %d rows, want 4", n)
			}
		})
	}
}

// TestMissingTableOrColumnBreaksJob: issue 25 item 7. A fetch whose table
// or column (in columns or where) does not exist is a broken job with the
// database's message, not a WARN "job fetch has no index" with the error
// inside; a column renamed after the job started breaks it at its run.
func TestMissingTableOrColumnBreaksJob(t *testing.T) {
	t.Parallel()
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			g := newBrokenRig(t, engine, 2)
			noTable := map[string]string{"mysql": "doesn't exist", "postgres": `relation "bill_9" does not exist`, "sqlite": "no such table: bill_9"}[engine]
			sp := billSpec("notable", g.u)
			sp.Table = "bill_9"
			g.add(t, sp)
			g.assertBroken(t, "notable", "fetch on bill_9", noTable)
			if ic := jobInfo(g.s, "notable").Index; ic == nil || ic.OK || !strings.Contains(ic.Warning, "not checked") {
				t.Fatalf("index check of a broken fetch: %+v", ic)
			}

			sp = billSpec("nocolumn", g.u)
			sp.Columns = []string{"id", "x", "nosuch"}
			g.add(t, sp)
			g.assertBroken(t, "nocolumn", "fetch on bill_0", unknownColumn(engine, "nosuch"))
			// On SQLite too, where a double-quoted name that matches no
			// column is a string literal: the filter matched no row.
			sp = billSpec("nowhere", g.u)
			sp.Where = map[string]any{"stauts": 1}
			g.add(t, sp)
			g.assertBroken(t, "nowhere", "fetch on bill_0", unknownColumn(engine, "stauts"))
			for _, w := range g.log.lines(slog.LevelWarn) {
				if strings.Contains(w, "no index") {
					t.Fatalf("a missing table or column logged as a missing index: %q", w)
				}
			}
			g.trigger("notable")
			g.trigger("nocolumn")
			if len(g.st.allRuns("notable")) != 0 || len(g.st.allRuns("nocolumn")) != 0 {
				t.Fatal("a broken job ran")
			}

			// A column renamed after the job started: the run's fetch is
			// refused, the job breaks, nothing was delivered.
			g.add(t, billSpec("renamed", g.u))
			if in := jobInfo(g.s, "renamed"); in.State != StateOK {
				t.Fatalf("state %q, error %q", in.State, in.Error)
			}
			g.u.exec(t, `ALTER TABLE bill_0 RENAME COLUMN x TO x2`)
			g.trigger("renamed")
			g.assertBroken(t, "renamed", "fetch on bill_0", unknownColumn(engine, "x"))
			runs := g.st.allRuns("renamed")
			if len(runs) != 1 || runs[0].Status != store.RunFailed || !strings.Contains(runs[0].Error, "job broken") || g.sent() != 0 {
				t.Fatalf("runs %+v, %d rows sent", runs, g.sent())
			}
		})
	}
}

// TestWriteRefusedAtRunTimeBreaksJob: issue 25 item 6, at run time. A
// column of on_success.set dropped after the job started: the first page
// is delivered and its UPDATE refused (twice: the write is tried again
// once), the job breaks and the run stops; later triggers deliver
// nothing, where every trigger used to deliver that page again. Once the
// column is back, the next check repairs the job and it delivers the
// rows: the first page a second time (at least once), never more.
func TestWriteRefusedAtRunTimeBreaksJob(t *testing.T) {
	t.Parallel()
	for _, engine := range testdb.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			g := newBrokenRig(t, engine, 7)
			g.u.exec(t, `ALTER TABLE bill_0 ADD COLUMN done INT NOT NULL DEFAULT 0`)
			sp := billSpec("drop", g.u)
			sp.Set = map[string]any{"status": 2, "done": 1}
			g.add(t, sp)
			if in := jobInfo(g.s, "drop"); in.State != StateOK {
				t.Fatalf("state %q, error %q", in.State, in.Error)
			}
			g.u.exec(t, `ALTER TABLE bill_0 DROP COLUMN done`)
			g.trigger("drop")
			if !reflect.DeepEqual(g.snd.keys(), [][]any{ks(1, 2), ks(3)}) {
				t.Fatalf("batches %v: want the first page only", g.snd.keys())
			}
			g.assertBroken(t, "drop", "on_success on bill_0", unknownColumn(engine, "done"))
			runs := g.st.allRuns("drop")
			if len(runs) != 1 || runs[0].Status != store.RunFailed || !strings.Contains(runs[0].Error, "job broken") {
				t.Fatalf("runs %+v", runs)
			}
			for range 3 {
				g.clk.Advance(brokenRecheck) // each trigger checks again, and the column is still gone
				g.trigger("drop")
			}
			if n := g.sent(); n != 3 {
				t.Fatalf("%d rows delivered while broken, want the first page's 3", n)
			}
			g.u.exec(t, `ALTER TABLE bill_0 ADD COLUMN done INT NOT NULL DEFAULT 0`)
			g.clk.Advance(brokenRecheck)
			g.trigger("drop")
			if in := jobInfo(g.s, "drop"); in.State != StateOK {
				t.Fatalf("after the repair: state %q, error %q", in.State, in.Error)
			}
			if n := g.sent(); n != 10 {
				t.Fatalf("%d rows delivered in all, want 3 + 7", n)
			}
			for id, r := range g.u.rows(t) {
				if id <= 7 && r.status != 2 {
					t.Fatalf("row %d: %+v", id, r)
				}
			}
		})
	}
}

// TestRefusedOnlyWhenRunStaysBroken: a write that EXPLAIN accepts but
// the database refuses when it runs (here a trigger; in MySQL's strict
// mode a value the column does not take) breaks the job; the checks that
// follow run that write again in a transaction they roll back, so the job
// stays broken — delivering nothing — until the write passes.
func TestRefusedOnlyWhenRunStaysBroken(t *testing.T) {
	t.Parallel()
	g := newBrokenRig(t, "sqlite", 3)
	g.add(t, billSpec("trig", g.u))
	g.u.exec(t, `CREATE TRIGGER bill_0_no2 BEFORE UPDATE OF status ON bill_0 WHEN NEW.status = 2 BEGIN SELECT RAISE(ABORT, 'status 2 refused'); END`)
	g.trigger("trig")
	g.assertBroken(t, "trig", "on_success on bill_0", "status 2 refused")
	for range 2 {
		g.clk.Advance(brokenRecheck)
		g.trigger("trig")
		g.assertBroken(t, "trig", "(run again, rolled back)", "status 2 refused")
	}
	if n := g.sent(); n != 3 {
		t.Fatalf("%d rows delivered, want the first page's 3 once", n)
	}
	if got := g.u.rows(t); got[1].status != 1 {
		t.Fatalf("the rolled-back probe changed a row: %+v", got)
	}
	g.u.exec(t, `DROP TRIGGER bill_0_no2`)
	g.clk.Advance(brokenRecheck)
	g.trigger("trig")
	if in := jobInfo(g.s, "trig"); in.State != StateOK || g.sent() != 6 {
		t.Fatalf("after the repair: state %q, error %q, %d sent", in.State, in.Error, g.sent())
	}
}
