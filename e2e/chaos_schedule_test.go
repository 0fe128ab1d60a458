package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/testdb"
)

// TestChaosScheduleOwnerKilled (issue 25 item 5, under a fault): two
// `ontime serve` processes on MariaDB with two `@every 1s` schedules, one
// with misfire skip and one with fire_once, delivered by webhook. Both
// nodes (so whichever owns the schedules' items) are killed with SIGKILL
// and kept down longer than the misfire threshold (2 × cluster.lease_ttl)
// plus the time fire times are made ahead (3 × cluster.lease_ttl), so
// that tasks made ahead and fire times never made both go stale; then
// both are started again. No burst of stale fires: for skip, no fire is
// delivered later than the threshold after its fire time; for fire_once,
// one stale fire for the whole missed span; the fires after the recovery
// are all delivered; none ever early.
//
// "Later than the threshold" is judged by the receiver's clock at arrival,
// while ontime judges a task at its start: a fire started just under the
// threshold arrives just over it, so a fire up to schedGrace over counts
// as on time for skip, and fire_once may show one such fire beside its
// stale one. A task started before the kill and retried after it (attempt
// 2 or more) is not a misfire (README: judged at first start only): such
// late deliveries are counted apart.
func TestChaosScheduleOwnerKilled(t *testing.T) {
	chaosParallel(t)
	clusterTTL := 2 * time.Second // chaosYAML's short-run lease
	if chaosFull() {
		clusterTTL = 10 * time.Second // chaosYAML's full-run lease
	}
	threshold := 2 * clusterTTL
	ahead := 3 * clusterTTL
	const schedGrace = time.Second
	downFor := threshold + ahead + time.Duration(chaosSize(t, "SCHEDULE_EXTRA_DOWN_SECONDS", 3, 10))*time.Second
	steady := time.Duration(chaosSize(t, "SCHEDULE_STEADY_SECONDS", 4, 15)) * time.Second
	after := time.Duration(chaosSize(t, "SCHEDULE_AFTER_SECONDS", 5, 20)) * time.Second

	rcv := newReceiver(t)
	yaml, leases := chaosYAML("mysql", testdb.DSNs(t, "mysql", 1), "")
	yaml += fmt.Sprintf(`schedules:
  - name: skipper
    cron: "@every 1s"
    misfire: skip
    task: {topic: chaos.sched.skip, target: %q}
  - name: onceler
    cron: "@every 1s"
    misfire: fire_once
    task: {topic: chaos.sched.once, target: %q}
`, rcv.srv.URL, rcv.srv.URL)
	cfg := writeChaosConfig(t, t.TempDir(), yaml)
	cl := startChaosCluster(t, cfg, 2)
	time.Sleep(steady)

	cl.kill9(0)
	cl.kill9(1)
	// After both: kill9 waits for each process to end, and node 2 serves
	// until its own kill (CI saw it deliver the fire time a few ms after
	// the first kill began, counted as one of the down span).
	killed := time.Now()
	time.Sleep(downFor)
	restarting := time.Now()
	cl.restart(0)
	cl.restart(1)
	ready := time.Now()
	t.Logf("both nodes killed at %s, restarted at %s (down %s), ready at %s", killed.Format(time.RFC3339Nano),
		restarting.Format(time.RFC3339Nano), restarting.Sub(killed).Round(time.Millisecond), ready.Format(time.RFC3339Nano))
	// Every fire time from a threshold after the restart to after seconds
	// later delivered: the schedules go on once recovered.
	recovered := ready.Add(threshold).Truncate(time.Second).Add(time.Second)
	end := recovered.Add(after)
	for _, name := range []string{"skipper", "onceler"} {
		waitFor(t, 2*time.Minute, name+"'s fires after the recovery delivered", func() bool {
			got := map[time.Time]bool{}
			for _, fc := range fireCalls(rcv, name) {
				got[fc.Fire.UTC()] = true
			}
			for f := recovered; !f.After(end); f = f.Add(time.Second) {
				if !got[f.UTC()] {
					return false
				}
			}
			return true
		})
	}
	time.Sleep(3 * time.Second) // late duplicates show

	missed := func(metric, policy string) float64 {
		n := 0.0
		for _, a := range cl.addrs {
			n += counter(t, "http://"+a, metric+`{misfire="`+policy+`"}`)
		}
		return n
	}
	var lines []string
	for _, s := range []struct{ name, policy string }{{"skipper", "skip"}, {"onceler", "fire_once"}} {
		type fire struct {
			first   time.Time // arrival of its first 2xx call
			attempt int
			calls   int
		}
		fires := map[time.Time]*fire{}
		var early int
		for _, fc := range fireCalls(rcv, s.name) {
			if fc.At.Before(fc.Fire) {
				early++
			}
			f := fires[fc.Fire.UTC()]
			if f == nil {
				f = &fire{}
				fires[fc.Fire.UTC()] = f
			}
			f.calls++
			if f.first.IsZero() || fc.At.Before(f.first) {
				f.first, f.attempt = fc.At, fc.Attempt
			}
		}
		var stale, hard, retried, dups int
		var staleFires []string
		var inSpan, skipped int // fire times between the kill and threshold before the restart: delivered, not
		var recoveredLate []time.Duration
		for ft := killed.Truncate(time.Second).Add(time.Second); ft.Before(restarting.Add(-threshold)); ft = ft.Add(time.Second) {
			if f := fires[ft.UTC()]; f != nil {
				if f.attempt == 1 { // a retry of a task started before the kill is no misfire
					inSpan++
				}
			} else {
				skipped++
			}
		}
		keys := make([]time.Time, 0, len(fires))
		for ft := range fires {
			keys = append(keys, ft)
		}
		slices.SortFunc(keys, time.Time.Compare)
		for _, ft := range keys {
			f := fires[ft]
			late := f.first.Sub(ft)
			if f.calls > 1 {
				dups++
				t.Logf("%s: fire time %s called %d times (first 2xx at attempt %d, %s late)", s.name, ft.Format(time.RFC3339), f.calls, f.attempt, late.Round(time.Millisecond))
			}
			if !ft.Before(recovered) {
				recoveredLate = append(recoveredLate, late)
			}
			if late <= threshold {
				continue
			}
			if f.attempt > 1 {
				retried++
				continue
			}
			stale++
			staleFires = append(staleFires, fmt.Sprintf("%s %s late", ft.Format("15:04:05"), late.Round(time.Millisecond)))
			if late > threshold+schedGrace {
				hard++
			}
		}
		slices.Sort(recoveredLate)
		var p50, maxLate time.Duration
		if n := len(recoveredLate); n > 0 {
			p50, maxLate = recoveredLate[n/2], recoveredLate[n-1]
		}
		made, madeAhead := missed("ontime_schedule_misfires_total", s.policy), missed("ontime_schedule_fires_missed_total", s.policy)
		line := fmt.Sprintf("%s (%s): %d fire times delivered, %d early, %d delivered more than once; the down span (kill to threshold before the restart) %d fire times: %d delivered, %d not; delivered over the threshold %s late: %d [%s] (%d of them over it by more than %s), %d retried after the kill; misfires found %.0f, made ahead and cancelled %.0f; after the recovery %d fires, lateness p50 %s max %s",
			s.name, s.policy, len(fires), early, dups, inSpan+skipped, inSpan, skipped, threshold, stale, strings.Join(staleFires, ", "),
			hard, schedGrace, retried, made, madeAhead, len(recoveredLate), p50.Round(time.Millisecond), maxLate.Round(time.Millisecond))
		t.Log(line)
		lines = append(lines, line)
		if early > 0 {
			t.Errorf("%s: %d calls before their fire time", s.name, early)
		}
		if made+madeAhead == 0 {
			t.Errorf("%s: no misfire counted (ontime_schedule_misfires_total, ontime_schedule_fires_missed_total)", s.name)
		}
		if skipped == 0 {
			t.Errorf("%s: every fire time of the down span was delivered: nothing was missed, the scenario did not happen", s.name)
		}
		switch s.policy {
		case "skip":
			// A fire time of the span was older than the threshold whenever
			// a node could start it: skip delivers none.
			if inSpan > 0 {
				t.Errorf("%s (skip): %d fire times of the down span delivered", s.name, inSpan)
			}
			if hard > 0 {
				t.Errorf("%s (skip): %d fires delivered more than the misfire threshold %s (+%s) late: %s", s.name, hard, threshold, schedGrace, strings.Join(staleFires, ", "))
			}
		case "fire_once":
			// The one fire is the last missed fire time's, which may be
			// younger than the span (when the restart took a while).
			if stale < 1 || hard > 1 || stale > 2 || inSpan > 1 {
				t.Errorf("%s (fire_once): %d fires delivered over the misfire threshold %s late (%d by more than %s): %s; %d of the down span; want one for the missed span",
					s.name, stale, threshold, hard, schedGrace, strings.Join(staleFires, ", "), inSpan)
			}
		}
	}
	// chaosVerdict's line, for `make chaos`'s results file.
	line := "chaos schedule-owner-killed: " + strings.Join(lines, "; ") + fmt.Sprintf("; 2 nodes on MariaDB, both killed with SIGKILL, down %s (misfire threshold %s, made ahead %s); %s; load average %s",
		restarting.Sub(killed).Round(time.Millisecond), threshold, ahead, leases, loadAvg())
	t.Log(line)
	appendChaosOut(line)
}
